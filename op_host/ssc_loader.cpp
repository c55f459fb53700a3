#include "ssc_loader.h"

#include <cstring>
#include <vector>

#include "validate/checks.h"

namespace hpmoe {
namespace ssc {

namespace {

const char* DirName(uint32_t direction) { return direction == kForward ? "fwd" : "bwd"; }

// Everything one rank's file can be checked for on its own; `rank` is the rank it will run on.
std::string ValidateAlone(const SscView& v, uint32_t rank, uint32_t counter_capacity) {
  std::string err = validate::CheckConfigRecord(v.config());
  if (err.empty()) err = validate::CheckTensorTable(v);
  if (err.empty()) err = validate::CheckTaskRecords(v, rank, counter_capacity);
  if (err.empty()) err = validate::CheckQueueRecords(v);
  if (err.empty()) err = validate::CheckEventsAlone(v, rank);
  return err;
}

}  // namespace

std::string LoadSsc(const uint8_t* data, size_t size, const LoadExpect& expect, LoadedSsc* out) {
  out->loaded = false;
  out->bytes.Allocate(size);
  if (size) std::memcpy(out->bytes.data, data, size);
  LoadExpect want = expect;
  if (want.from_file && size >= sizeof(SscHeader)) {  // tools: the file names its own rank and direction
    SscHeader h;
    std::memcpy(&h, data, sizeof h);
    want.rank = h.rank;
    want.direction = h.direction;
  }
  std::string err = ParseSsc(out->bytes.data, size, &out->view);
  if (err.empty() && want.config != nullptr) err = CheckConfig(out->view, *want.config);
  const SscView& v = out->view;
  if (err.empty() && v.header->direction != want.direction)
    err = Format("SSC is a %s schedule, given as the %s one", DirName(v.header->direction), DirName(want.direction));
  if (err.empty() && v.header->rank != want.rank)
    err = Format("SSC is for rank %u, loaded on rank %u", v.header->rank, want.rank);
  // A pool's claim counter is counter num_events: one more than the events. (The header is read only once the
  // file parsed: a failed parse leaves the view empty.)
  const uint32_t counters = err.empty() ? CountersNeeded(v) : 0u;
  if (err.empty() && want.counter_capacity != 0 && counters > want.counter_capacity)
    err = Format("SSC needs %u counters (events and claim counter); the backend reserves %u per rank", counters,
                 want.counter_capacity);
  if (err.empty()) err = ValidateAlone(v, want.rank, want.counter_capacity);
  if (!err.empty()) return Format("rank %u %s SSC: %s", want.rank, DirName(want.direction & 1), err.c_str());
  rt::SscProgram& p = out->program;
  p.tasks = v.tasks;
  p.events = v.events;
  p.queues = v.queues;
  p.entries = v.entries;
  p.num_tasks = v.num_tasks;
  p.num_events = v.num_events;
  p.num_queues = v.num_queues;
  p.rank = want.rank;
  p.invocation = 0;
  const SscConfig& c = v.config();
  if (c.flags & kConfigClaimPool) {  // the validator checked: only pool queues after the workers' queues
    p.pool = v.queues + (c.num_aic + c.num_aiv);
    p.num_pool = v.num_queues - (c.num_aic + c.num_aiv);
    // With mixed queues every worker runs every handler, so the vector-queue workers claim too once their own
    // queue is done, except under row pipelines (scheduler/hpmoe/config.py pool_claimers says why; the
    // validator's deadlock model counts the same claimers).
    const bool all_claim = (c.flags & kConfigMixedQueues) && !(c.flags & kConfigRowPipelines);
    p.claimers = all_claim ? c.num_aic + c.num_aiv : c.num_aic;
  }
  out->loaded = true;
  return "";
}

std::string ValidateGroup(const LoadedSsc* const* ranks, uint32_t num_ranks) {
  if (num_ranks == 0) return "no SSC files in the group";
  for (uint32_t r = 0; r < num_ranks; ++r)
    if (ranks[r] == nullptr || !ranks[r]->loaded) return Format("rank %u: no loaded SSC in the group", r);
  const SscView& first = ranks[0]->view;
  if (first.config().ep != num_ranks)
    return Format("the group has %u files, the config's EP group %u ranks", num_ranks, first.config().ep);
  for (uint32_t r = 0; r < num_ranks; ++r) {
    const SscView& v = ranks[r]->view;
    if (v.header->rank != r) return Format("group position %u holds rank %u's SSC", r, v.header->rank);
    if (v.header->direction != first.header->direction)
      return Format("rank %u SSC is a %s schedule, rank 0's a %s one", r, DirName(v.header->direction),
                    DirName(first.header->direction));
    const std::string err = CheckConfig(v, first.config());
    if (!err.empty()) return Format("rank %u SSC: %s (config of rank 0)", r, err.c_str());
  }
  // Count every trigger of every rank's file against the counter it lands on; each event's threshold must
  // equal its count, else a wait passes early (silently wrong data) or never (a stall).
  std::vector<std::vector<uint32_t>> counted(num_ranks), remote(num_ranks);
  for (uint32_t r = 0; r < num_ranks; ++r) {
    counted[r].assign(ranks[r]->view.num_events, 0);
    remote[r].assign(ranks[r]->view.num_events, 0);
  }
  for (uint32_t r = 0; r < num_ranks; ++r) {
    const SscView& v = ranks[r]->view;
    for (uint32_t i = 0; i < v.num_tasks; ++i) {
      for (uint32_t k = 0; k < kMaxTriggers; ++k) {
        const uint32_t e = v.tasks[i].trigger_event[k];
        if (e == kNoEvent) continue;
        const uint32_t dst = v.tasks[i].trigger_rank[k];
        if (dst >= num_ranks || e >= counted[dst].size())
          return Format("rank %u %s SSC task %u (%s) field trigger_event[%u]: %u; rank %u has %zu events", r,
                        DirName(v.header->direction), i, TaskTypeName(v.tasks[i].task_type), k, e, dst,
                        dst < num_ranks ? counted[dst].size() : size_t(0));
        ++counted[dst][e];
        if (dst != r) remote[dst][e] = 1;
      }
    }
  }
  for (uint32_t r = 0; r < num_ranks; ++r) {
    const SscView& v = ranks[r]->view;
    for (uint32_t e = 0; e < v.num_events; ++e) {
      if (v.events[e].threshold != counted[r][e])
        return Format("rank %u %s SSC event %u field threshold: %u, but the group's files trigger it %u times", r,
                      DirName(v.header->direction), e, v.events[e].threshold, counted[r][e]);
      const uint32_t flagged = v.events[e].flags & kEventRemoteTriggered;
      if (flagged != remote[r][e])
        return Format("rank %u %s SSC event %u field flags: %u, but %s", r, DirName(v.header->direction), e,
                      v.events[e].flags, remote[r][e] ? "another rank triggers it" : "only this rank triggers it");
    }
  }
  return "";
}

}  // namespace ssc
}  // namespace hpmoe
