#include <vector>

#include "checks.h"

namespace hpmoe {
namespace ssc {
namespace validate {

std::string CheckQueueRecords(const SscView& v) {
  const SscConfig& c = v.config();
  const uint32_t workers = c.num_aic + c.num_aiv, pools = (c.flags & kConfigClaimPool) ? 1u : 0u;
  if (v.num_queues != workers + pools)
    return Format("queues: %u, the config has %u AIC + %u AIV workers%s", v.num_queues, c.num_aic, c.num_aiv,
                  pools ? " + the claim pool" : "");
  std::vector<uint8_t> seen(v.num_tasks, 0);
  uint64_t entries = 0;
  for (uint32_t q = 0; q < v.num_queues; ++q) {
    const SscQueue& queue = v.queues[q];
    // AIC workers first, then AIV (the worker index the runtime reports is derived from this order).
    // AIC workers, AIV workers, then the claim pool (worker 0): its tasks are cube tasks that trigger nothing,
    // so any claimer may run them in any order without a cycle (the loop claims after its own queue).
    const bool aic = q < c.num_aic, pool = q >= workers;
    const uint32_t type = pool ? kPoolQueue : aic ? kCTQ : kVTQ, worker = pool ? 0 : aic ? q : q - c.num_aic;
    if (queue.queue_type != type) return Format("queue %u field queue_type: %u, expected %u", q, queue.queue_type, type);
    if (queue.worker != worker) return Format("queue %u field worker: %u, expected %u", q, queue.worker, worker);
    if (uint64_t(queue.first_entry) + queue.count > v.num_entries)
      return Format("queue %u field count: entries [%u,+%u) outside the %u entries", q, queue.first_entry, queue.count,
                    v.num_entries);
    entries += queue.count;
    for (uint32_t k = 0; k < queue.count; ++k) {
      const uint32_t task = v.entries[queue.first_entry + k];
      if (task >= v.num_tasks) return Format("queue %u entry %u: task %u, the file has %u tasks", q, k, task, v.num_tasks);
      if (pool) {
        for (uint32_t t = 0; t < kMaxTriggers; ++t)
          if (v.tasks[task].trigger_event[t] != kNoEvent)
            return Format("pool entry %u: task %u (%s) triggers event %u; a pool task must trigger none", k, task,
                          TaskTypeName(v.tasks[task].task_type), v.tasks[task].trigger_event[t]);
      }
      if (!QueueMayHold(c, type, v.tasks[task].queue_type))
        return Format("queue %u entry %u: task %u (%s) field queue_type: %u, this queue is %s", q, k, task,
                      TaskTypeName(v.tasks[task].task_type), v.tasks[task].queue_type, QueueTypeName(type));
      if (seen[task]++) return Format("queue %u entry %u: task %u (%s) appears in a queue twice", q, k, task,
                                      TaskTypeName(v.tasks[task].task_type));
    }
  }
  for (uint32_t i = 0; i < v.num_tasks; ++i)
    if (!seen[i]) return Format("task %u (%s) is in no queue", i, TaskTypeName(v.tasks[i].task_type));
  if (entries != v.num_entries)
    return Format("queue entries: %u, the queues hold %llu", v.num_entries, (unsigned long long)entries);
  return "";
}

}  // namespace validate
}  // namespace ssc
}  // namespace hpmoe
