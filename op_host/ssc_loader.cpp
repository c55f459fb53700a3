#include "ssc_loader.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace hpmoe {
namespace ssc {
namespace {

template <typename... Args>
std::string Format(const char* fmt, Args... args) {
  char buf[400];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

const char* DirName(uint32_t direction) { return direction == kForward ? "fwd" : "bwd"; }

std::string CheckTasks(const SscView& v, uint32_t rank, uint32_t counter_capacity) {
  for (uint32_t i = 0; i < v.num_tasks; ++i) {
    const SscTask& t = v.tasks[i];
    for (uint32_t k = 0; k < kMaxTriggers; ++k) {
      if (t.trigger_event[k] == kNoEvent) continue;
      if (counter_capacity != 0 && t.trigger_event[k] >= counter_capacity)
        return Format("task %u (%s) triggers event %u; the backend reserves %u counters per rank", i,
                      TaskTypeName(t.task_type), t.trigger_event[k], counter_capacity);
      if (t.trigger_rank[k] == rank && t.trigger_event[k] >= v.num_events)
        return Format("task %u (%s) triggers local event %u of %u", i, TaskTypeName(t.task_type),
                      t.trigger_event[k], v.num_events);
    }
    if (rt::IsPutTask(t.task_type)) {
      if (t.outputs[0].slot == kNoSlot) return Format("task %u (%s) has no output region", i, TaskTypeName(t.task_type));
      if (t.trigger_event[0] != kNoEvent && t.trigger_rank[0] != t.outputs[0].rank)
        return Format("task %u (%s) puts to rank %u but signals rank %u", i, TaskTypeName(t.task_type),
                      t.outputs[0].rank, t.trigger_rank[0]);
    }
    for (uint32_t k = 0; k < kMaxOutputs; ++k) {
      const SscTensorRef& r = t.outputs[k];
      if (r.slot != kNoSlot && r.rank != rank && !rt::IsPutTask(t.task_type))
        return Format("task %u (%s) writes rank %u but is not a put", i, TaskTypeName(t.task_type), r.rank);
    }
    for (uint32_t k = 0; k < kMaxInputs; ++k) {
      const SscTensorRef& r = t.inputs[k];
      if (r.slot != kNoSlot && r.rank != rank)
        return Format("task %u (%s) reads rank %u: tasks read only local memory", i, TaskTypeName(t.task_type), r.rank);
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
    if (!seen[i]) return Format("task %u (%s) is in no queue", i, TaskTypeName(v.tasks[i].task_type));
  }
  return "";
}

}  // namespace

std::string LoadSsc(const uint8_t* data, size_t size, const LoadExpect& expect, LoadedSsc* out) {
  out->loaded = false;
  out->bytes.Allocate(size);
  if (size) std::memcpy(out->bytes.data, data, size);
  std::string err = ParseSsc(out->bytes.data, size, &out->view);
  if (err.empty() && expect.config != nullptr) err = CheckConfig(out->view, *expect.config);
  const SscView& v = out->view;
  if (err.empty() && v.header->direction != expect.direction)
    err = Format("SSC is a %s schedule, given as the %s one", DirName(v.header->direction), DirName(expect.direction));
  if (err.empty() && v.header->rank != expect.rank)
    err = Format("SSC is for rank %u, loaded on rank %u", v.header->rank, expect.rank);
  if (err.empty() && expect.counter_capacity != 0 && v.num_events > expect.counter_capacity)
    err = Format("SSC has %u events; the backend reserves %u counters per rank", v.num_events, expect.counter_capacity);
  if (err.empty()) err = CheckTasks(v, expect.rank, expect.counter_capacity);
  if (!err.empty()) return Format("rank %u %s SSC: %s", expect.rank, DirName(expect.direction), err.c_str());
  rt::SscProgram& p = out->program;
  p.tasks = v.tasks;
  p.events = v.events;
  p.queues = v.queues;
  p.entries = v.entries;
  p.num_tasks = v.num_tasks;
  p.num_events = v.num_events;
  p.num_queues = v.num_queues;
  p.rank = expect.rank;
  p.invocation = 0;
  out->loaded = true;
  return "";
}

std::string ValidateGroup(const LoadedSsc* const* ranks, uint32_t num_ranks) {
  // Count every trigger of every rank's file against the counter it lands on; each event's threshold must
  // equal its count, else a wait passes early (silently wrong data) or never (a stall).
  std::vector<std::vector<uint32_t>> counted(num_ranks);
  for (uint32_t r = 0; r < num_ranks; ++r) {
    if (ranks[r] == nullptr || !ranks[r]->loaded) return Format("rank %u: no loaded SSC in the group", r);
    counted[r].assign(ranks[r]->view.num_events, 0);
  }
  for (uint32_t r = 0; r < num_ranks; ++r) {
    const SscView& v = ranks[r]->view;
    for (uint32_t i = 0; i < v.num_tasks; ++i) {
      for (uint32_t k = 0; k < kMaxTriggers; ++k) {
        const uint32_t e = v.tasks[i].trigger_event[k];
        if (e == kNoEvent) continue;
        const uint32_t dst = v.tasks[i].trigger_rank[k];
        if (dst >= num_ranks || e >= counted[dst].size())
          return Format("rank %u task %u (%s) field trigger_event[%u]: event %u on rank %u does not exist", r, i,
                        TaskTypeName(v.tasks[i].task_type), k, e, dst);
        ++counted[dst][e];
      }
    }
  }
  for (uint32_t r = 0; r < num_ranks; ++r) {
    const SscView& v = ranks[r]->view;
    for (uint32_t e = 0; e < v.num_events; ++e) {
      if (v.events[e].threshold != counted[r][e])
        return Format("rank %u %s SSC event %u field threshold: %u, but the group's files trigger it %u times", r,
                      DirName(v.header->direction), e, v.events[e].threshold, counted[r][e]);
    }
  }
  return "";
}

}  // namespace ssc
}  // namespace hpmoe
