#include "../../op_kernel/runtime/program.h"
#include "../../op_kernel/runtime/task_access.h"
#include "checks.h"
#include "region_switch.h"

namespace hpmoe {
namespace ssc {
namespace validate {
namespace {

constexpr uint32_t kKnownRefFlags = kRefRemote | kRefRowsDynamic | kRefGather;

// "ret_y" or "ret_y|y_expert": the slots a mask allows, for messages.
std::string MaskNames(uint32_t mask) {
  if (mask == 0) return "nothing (unused)";
  if (mask == rt::kActivationSlots) return "an activation slot";
  std::string out;
  for (uint32_t s = 0; s < kSlotCount; ++s) {
    if (!(mask & rt::SlotBit(s))) continue;
    if (!out.empty()) out += "|";
    out += SlotName(s);
  }
  return out;
}

uint32_t RefSlot(const SscTask& t, uint32_t pos) {  // positions: inputs 0..3, then outputs 0..1
  return pos < kMaxInputs ? t.inputs[pos].slot : t.outputs[pos - kMaxInputs].slot;
}
uint32_t MaskAt(const rt::TaskAccess& a, uint32_t pos) {
  return pos < kMaxInputs ? a.inputs[pos] : a.outputs[pos - kMaxInputs];
}
constexpr uint32_t kPositions = kMaxInputs + kMaxOutputs;

// The access-table row `t` follows in a `direction` file, or the closest row and its first mismatching
// position (for the message). Returns nullptr when no row matches.
const rt::TaskAccess* MatchAccess(const SscTask& t, uint32_t direction, uint32_t config_flags,
                                  const rt::TaskAccess** closest, uint32_t* bad_pos) {
  const uint32_t dir_bit = direction == kForward ? rt::kAccessFwd : rt::kAccessBwd;
  int best = -1;
  for (uint32_t i = 0; i < rt::kTaskAccessCount; ++i) {
    const rt::TaskAccess& a = rt::kTaskAccess[i];
    if (a.task_type != t.task_type || !(a.flags & dir_bit) || !rt::LayoutAllows(a.flags, config_flags)) continue;
    int matched = 0;
    uint32_t first_bad = kPositions;
    for (uint32_t p = 0; p < kPositions; ++p) {
      if (rt::SlotAllowed(MaskAt(a, p), RefSlot(t, p))) ++matched;
      else if (first_bad == kPositions) first_bad = p;
    }
    if (first_bad == kPositions) return &a;
    if (matched > best) {
      best = matched;
      *closest = &a;
      *bad_pos = first_bad;
    }
  }
  return nullptr;
}

std::string CheckAccess(const SscView& v, uint32_t i, const rt::TaskAccess** row) {
  const SscTask& t = v.tasks[i];
  const rt::TaskAccess* closest = nullptr;
  uint32_t pos = 0;
  *row = MatchAccess(t, v.header->direction, v.config().flags, &closest, &pos);
  if (*row != nullptr) return "";
  if (closest == nullptr)
    return Format("task %u (%s) field task_type: %u does not run in a %s schedule", i, TaskTypeName(t.task_type),
                  t.task_type, v.header->direction == kForward ? "fwd" : "bwd");
  const bool in = pos < kMaxInputs;
  const uint32_t slot = RefSlot(t, pos);
  return Format("task %u (%s) field %s[%u].slot: %u (%s); its handler takes %s there", i, TaskTypeName(t.task_type),
                in ? "inputs" : "outputs", in ? pos : pos - kMaxInputs, slot,
                slot == kNoSlot ? "unused" : SlotName(slot), MaskNames(MaskAt(*closest, pos)).c_str());
}

std::string CheckRegion(const SscView& v, uint32_t i, const SscTensorRef& r, const char* field, uint32_t k,
                        uint32_t rank, bool may_be_remote) {
  const SscTask& t = v.tasks[i];
  const char* type = TaskTypeName(t.task_type);
  if (r.flags & ~kKnownRefFlags) return Format("task %u (%s) field %s[%u].flags: 0x%x (unknown bits)", i, type, field, k, r.flags);
  if (r.rank >= v.config().ep)
    return Format("task %u (%s) field %s[%u].rank: %u outside the EP group of %u", i, type, field, k, r.rank, v.config().ep);
  const bool remote = r.rank != rank;
  if (remote != ((r.flags & kRefRemote) != 0))
    return Format("task %u (%s) field %s[%u].flags: 0x%x disagrees with rank %u (remote flag %s)", i, type, field, k,
                  r.flags, r.rank, remote ? "missing" : "set on a local region");
  if (remote && !may_be_remote)
    return Format("task %u (%s) field %s[%u].rank: %u; only a put's output may name another rank", i, type, field, k, r.rank);
#if HPMOE_REGION_CHECK
  const SscTensor* tensor = v.tensor(r.slot);
  if (tensor == nullptr)
    return Format("task %u (%s) field %s[%u].slot: %u (%s) is not in the tensor table", i, type, field, k, r.slot,
                  SlotName(r.slot));
  uint64_t rows = 1;
  for (uint32_t d = 0; d + 1 < tensor->ndim; ++d) rows *= tensor->dims[d];
  const uint64_t cols = tensor->dims[tensor->ndim - 1];
  if (r.rows == 0 || uint64_t(r.row_offset) + r.rows > rows)
    return Format("task %u (%s) field %s[%u].rows: [%u,+%u) outside %s's %llu rows", i, type, field, k, r.row_offset,
                  r.rows, SlotName(r.slot), (unsigned long long)rows);
  if (r.cols == 0 || uint64_t(r.col_offset) + r.cols > cols)
    return Format("task %u (%s) field %s[%u].cols: [%u,+%u) outside %s's %llu columns", i, type, field, k,
                  r.col_offset, r.cols, SlotName(r.slot), (unsigned long long)cols);
#endif
  return "";
}

std::string CheckEventsNamed(const SscView& v, uint32_t i, uint32_t rank, uint32_t counter_capacity) {
  const SscTask& t = v.tasks[i];
  const char* type = TaskTypeName(t.task_type);
  for (uint32_t w = 0; w < kMaxWaits; ++w) {
    const uint32_t e = t.dependent_event[w];
    if (e != kNoEvent && e >= v.num_events)
      return Format("task %u (%s) field dependent_event[%u]: %u, this file has %u events", i, type, w, e, v.num_events);
  }
  for (uint32_t k = 0; k < kMaxTriggers; ++k) {
    const uint32_t e = t.trigger_event[k];
    if (e == kNoEvent) continue;
    if (t.trigger_rank[k] >= v.config().ep)
      return Format("task %u (%s) field trigger_rank[%u]: %u outside the EP group of %u", i, type, k, t.trigger_rank[k],
                    v.config().ep);
    if (counter_capacity != 0 && e >= counter_capacity)
      return Format("task %u (%s) field trigger_event[%u]: triggers event %u; the backend reserves %u counters per rank",
                    i, type, k, e, counter_capacity);
    if (t.trigger_rank[k] == rank && e >= v.num_events)
      return Format("task %u (%s) field trigger_event[%u]: local event %u, this file has %u events", i, type, k, e,
                    v.num_events);
  }
  return "";
}

}  // namespace

std::string CheckTaskRecords(const SscView& v, uint32_t rank, uint32_t counter_capacity) {
  const SscConfig& c = v.config();
  for (uint32_t i = 0; i < v.num_tilings; ++i)
    if (v.tilings[i].task_type >= kTaskTypeCount)
      return Format("tiling %u field task_type: %u (unknown)", i, v.tilings[i].task_type);
  for (uint32_t i = 0; i < v.num_tasks; ++i) {
    const SscTask& t = v.tasks[i];
    const char* type = TaskTypeName(t.task_type);
    if (t.task_type >= kTaskTypeCount) return Format("task %u field task_type: %u (unknown)", i, t.task_type);
    if (t.task_split_num == 0 || t.task_index >= t.task_split_num)
      return Format("task %u (%s) field task_index: %u of task_split_num %u", i, type, t.task_index, t.task_split_num);
    if (t.expert >= c.experts_per_rank)
      return Format("task %u (%s) field expert: %u, %u local experts", i, type, t.expert, c.experts_per_rank);
    if (t.peer != 0xFFFFFFFFu && t.peer >= c.ep)
      return Format("task %u (%s) field peer: %u outside the EP group of %u", i, type, t.peer, c.ep);
    std::string err;
    const rt::TaskAccess* row = nullptr;
#if HPMOE_REGION_CHECK
    err = CheckAccess(v, i, &row);
    if (!err.empty()) return err;
#endif
    const bool put = rt::IsPutTask(t.task_type);
    for (uint32_t k = 0; k < kMaxInputs && err.empty(); ++k)
      if (t.inputs[k].slot != kNoSlot) err = CheckRegion(v, i, t.inputs[k], "inputs", k, rank, false);
    for (uint32_t k = 0; k < kMaxOutputs && err.empty(); ++k) {
      const bool remote_ok = k == 0 && (row != nullptr ? (row->flags & rt::kAccessRemoteOutput) != 0 : put);
      if (t.outputs[k].slot != kNoSlot) err = CheckRegion(v, i, t.outputs[k], "outputs", k, rank, remote_ok);
    }
    if (err.empty()) err = CheckEventsNamed(v, i, rank, counter_capacity);
    if (!err.empty()) return err;
    if (put) {
      if (t.outputs[0].slot == kNoSlot) return Format("task %u (%s) field outputs[0].slot: unused; a put needs one", i, type);
      if (t.trigger_event[0] != kNoEvent && t.trigger_rank[0] != t.outputs[0].rank)
        return Format("task %u (%s) field trigger_rank[0]: %u, but it puts to rank %u", i, type, t.trigger_rank[0],
                      t.outputs[0].rank);
    }
  }
  return "";
}

}  // namespace validate
}  // namespace ssc
}  // namespace hpmoe
