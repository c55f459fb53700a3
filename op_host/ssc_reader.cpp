#include "ssc_reader.h"

#include <cstdio>
#include <cstring>
#include <sstream>

#include "validate/region_switch.h"
#include "one_line.h"

namespace hpmoe {
namespace ssc {
namespace {

const char* const kTaskTypeNames[] = {
    "ENTRY_SIGNAL", "COUNT_PUT", "DISPATCH_PUT", "GMM", "SWIGLU", "COMBINE_PUT", "COMBINE_REDUCE",
    "BWD_DISPATCH_PUT", "GMM_TRANS_B", "GMM_WEIGHT_GRAD", "SWIGLU_GRAD", "BWD_COMBINE_REDUCE",
    "TOPK_WEIGHT_GRAD", "ADD", "GMM_SWIGLU", "GMM_SWIGLU_GRAD"};
static_assert(sizeof(kTaskTypeNames) / sizeof(kTaskTypeNames[0]) == kTaskTypeCount, "a task type has no name");

const char* const kSlotNames[kSlotCount] = {
    "x", "topk_ids", "topk_weights", "w1", "w2", "send_rows", "send_counts", "recv_counts", "peer_ready",
    "recv_x", "h", "a", "y_expert", "ret_y", "y", "dy", "recv_dy", "da", "dh", "dx_expert", "ret_dx", "dx",
    "dw1", "dw2", "dtopk_weights", "token_rows"};

bool IsCubeTask(uint32_t type) {
  return type == kTaskGmm || type == kTaskGmmTransB || type == kTaskGmmWeightGrad || type == kTaskGmmSwiglu ||
         type == kTaskGmmSwigluGrad;
}

// 2-D view of a tensor: all dims but the last folded into rows.
void TensorRowsCols(const SscTensor& t, uint64_t* rows, uint64_t* cols) {
  *rows = 1;
  for (uint32_t d = 0; d + 1 < t.ndim; ++d) *rows *= t.dims[d];
  *cols = t.ndim ? t.dims[t.ndim - 1] : 0;
}

std::string CheckRef(const SscView& v, const SscTensorRef& ref, uint32_t task, const char* what, uint32_t k) {
  if (ref.slot == kNoSlot) return "";
  const SscTensor* t = v.tensor(ref.slot);
  if (t == nullptr)
    return Format("task %u field %s[%u].slot: %u is not in the tensor table", task, what, k, ref.slot);
  if (ref.rank >= v.config().ep)
    return Format("task %u field %s[%u].rank: %u outside the EP group", task, what, k, ref.rank);
  uint64_t rows, cols;
  TensorRowsCols(*t, &rows, &cols);
  if (HPMOE_REGION_CHECK && (uint64_t(ref.row_offset) + ref.rows > rows || uint64_t(ref.col_offset) + ref.cols > cols)) {
    return Format("task %u field %s[%u]: region rows [%u,+%u) cols [%u,+%u) exceeds %s [%llu, %llu]", task, what, k,
                  ref.row_offset, ref.rows, ref.col_offset, ref.cols, SlotName(ref.slot),
                  (unsigned long long)rows, (unsigned long long)cols);
  }
  return "";
}

std::string CheckRecords(const SscView& v) {
  const SscConfig& c = v.config();
  for (uint32_t i = 0; i < v.num_tensors; ++i) {
    const SscTensor& t = v.tensors[i];
    if (t.slot >= kSlotCount) return Format("tensor %u: unknown slot %u", i, t.slot);
    if (t.ndim == 0 || t.ndim > kMaxTensorDims) return Format("tensor %u: ndim %u", i, t.ndim);
    if (t.dtype > kINT32) return Format("tensor %u: unknown dtype %u", i, t.dtype);
  }
  for (uint32_t i = 0; i < v.num_tasks; ++i) {
    const SscTask& t = v.tasks[i];
    if (t.task_type >= kTaskTypeCount) return Format("task %u: unknown task_type %u", i, t.task_type);
    const uint32_t want = IsCubeTask(t.task_type) ? kCTQ : kVTQ;
    if (t.queue_type != want) return Format("task %u (%s): queue_type %u", i, TaskTypeName(t.task_type), t.queue_type);
    for (uint32_t w = 0; w < kMaxWaits; ++w) {
      if (t.dependent_event[w] != kNoEvent && t.dependent_event[w] >= v.num_events)
        return Format("task %u: waits on event %u of %u", i, t.dependent_event[w], v.num_events);
    }
    for (uint32_t w = 0; w < kMaxTriggers; ++w) {
      if (t.trigger_event[w] != kNoEvent && t.trigger_rank[w] >= c.ep)
        return Format("task %u: triggers rank %u outside the EP group of %u", i, t.trigger_rank[w], c.ep);
    }
    if (t.tiling_data_position >= v.num_tilings)
      return Format("task %u: tiling_data_position %u of %u", i, t.tiling_data_position, v.num_tilings);
    for (uint32_t k = 0; k < kMaxInputs; ++k) {
      std::string e = CheckRef(v, t.inputs[k], i, "inputs", k);
      if (!e.empty()) return e;
    }
    for (uint32_t k = 0; k < kMaxOutputs; ++k) {
      std::string e = CheckRef(v, t.outputs[k], i, "outputs", k);
      if (!e.empty()) return e;
    }
  }
  const bool pools = (c.flags & kConfigClaimPool) != 0;
  if (pools ? v.num_queues < c.num_aic + c.num_aiv : v.num_queues != c.num_aic + c.num_aiv)
    return Format("%u queues for %u AIC + %u AIV workers%s", v.num_queues, c.num_aic, c.num_aiv,
                  pools ? " + pool queues" : "");
  for (uint32_t q = 0; q < v.num_queues; ++q) {
    const SscQueue& queue = v.queues[q];
    if (queue.queue_type > kPoolQueue || (queue.queue_type == kPoolQueue && !pools))
      return Format("queue %u: unknown queue_type %u", q, queue.queue_type);
    if (uint64_t(queue.first_entry) + queue.count > v.num_entries)
      return Format("queue %u: entries [%u,+%u) outside %u", q, queue.first_entry, queue.count, v.num_entries);
    for (uint32_t k = 0; k < queue.count; ++k) {
      const uint32_t task = v.entries[queue.first_entry + k];
      if (task >= v.num_tasks) return Format("queue %u entry %u: task %u of %u", q, k, task, v.num_tasks);
      if (!QueueMayHold(c, queue.queue_type, v.tasks[task].queue_type))
        return Format("queue %u entry %u: task %u belongs to the other queue type", q, k, task);
    }
  }
  return "";
}

}  // namespace

const char* TaskTypeName(uint32_t type) { return type < kTaskTypeCount ? kTaskTypeNames[type] : "UNKNOWN"; }
const char* QueueTypeName(uint32_t type) {
  return type == kCTQ ? "CTQ" : type == kVTQ ? "VTQ" : type == kPoolQueue ? "POOL" : "UNKNOWN";
}
const char* SlotName(uint32_t slot) { return slot < kSlotCount ? kSlotNames[slot] : "unknown"; }

const SscTensor* SscView::tensor(uint32_t slot) const {
  for (uint32_t i = 0; i < num_tensors; ++i) {
    if (tensors[i].slot == slot) return &tensors[i];
  }
  return nullptr;
}

uint32_t Crc32(const uint8_t* data, size_t size, size_t skip_offset) {
  static uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) {
    const uint8_t byte = (i >= skip_offset && i < skip_offset + 4) ? 0 : data[i];
    crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  }
  return crc ^ 0xFFFFFFFFu;
}

std::string ParseSsc(const uint8_t* data, size_t size, SscView* view) {
  *view = SscView();
  if (data == nullptr || size < sizeof(SscHeader))
    return Format("truncated: %zu bytes, the header alone needs %zu", size, sizeof(SscHeader));
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0) return "buffer is not 16-byte aligned";
  const SscHeader* h = reinterpret_cast<const SscHeader*>(data);
  if (h->magic != kMagic) return Format("not an SSC file (magic 0x%08x)", h->magic);
  if (h->version_major != kVersionMajor)
    return Format("SSC version %u.%u, this build reads %u.x", h->version_major, h->version_minor, kVersionMajor);
  if (h->header_bytes != sizeof(SscHeader)) return Format("header_bytes %u != %zu", h->header_bytes, sizeof(SscHeader));
  if (h->file_bytes != size) return Format("truncated or padded: header says %u bytes, buffer has %zu", h->file_bytes, size);
  if (Crc32(data, size, offsetof(SscHeader, checksum)) != h->checksum) return "checksum mismatch (corrupted file)";
  const SscConfig& c = h->config;
  if (c.ep == 0 || c.tokens == 0 || c.hidden == 0 || c.inter == 0 || c.experts_per_rank == 0 || c.topk == 0 ||
      c.tile_m == 0 || c.recv_rows_per_src == 0 || c.wgrad_tile == 0 || c.token_tile == 0 || c.num_aic == 0 ||
      c.num_aiv == 0)
    return "config record has a zero size or worker count";
  if (c.dtype > kBF16) return Format("config dtype %u is not fp32/fp16/bf16", c.dtype);
  if (c.recv_rows_per_src % c.tile_m) return "config recv_rows_per_src is not a multiple of tile_m";
  if (h->direction > kBackward) return Format("direction %u is neither fwd nor bwd", h->direction);
  if (h->rank >= c.ep) return Format("rank %u outside the EP group of %u", h->rank, c.ep);
  if (h->num_workers != c.num_aic + c.num_aiv) return "num_workers disagrees with the config";

  static const uint32_t kRecordBytes[kSectionCount] = {sizeof(SscTensor), sizeof(SscTask),  sizeof(SscEvent),
                                                       sizeof(SscQueue),  sizeof(uint32_t), sizeof(SscTiling)};
  static const char* const kNames[kSectionCount] = {"tensors", "tasks", "events", "queues", "queue entries", "tilings"};
  const void* base[kSectionCount];
  for (uint32_t s = 0; s < kSectionCount; ++s) {
    const SscSection& sec = h->sections[s];
    if (sec.record_bytes != kRecordBytes[s])
      return Format("section %s records are %u bytes, expected %u", kNames[s], sec.record_bytes, kRecordBytes[s]);
    if (sec.offset < sizeof(SscHeader) || sec.offset % 16 != 0 ||
        uint64_t(sec.offset) + uint64_t(sec.count) * sec.record_bytes > size)
      return Format("section %s [%u, +%llu) lies outside the file", kNames[s], sec.offset,
                    (unsigned long long)(uint64_t(sec.count) * sec.record_bytes));
    base[s] = data + sec.offset;
  }
  SscView v;
  v.header = h;
  v.tensors = static_cast<const SscTensor*>(base[kSecTensors]);
  v.num_tensors = h->sections[kSecTensors].count;
  v.tasks = static_cast<const SscTask*>(base[kSecTasks]);
  v.num_tasks = h->sections[kSecTasks].count;
  v.events = static_cast<const SscEvent*>(base[kSecEvents]);
  v.num_events = h->sections[kSecEvents].count;
  v.queues = static_cast<const SscQueue*>(base[kSecQueues]);
  v.num_queues = h->sections[kSecQueues].count;
  v.entries = static_cast<const uint32_t*>(base[kSecQueueEntries]);
  v.num_entries = h->sections[kSecQueueEntries].count;
  v.tilings = static_cast<const SscTiling*>(base[kSecTilings]);
  v.num_tilings = h->sections[kSecTilings].count;
  std::string error = CheckRecords(v);
  if (!error.empty()) return error;
  *view = v;
  return "";
}

std::string CheckConfig(const SscView& view, const SscConfig& expected) {
  const SscConfig& got = view.config();
#define HPMOE_CHECK_FIELD(f) \
  if (got.f != expected.f) return Format("SSC compiled for " #f "=%u, runtime has " #f "=%u", got.f, expected.f);
  HPMOE_CHECK_FIELD(ep)
  HPMOE_CHECK_FIELD(tokens)
  HPMOE_CHECK_FIELD(hidden)
  HPMOE_CHECK_FIELD(inter)
  HPMOE_CHECK_FIELD(experts_per_rank)
  HPMOE_CHECK_FIELD(topk)
  HPMOE_CHECK_FIELD(dtype)
  HPMOE_CHECK_FIELD(tile_m)
  HPMOE_CHECK_FIELD(recv_rows_per_src)
  HPMOE_CHECK_FIELD(wgrad_tile)
  HPMOE_CHECK_FIELD(token_tile)
  HPMOE_CHECK_FIELD(num_aic)
  HPMOE_CHECK_FIELD(num_aiv)
  HPMOE_CHECK_FIELD(flags)
#undef HPMOE_CHECK_FIELD
  return "";
}

namespace {

void RefJson(std::ostringstream& o, const SscTensorRef& r) {
  o << "{\"slot\":\"" << SlotName(r.slot) << "\",\"flags\":" << r.flags << ",\"rank\":" << r.rank << ",\"rows\":["
    << r.row_offset << "," << r.rows << "],\"cols\":[" << r.col_offset << "," << r.cols << "]}";
}

template <size_t N>
void RefListJson(std::ostringstream& o, const SscTensorRef (&refs)[N]) {
  o << "[";
  bool first = true;
  for (size_t k = 0; k < N; ++k) {
    if (refs[k].slot == kNoSlot) continue;
    if (!first) o << ",";
    RefJson(o, refs[k]);
    first = false;
  }
  o << "]";
}

}  // namespace

std::string SscToJson(const SscView& v) {
  std::ostringstream o;
  const SscConfig& c = v.config();
  o << "{\"rank\":" << v.header->rank << ",\"direction\":\"" << (v.header->direction == kForward ? "fwd" : "bwd")
    << "\",\"config\":{\"ep\":" << c.ep << ",\"tokens\":" << c.tokens << ",\"hidden\":" << c.hidden
    << ",\"inter\":" << c.inter << ",\"experts_per_rank\":" << c.experts_per_rank << ",\"topk\":" << c.topk
    << ",\"dtype\":" << c.dtype << ",\"tile_m\":" << c.tile_m << ",\"recv_rows_per_src\":" << c.recv_rows_per_src
    << ",\"wgrad_tile\":" << c.wgrad_tile << ",\"token_tile\":" << c.token_tile << ",\"num_aic\":" << c.num_aic
    << ",\"num_aiv\":" << c.num_aiv << ",\"flags\":" << c.flags << "},\"tensors\":[";
  for (uint32_t i = 0; i < v.num_tensors; ++i) {
    const SscTensor& t = v.tensors[i];
    o << (i ? "," : "") << "{\"slot\":\"" << SlotName(t.slot) << "\",\"role\":" << t.role << ",\"dtype\":" << t.dtype
      << ",\"flags\":" << t.flags << ",\"shape\":[";
    for (uint32_t d = 0; d < t.ndim; ++d) o << (d ? "," : "") << t.dims[d];
    o << "],\"bytes\":" << t.bytes << "}";
  }
  o << "],\"tasks\":[";
  for (uint32_t i = 0; i < v.num_tasks; ++i) {
    const SscTask& t = v.tasks[i];
    o << (i ? "," : "") << "{\"task_type\":\"" << TaskTypeName(t.task_type) << "\",\"queue_type\":\""
      << QueueTypeName(t.queue_type) << "\",\"dependent_event\":[";
    bool first = true;
    for (uint32_t w = 0; w < kMaxWaits; ++w) {
      if (t.dependent_event[w] == kNoEvent) continue;
      o << (first ? "" : ",") << t.dependent_event[w];
      first = false;
    }
    o << "],\"trigger\":[";
    first = true;
    for (uint32_t w = 0; w < kMaxTriggers; ++w) {
      if (t.trigger_event[w] == kNoEvent) continue;
      o << (first ? "" : ",") << "[" << t.trigger_rank[w] << "," << t.trigger_event[w] << "]";
      first = false;
    }
    o << "],\"task_index\":" << t.task_index << ",\"task_split_num\":" << t.task_split_num
      << ",\"task_split_value\":" << t.task_split_value << ",\"tiling_data_position\":" << t.tiling_data_position
      << ",\"op_id\":" << t.op_id << ",\"peer\":" << t.peer << ",\"expert\":" << t.expert << ",\"inputs\":";
    RefListJson(o, t.inputs);
    o << ",\"outputs\":";
    RefListJson(o, t.outputs);
    o << "}";
  }
  o << "],\"events\":[";
  for (uint32_t i = 0; i < v.num_events; ++i) {
    const SscEvent& e = v.events[i];
    o << (i ? "," : "") << "{\"threshold\":" << e.threshold << ",\"flags\":" << e.flags << ",\"op_id\":" << e.op_id << "}";
  }
  o << "],\"queues\":[";
  for (uint32_t q = 0; q < v.num_queues; ++q) {
    const SscQueue& queue = v.queues[q];
    o << (q ? "," : "") << "{\"queue_type\":\"" << QueueTypeName(queue.queue_type) << "\",\"worker\":" << queue.worker
      << ",\"tasks\":[";
    for (uint32_t k = 0; k < queue.count; ++k) o << (k ? "," : "") << v.entries[queue.first_entry + k];
    o << "]}";
  }
  o << "],\"tilings\":[";
  for (uint32_t i = 0; i < v.num_tilings; ++i) {
    const SscTiling& t = v.tilings[i];
    o << (i ? "," : "") << "{\"op_id\":" << t.op_id << ",\"task_type\":" << t.task_type << ",\"m\":" << t.m
      << ",\"n\":" << t.n << ",\"k\":" << t.k << ",\"experts\":" << t.experts << "}";
  }
  o << "]}";
  return o.str();
}

}  // namespace ssc
}  // namespace hpmoe
