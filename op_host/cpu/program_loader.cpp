#include "program_loader.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace hpmoe {
namespace cpu {
namespace {

template <typename... Args>
std::string Format(const char* fmt, Args... args) {
  char buf[400];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

const char* kDirNames[2] = {"fwd", "bwd"};

std::string CheckTensors(const ssc::SscView& v, const HeapLayout& layout) {
  for (uint32_t i = 0; i < v.num_tensors; ++i) {
    const ssc::SscTensor& t = v.tensors[i];
    const SlotShape& want = layout.slots[t.slot];
    bool same = t.ndim == want.ndim && t.dtype == want.dtype && t.bytes == want.bytes;
    for (uint32_t d = 0; same && d < t.ndim; ++d) same = t.dims[d] == want.dims[d];
    if (!same)
      return Format("tensor %s has shape/dtype/bytes that do not match the config (%llu bytes, expected %llu)",
                    ssc::SlotName(t.slot), (unsigned long long)t.bytes, (unsigned long long)want.bytes);
  }
  return "";
}

std::string CheckTasks(const ssc::SscView& v, uint32_t rank, uint32_t counter_capacity) {
  for (uint32_t i = 0; i < v.num_tasks; ++i) {
    const ssc::SscTask& t = v.tasks[i];
    for (uint32_t k = 0; k < ssc::kMaxTriggers; ++k) {
      if (t.trigger_event[k] == ssc::kNoEvent) continue;
      if (t.trigger_event[k] >= counter_capacity)
        return Format("task %u (%s) triggers event %u; the heap reserves %u counters per rank", i,
                      ssc::TaskTypeName(t.task_type), t.trigger_event[k], counter_capacity);
      if (t.trigger_rank[k] == rank && t.trigger_event[k] >= v.num_events)
        return Format("task %u (%s) triggers local event %u of %u", i, ssc::TaskTypeName(t.task_type),
                      t.trigger_event[k], v.num_events);
    }
    if (rt::IsPutTask(t.task_type)) {
      if (t.outputs[0].slot == ssc::kNoSlot) return Format("task %u (%s) has no output region", i, ssc::TaskTypeName(t.task_type));
      if (t.trigger_event[0] != ssc::kNoEvent && t.trigger_rank[0] != t.outputs[0].rank)
        return Format("task %u (%s) puts to rank %u but signals rank %u", i, ssc::TaskTypeName(t.task_type),
                      t.outputs[0].rank, t.trigger_rank[0]);
    }
    for (uint32_t k = 0; k < ssc::kMaxOutputs; ++k) {
      const ssc::SscTensorRef& r = t.outputs[k];
      if (r.slot != ssc::kNoSlot && r.rank != rank && !rt::IsPutTask(t.task_type))
        return Format("task %u (%s) writes rank %u but is not a put", i, ssc::TaskTypeName(t.task_type), r.rank);
    }
    for (uint32_t k = 0; k < ssc::kMaxInputs; ++k) {
      const ssc::SscTensorRef& r = t.inputs[k];
      if (r.slot != ssc::kNoSlot && r.rank != rank)
        return Format("task %u (%s) reads rank %u: tasks read only local memory", i, ssc::TaskTypeName(t.task_type),
                      r.rank);
    }
  }
  std::vector<uint8_t> seen(v.num_tasks, 0);
  for (uint32_t q = 0; q < v.num_queues; ++q) {
    for (uint32_t k = 0; k < v.queues[q].count; ++k) {
      const uint32_t task = v.entries[v.queues[q].first_entry + k];
      if (seen[task]++) return Format("task %u appears twice in the queues", task);
    }
  }
  for (uint32_t i = 0; i < v.num_tasks; ++i) {
    if (!seen[i]) return Format("task %u (%s) is in no queue", i, ssc::TaskTypeName(v.tasks[i].task_type));
  }
  return "";
}

}  // namespace

std::string LoadProgram(const uint8_t* data, size_t size, const ssc::SscConfig& expected, uint32_t rank,
                        uint32_t direction, const HeapLayout& layout, LoadedProgram* out) {
  out->loaded = false;
  out->bytes.Allocate(size);
  if (size) std::memcpy(out->bytes.data, data, size);
  std::string err = ssc::ParseSsc(out->bytes.data, size, &out->view);
  if (err.empty()) err = ssc::CheckConfig(out->view, expected);
  const ssc::SscView& v = out->view;
  if (err.empty() && v.header->direction != direction)
    err = Format("SSC is a %s schedule, given as the %s one", kDirNames[v.header->direction & 1], kDirNames[direction & 1]);
  if (err.empty() && v.header->rank != rank) err = Format("SSC is for rank %u, loaded on rank %u", v.header->rank, rank);
  if (err.empty() && v.num_events > layout.counter_capacity[direction])
    err = Format("SSC has %u events; the heap reserves %u counters per rank", v.num_events,
                 layout.counter_capacity[direction]);
  if (err.empty()) err = CheckTensors(v, layout);
  if (err.empty()) err = CheckTasks(v, rank, layout.counter_capacity[direction]);
  if (!err.empty()) return Format("rank %u %s SSC: %s", rank, kDirNames[direction & 1], err.c_str());
  rt::SscProgram& p = out->program;
  p.tasks = v.tasks;
  p.events = v.events;
  p.queues = v.queues;
  p.entries = v.entries;
  p.num_tasks = v.num_tasks;
  p.num_events = v.num_events;
  p.num_queues = v.num_queues;
  p.rank = rank;
  p.invocation = 0;
  out->loaded = true;
  return "";
}

}  // namespace cpu
}  // namespace hpmoe
