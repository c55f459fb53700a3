#include <vector>

#include "checks.h"

namespace hpmoe {
namespace ssc {
namespace validate {

std::string CheckQueueRecords(const SscView& v) {
  const SscConfig& c = v.config();
  const uint32_t workers = c.num_aic + c.num_aiv;
  const bool pools = (c.flags & kConfigClaimPool) != 0;
  if (pools ? v.num_queues < workers : v.num_queues != workers)
    return Format("queues: %u, the config has %u AIC + %u AIV workers%s", v.num_queues, c.num_aic, c.num_aiv,
                  pools ? " + pool queues" : "");
  std::vector<uint8_t> seen(v.num_tasks, 0);
  uint64_t entries = 0;
  for (uint32_t q = 0; q < v.num_queues; ++q) {
    const SscQueue& queue = v.queues[q];
    // AIC workers first, then AIV (the worker index the runtime reports is derived from this order).
    // AIC workers, AIV workers, then the pool queues (units claimed in index order; "worker" is the unit index).
    // Deadlock freedom with the pool (Python validator): the pool read as one queue run after every claimer's
    // own queue, which is what in-order claims reduce to.
    const bool aic = q < c.num_aic, pool = q >= workers;
    const uint32_t type = pool ? kPoolQueue : aic ? kCTQ : kVTQ;
    const uint32_t worker = pool ? q - workers : aic ? q : q - c.num_aic;
    if (queue.queue_type != type) return Format("queue %u field queue_type: %u, expected %u", q, queue.queue_type, type);
    if (queue.worker != worker) return Format("queue %u field worker: %u, expected %u", q, queue.worker, worker);
    if (uint64_t(queue.first_entry) + queue.count > v.num_entries)
      return Format("queue %u field count: entries [%u,+%u) outside the %u entries", q, queue.first_entry, queue.count,
                    v.num_entries);
    entries += queue.count;
    for (uint32_t k = 0; k < queue.count; ++k) {
      const uint32_t task = v.entries[queue.first_entry + k];
      if (task >= v.num_tasks) return Format("queue %u entry %u: task %u, the file has %u tasks", q, k, task, v.num_tasks);
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
