// The portable worker loop against a recording mock backend, and the CPU twin's sync primitives.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../../op_kernel/cpu/cpu_sync.h"
#include "../../op_kernel/runtime/worker_loop.h"

namespace {

using namespace hpmoe;
using rt::TaskCall;
using rt::WaitResult;

struct Log {
  std::vector<std::string> calls;
};

struct MockSync {
  Log* log;
  uint32_t counters[4] = {0, 0, 0, 0};
  bool stall = false;  // waits fail as a timeout
  int32_t Wait(uint32_t event, uint32_t target, WaitResult* r) {
    log->calls.push_back("wait " + std::to_string(event) + ">=" + std::to_string(target));
    if (stall || !rt::CounterReached(counters[event], target)) {
      r->counter = counters[event];
      return rt::kWaitTimeout;
    }
    return rt::kOk;
  }
  void Signal(uint32_t rank, uint32_t event) {
    log->calls.push_back("signal " + std::to_string(rank) + ":" + std::to_string(event));
    ++counters[event];
  }
  uint32_t claimed = 0;  // the pool's claim counter
  uint32_t Claim() {
    log->calls.push_back("claim " + std::to_string(claimed));
    return claimed++;
  }
  void PutMemSignal(const void*, uint32_t rank, void*, uint64_t bytes, uint32_t event, uint32_t) {
    log->calls.push_back("put " + std::to_string(bytes) + " signal " + std::to_string(rank) + ":" +
                         std::to_string(event));
    ++counters[event];
  }
};

struct MockHandlers {
  Log* log;
  MockSync* sync;
  int32_t fail_type = -1;
  int32_t Handle(const char* name, const TaskCall& c) {
    log->calls.push_back(std::string(name) + " task " + std::to_string(c.task_id));
    if (int32_t(c.task->task_type) == fail_type) return rt::kErrCounts;
    if (c.signal_event != ssc::kNoEvent) sync->PutMemSignal(nullptr, c.signal_rank, nullptr, 8, c.signal_event, 1);
    return 0;
  }
#define HPMOE_MOCK(NAME, TYPE) \
  int32_t NAME(const TaskCall& c) { return Handle(#NAME, c); }
  HPMOE_HANDLER_LIST(HPMOE_MOCK)
#undef HPMOE_MOCK
};

ssc::SscTask MakeTask(uint32_t type, uint32_t wait, uint32_t trig0, uint32_t trig1) {
  ssc::SscTask t;
  std::memset(&t, 0, sizeof t);
  t.task_type = type;
  t.queue_type = (type == ssc::kTaskGmm) ? ssc::kCTQ : ssc::kVTQ;
  t.dependent_event[0] = wait;
  t.dependent_event[1] = ssc::kNoEvent;
  t.trigger_event[0] = trig0;
  t.trigger_event[1] = trig1;
  t.trigger_rank[0] = 1;
  t.trigger_rank[1] = 0;
  return t;
}

struct Fixture {
  ssc::SscTask tasks[3];
  ssc::SscEvent events[2];
  ssc::SscQueue queue;
  uint32_t entries[3] = {0, 1, 2};
  rt::SscProgram program;
  Fixture(uint32_t invocation) {
    // task 0: a put fused with its trigger 0 (rank 1, event 0) plus a second trigger (rank 0, event 1)
    tasks[0] = MakeTask(ssc::kTaskDispatchPut, ssc::kNoEvent, 0, 1);
    // task 1: a GMM that waits on event 1 and signals event 0 locally
    tasks[1] = MakeTask(ssc::kTaskGmm, 1, 0, ssc::kNoEvent);
    tasks[1].trigger_rank[0] = 0;
    // task 2: waits on event 0 (threshold 2: both triggers above)
    tasks[2] = MakeTask(ssc::kTaskSwiglu, 0, ssc::kNoEvent, ssc::kNoEvent);
    events[0] = {2, 0, 0, 0};
    events[1] = {1, 0, 0, 0};
    queue = {ssc::kVTQ, 0, 0, 3};
    program = {tasks, events, &queue, entries, 3, 2, 1, 0, invocation, nullptr, 0, 0};
  }
};

TEST(WorkerLoop, RunsWaitHandlerTriggerInQueueOrderAndFusesPutSignal) {
  Fixture f(1);
  Log log;
  MockSync sync{&log};
  MockHandlers handlers{&log, &sync};
  rt::WorkerReport report{};
  ASSERT_EQ(rt::RunWorkerQueue(f.program, 0, sync, handlers, &report), rt::kOk);
  const std::vector<std::string> want = {"DispatchPut task 0", "put 8 signal 1:0", "signal 0:1", "wait 1>=1",
                                         "Gmm task 1",         "signal 0:0",       "wait 0>=2",  "Swiglu task 2"};
  EXPECT_EQ(log.calls, want);
}

// Claim pool: two claimers, three pool units (the middle one two tasks). Each invocation runs every unit
// exactly once and whole, and moves the claim counter by units + claimers (each claimer's last claim is past
// the end), so invocation 2 starts where invocation 1 left the counter, whichever worker claims first.
TEST(WorkerLoop, PoolUnitsRunOnceAndWholeEachInvocationWhoeverClaims) {
  ssc::SscTask tasks[4];
  for (auto& t : tasks) t = MakeTask(ssc::kTaskGmmWeightGrad, ssc::kNoEvent, ssc::kNoEvent, ssc::kNoEvent);
  ssc::SscQueue queues[5] = {{ssc::kCTQ, 0, 0, 0}, {ssc::kCTQ, 1, 0, 0}, {ssc::kPoolQueue, 0, 0, 1},
                             {ssc::kPoolQueue, 1, 1, 2}, {ssc::kPoolQueue, 2, 3, 1}};
  uint32_t entries[4] = {2, 0, 3, 1};  // unit 0: task 2; unit 1: tasks 0, 3; unit 2: task 1
  Log log;
  MockSync sync{&log};
  MockHandlers handlers{&log, &sync};
  for (uint32_t invocation = 1; invocation <= 2; ++invocation) {
    rt::SscProgram p{tasks, nullptr, queues, entries, 4, 0, 5, 0, invocation, &queues[2], 3, 2};
    log.calls.clear();
    const uint32_t first = invocation == 1 ? 0 : 1;  // which worker reaches the pool first
    ASSERT_EQ(rt::RunWorkerQueue(p, first, sync, handlers, nullptr), rt::kOk);
    ASSERT_EQ(rt::RunWorkerQueue(p, 1 - first, sync, handlers, nullptr), rt::kOk);
    const uint32_t b = (invocation - 1) * 5;
    const std::vector<std::string> want = {
        "claim " + std::to_string(b),     "GmmWeightGrad task 2", "claim " + std::to_string(b + 1),
        "GmmWeightGrad task 0",           "GmmWeightGrad task 3", "claim " + std::to_string(b + 2),
        "GmmWeightGrad task 1",           "claim " + std::to_string(b + 3), "claim " + std::to_string(b + 4)};
    EXPECT_EQ(log.calls, want) << "invocation " << invocation;
  }
  EXPECT_EQ(sync.claimed, 10u);
  // A worker past the claimers (a vector queue) never claims.
  rt::SscProgram p{tasks, nullptr, queues, entries, 4, 0, 5, 0, 3, &queues[2], 3, 1};
  log.calls.clear();
  ASSERT_EQ(rt::RunWorkerQueue(p, 1, sync, handlers, nullptr), rt::kOk);
  EXPECT_TRUE(log.calls.empty());
}

TEST(WorkerLoop, EpochTargetsScaleWithTheInvocation) {
  Fixture f(3);
  Log log;
  MockSync sync{&log};
  sync.counters[0] = 4;  // two earlier invocations completed event 0 (threshold 2)
  sync.counters[1] = 2;
  MockHandlers handlers{&log, &sync};
  ASSERT_EQ(rt::RunWorkerQueue(f.program, 0, sync, handlers, nullptr), rt::kOk);
  EXPECT_EQ(log.calls[3], "wait 1>=3");
  EXPECT_EQ(log.calls[6], "wait 0>=6");
}

TEST(WorkerLoop, TimeoutReportNamesTaskEventCounterAndThreshold) {
  Fixture f(1);
  Log log;
  MockSync sync{&log};
  sync.stall = true;
  MockHandlers handlers{&log, &sync};
  rt::WorkerReport r{};
  ASSERT_EQ(rt::RunWorkerQueue(f.program, 0, sync, handlers, &r), rt::kWaitTimeout);
  EXPECT_EQ(r.status, rt::kWaitTimeout);
  EXPECT_EQ(r.task, 1u);
  EXPECT_EQ(r.position, 1u);
  EXPECT_EQ(r.task_type, uint32_t(ssc::kTaskGmm));
  EXPECT_EQ(r.event, 1u);
  EXPECT_EQ(r.counter, 1u);  // the put's second trigger arrived
  EXPECT_EQ(r.threshold, 1u);
  EXPECT_EQ(r.target, 1u);
}

TEST(WorkerLoop, HandlerErrorStopsTheWorkerWithItsCode) {
  Fixture f(1);
  Log log;
  MockSync sync{&log};
  MockHandlers handlers{&log, &sync, int32_t(ssc::kTaskGmm)};
  rt::WorkerReport r{};
  ASSERT_EQ(rt::RunWorkerQueue(f.program, 0, sync, handlers, &r), rt::kHandlerFailed);
  EXPECT_EQ(r.detail, rt::kErrCounts);
  EXPECT_EQ(r.task, 1u);
  EXPECT_EQ(log.calls.back(), "Gmm task 1");  // no trigger after a failed handler
}

TEST(WorkerLoop, CounterComparisonSurvivesWrapAround) {
  EXPECT_TRUE(rt::CounterReached(5, 5));
  EXPECT_FALSE(rt::CounterReached(4, 5));
  EXPECT_TRUE(rt::CounterReached(2, 0xFFFFFFFEu));   // counter wrapped past the target
  EXPECT_FALSE(rt::CounterReached(0xFFFFFFFEu, 2));  // target wrapped, counter not yet
  EXPECT_EQ(rt::EpochTarget(0x40000001u, 4), 4u);    // n * threshold modulo 2^32
}

struct CpuGroup {
  std::vector<uint64_t> words;
  cpu::GroupMemory mem;
  static constexpr uint64_t kSegment = 8192;
  explicit CpuGroup(uint32_t ep) : words(ep * kSegment / 8, 0) {
    mem.base = reinterpret_cast<uint8_t*>(words.data());
    mem.segment_bytes = kSegment;
    mem.ep = ep;
  }
};

TEST(CpuSync, PutMemSignalCopiesToThePeerSegmentThenSignals) {
  CpuGroup g(2);
  cpu::CpuSync rank0(g.mem, 0, 4096, 1000000), rank1(g.mem, 1, 4096, 1000000);
  const uint32_t payload[3] = {7, 8, 9};
  uint8_t* local_dst = g.mem.Segment(0) + 256;  // symmetric address on rank 0 ...
  rank0.PutMemSignal(payload, 1, local_dst, sizeof payload, 2, 1);
  EXPECT_EQ(std::memcmp(g.mem.Segment(1) + 256, payload, sizeof payload), 0);  // ... lands on rank 1
  EXPECT_EQ(*rank1.Counter(1, 2), 1u);
  EXPECT_EQ(*rank0.Counter(0, 2), 0u);
  rt::WaitResult r{};
  EXPECT_EQ(rank1.Wait(2, 1, &r), rt::kOk);
  rank0.PutMemSignal(nullptr, 1, local_dst, 0, 2, 1);  // empty put still signals
  EXPECT_EQ(*rank1.Counter(1, 2), 2u);
}

TEST(CpuSync, WaitTimesOutAndAbortsPromptly) {
  CpuGroup g(2);
  cpu::CpuSync rank0(g.mem, 0, 4096, 20 * 1000000ull), rank1(g.mem, 1, 4096, 20 * 1000000ull);
  rt::WaitResult r{};
  EXPECT_EQ(rank0.Wait(3, 1, &r), rt::kWaitTimeout);
  EXPECT_EQ(r.counter, 0u);
  rank1.RaiseAbort();
  EXPECT_EQ(rank0.Wait(3, 1, &r), rt::kAborted);
  EXPECT_EQ(r.detail, 1);
}

}  // namespace
