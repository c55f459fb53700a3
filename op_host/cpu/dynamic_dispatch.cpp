#include "dynamic_dispatch.h"

#include <sched.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "../../op_kernel/cpu/cpu_handlers.h"
#include "../../op_kernel/runtime/worker_loop.h"
#include "ready_queue.h"

namespace hpmoe {
namespace cpu {
namespace {

struct RankState {
  RankRuntime* rank;
  const rt::SscProgram* program;
  std::vector<std::vector<uint32_t>> consumers;  // per event: tasks waiting on it
  std::unique_ptr<std::atomic<uint32_t>[]> pending;
  std::unique_ptr<ReadyFifo> ready[2];  // by queue type
};

// Sync backend whose signals also release the consumers that became ready.
class DynamicSync {
 public:
  DynamicSync(CpuSync& base, std::vector<RankState>& states) : base_(base), states_(states) {}
  int32_t Wait(uint32_t, uint32_t, rt::WaitResult*) { return rt::kOk; }  // popped tasks are ready by construction
  void Signal(uint32_t rank, uint32_t event) { Completed(rank, event, 1); }
  uint32_t Claim() { return base_.Claim(); }  // unused: pool tasks are CTQ tasks of the ready queues here
  void PutMemSignal(const void* src, uint32_t dst_rank, void* dst, uint64_t bytes, uint32_t event, uint32_t value) {
    base_.PutMemSignal(src, dst_rank, dst, bytes, ssc::kNoEvent, 0);
    if (event != ssc::kNoEvent) Completed(dst_rank, event, value);
  }

 private:
  void Completed(uint32_t rank, uint32_t event, uint32_t value) {
    uint32_t* counter = base_.Counter(rank, event);
    const uint32_t now = __atomic_add_fetch(counter, value, __ATOMIC_ACQ_REL);
    RankState& st = states_[rank];
    const uint32_t target = rt::EpochTarget(st.program->invocation, st.program->events[event].threshold);
    if (now != target) return;
    for (uint32_t task : st.consumers[event]) {
      if (st.pending[task].fetch_sub(1, std::memory_order_acq_rel) == 1)
        st.ready[st.program->tasks[task].queue_type]->Push(task);
    }
  }
  CpuSync& base_;
  std::vector<RankState>& states_;
};

// Why a dynamic worker stopped without finishing its queue type.
struct Stall {
  std::atomic<int32_t> reported{0};
  uint32_t rank = 0, queue_type = 0, popped = 0, total = 0;
};

template <class Handlers>
int32_t RunDynamicWorker(RankState& st, uint32_t rank, uint32_t queue_type, DynamicSync& sync, Handlers& handlers,
                         const std::atomic<int32_t>& failed, uint64_t timeout_ms, Stall* stall) {
  ReadyFifo& ready = *st.ready[queue_type];
  IdleTimer idle;
  for (;;) {
    const uint32_t id = ready.Pop();
    if (id == kReadyDone) return rt::kOk;
    if (id == kReadyEmpty) {
      if (failed.load(std::memory_order_relaxed) != 0) return rt::kAborted;
      if (idle.Expired(timeout_ms)) {
        if (stall->reported.exchange(1) == 0) {
          stall->rank = rank;
          stall->queue_type = queue_type;
          stall->popped = ready.Popped();
          stall->total = ready.Total();
        }
        return rt::kWaitTimeout;
      }
      sched_yield();
      continue;
    }
    idle.Busy();
    const int32_t status = RunReadyTask(*st.program, id, 0, sync, handlers);
    if (status != rt::kOk) return status;
  }
}

}  // namespace

std::string RunGroupDynamic(RankRuntime* const* ranks, uint32_t num_ranks, uint32_t direction) {
  if (num_ranks == 0 || num_ranks != ranks[0]->context().cfg.ep)
    return "dynamic dispatch needs every rank of the group in this process";
  for (uint32_t i = 0; i < num_ranks; ++i) {
    if (ranks[i]->rank() != i) return "dynamic dispatch needs the ranks in order 0..ep-1";
    const std::string err = ranks[i]->Prepare(direction);
    if (!err.empty()) return err;
  }
  std::vector<RankState> states(num_ranks);
  for (uint32_t i = 0; i < num_ranks; ++i) {
    RankState& st = states[i];
    st.rank = ranks[i];
    st.program = &ranks[i]->program(direction);
    const rt::SscProgram& p = *st.program;
    st.consumers.assign(p.num_events, {});
    st.pending.reset(new std::atomic<uint32_t>[p.num_tasks]);
    uint32_t per_type[2] = {0, 0};
    for (uint32_t t = 0; t < p.num_tasks; ++t) {
      uint32_t waits = 0;
      for (uint32_t w = 0; w < ssc::kMaxWaits; ++w) {
        const uint32_t e = p.tasks[t].dependent_event[w];
        if (e == ssc::kNoEvent) continue;
        st.consumers[e].push_back(t);
        ++waits;
      }
      st.pending[t].store(waits, std::memory_order_relaxed);
      ++per_type[p.tasks[t].queue_type];
    }
    for (uint32_t q = 0; q < 2; ++q) st.ready[q].reset(new ReadyFifo(per_type[q]));
    for (uint32_t t = 0; t < p.num_tasks; ++t) {
      if (st.pending[t].load(std::memory_order_relaxed) == 0) st.ready[p.tasks[t].queue_type]->Push(t);
    }
  }
  // Events already complete (a peer signalled ahead) cannot occur within one launch: all start together.
  std::vector<std::thread> threads;
  std::atomic<int32_t> failed{0};
  Stall stall;
  for (uint32_t i = 0; i < num_ranks; ++i) {
    const ssc::SscConfig& cfg = ranks[i]->context().cfg;
    for (uint32_t w = 0; w < cfg.num_aic + cfg.num_aiv; ++w) {
      threads.emplace_back([&, i, w, cfg] {
        RankState& st = states[i];
        DynamicSync sync(st.rank->sync(direction), states);
        const uint32_t type = w < cfg.num_aic ? ssc::kCTQ : ssc::kVTQ;
        int32_t s;
        if (st.rank->options().handlers == kHandlersNull) {
          NullHandlers<DynamicSync> h(sync);
          s = RunDynamicWorker(st, i, type, sync, h, failed, st.rank->options().timeout_ms, &stall);
        } else {
          CpuHandlers<DynamicSync> h(st.rank->context(), st.rank->scratch(w), sync);
          s = RunDynamicWorker(st, i, type, sync, h, failed, st.rank->options().timeout_ms, &stall);
        }
        if (s != rt::kOk && s != rt::kAborted) failed.store(s);
      });
    }
  }
  for (std::thread& t : threads) t.join();
  if (stall.reported.load()) {
    char line[256];
    std::snprintf(line, sizeof(line),
                  "dynamic dispatch: rank %u %s ready queue idle past the timeout after %u of %u tasks "
                  "(a dependency never completed)",
                  stall.rank, stall.queue_type == ssc::kCTQ ? "CTQ" : "VTQ", stall.popped, stall.total);
    return line;
  }
  return failed.load() ? "dynamic dispatch: a handler failed" : "";
}

}  // namespace cpu
}  // namespace hpmoe
