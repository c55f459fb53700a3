#include "cpu_sync.h"

#include <sched.h>
#include <time.h>

namespace hpmoe {
namespace cpu {
namespace {

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

int32_t CpuSync::Wait(uint32_t event, uint32_t target, rt::WaitResult* result) {
  const uint32_t* counter = Counter(rank_, event);
  uint32_t seen = __atomic_load_n(counter, __ATOMIC_ACQUIRE);
  if (rt::CounterReached(seen, target)) return rt::kOk;  // the common case: producer already done
  const uint32_t* abort_flag = &group_.Control(rank_)->abort_rank_plus1;
  const uint64_t start = NowNs();
  // Spin briefly, then yield: workers outnumber cores on the twin, and a spinning waiter must not starve
  // the producer it waits for. Past a millisecond, sleep between checks.
  for (uint64_t spin = 1;; ++spin) {
    seen = __atomic_load_n(counter, __ATOMIC_ACQUIRE);
    if (rt::CounterReached(seen, target)) return rt::kOk;
    if (spin < 64) {
      CpuRelax();
      continue;
    }
    const uint32_t aborted = __atomic_load_n(abort_flag, __ATOMIC_ACQUIRE);
    if (aborted != 0) {
      result->counter = seen;
      result->detail = int32_t(aborted) - 1;
      return rt::kAborted;
    }
    const uint64_t elapsed = NowNs() - start;
    if (elapsed > timeout_ns_) {
      result->counter = seen;
      result->detail = -1;
      return rt::kWaitTimeout;
    }
    if (elapsed < 1000000) {
      sched_yield();
    } else {
      const timespec nap{0, 50000};
      nanosleep(&nap, nullptr);
    }
  }
}

void CpuSync::RaiseAbort() const {
  for (uint32_t r = 0; r < group_.ep; ++r) {
    uint32_t expected = 0;
    __atomic_compare_exchange_n(&group_.Control(r)->abort_rank_plus1, &expected, rank_ + 1, false,
                                __ATOMIC_RELEASE, __ATOMIC_RELAXED);
  }
}

}  // namespace cpu
}  // namespace hpmoe
