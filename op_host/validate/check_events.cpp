#include <vector>

#include "checks.h"

namespace hpmoe {
namespace ssc {
namespace validate {

std::string CheckEventsAlone(const SscView& v, uint32_t rank) {
  const SscConfig& c = v.config();
  std::vector<uint32_t> local(v.num_events, 0);
  for (uint32_t i = 0; i < v.num_tasks; ++i)
    for (uint32_t k = 0; k < kMaxTriggers; ++k)
      if (v.tasks[i].trigger_event[k] != kNoEvent && v.tasks[i].trigger_rank[k] == rank) ++local[v.tasks[i].trigger_event[k]];
  // A remote-triggered event counts puts from the other ep-1 ranks into one region of this rank: at most one
  // per tile_m-row chunk of a C-row receive slot from each (Filler.put_chunks).
  const uint64_t remote_bound = uint64_t(c.ep - 1) * (c.recv_rows_per_src / c.tile_m);
  for (uint32_t e = 0; e < v.num_events; ++e) {
    const SscEvent& ev = v.events[e];
    if (ev.flags & ~uint32_t(kEventRemoteTriggered)) return Format("event %u field flags: 0x%x (unknown bits)", e, ev.flags);
    if (ev.threshold == 0 || ev.threshold == 0xFFFFFFFFu)
      return Format("event %u field threshold: %u (a wait on it would pass at once or never)", e, ev.threshold);
    if (!(ev.flags & kEventRemoteTriggered)) {
      if (ev.threshold != local[e])
        return Format("event %u field threshold: %u, but this file triggers it %u times and no other rank does", e,
                      ev.threshold, local[e]);
    } else if (ev.threshold <= local[e] || ev.threshold - local[e] > remote_bound) {
      return Format("event %u field threshold: %u; %u local triggers plus 1..%llu from other ranks allowed", e,
                    ev.threshold, local[e], (unsigned long long)remote_bound);
    }
  }
  return "";
}

}  // namespace validate
}  // namespace ssc
}  // namespace hpmoe
