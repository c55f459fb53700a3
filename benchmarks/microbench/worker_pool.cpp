#include "worker_pool.h"

#include <sched.h>
#include <time.h>

#include <chrono>

namespace hpmoe {
namespace microbench {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

uint64_t NowNs() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

// Spin, then yield, then nap: a waiting worker must not starve a busy one when workers outnumber cores.
template <class Ready>
void Await(Ready&& ready) {
  uint64_t spin = 0, start = 0;
  while (!ready()) {
    ++spin;
    if (spin < 2000) {
      CpuRelax();
    } else if (start == 0) {
      start = NowNs();
    } else if (NowNs() - start < 2000000) {
      sched_yield();
    } else {
      const timespec nap{0, 20000};
      nanosleep(&nap, nullptr);
    }
  }
}

}  // namespace

WorkerPool::WorkerPool(uint32_t workers, bool count_llc)
    : workers_(workers), counting_(count_llc), counters_(new LlcCounter[workers]), status_(workers, 0),
      llc_delta_(workers, 0), end_ns_(workers, 0) {
  if (counting_) {
    llc_error_ = counters_[0].Open();
    if (!llc_error_.empty()) counting_ = false;
  }
  for (uint32_t w = 1; w < workers_; ++w) threads_.emplace_back([this, w] { WorkerMain(w); });
  // Wait until every worker tried its counter, so counting() is final when the constructor returns.
  Await([&] { return opened_.load(std::memory_order_acquire) == workers_ - 1; });
  if (counting_) {
    for (uint32_t w = 1; w < workers_; ++w) {
      if (!counters_[w].ok()) {
        counting_ = false;
        llc_error_ = "a worker thread could not open its counter";
      }
    }
  }
}

WorkerPool::~WorkerPool() {
  stop_ = true;
  generation_.fetch_add(1, std::memory_order_release);
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::WaitForRelease(uint64_t seen) const {
  Await([&] { return generation_.load(std::memory_order_acquire) != seen; });
}

void WorkerPool::WorkerMain(uint32_t w) {
  if (counting_) counters_[w].Open();
  opened_.fetch_add(1, std::memory_order_release);
  uint64_t seen = 0;
  for (;;) {
    WaitForRelease(seen);
    seen = generation_.load(std::memory_order_acquire);
    if (stop_) return;
    const uint64_t c0 = counting_ ? counters_[w].Read() : 0;
    status_[w] = (*job_)(w);
    end_ns_[w] = NowNs() - t0_;
    llc_delta_[w] = counting_ ? counters_[w].Read() - c0 : 0;
    done_.fetch_add(1, std::memory_order_acq_rel);
  }
}

LaunchResult WorkerPool::Run(const std::function<int32_t(uint32_t)>& job) {
  job_ = &job;
  done_.store(0, std::memory_order_relaxed);
  const uint64_t c0 = counting_ ? counters_[0].Read() : 0;
  const uint64_t t0 = NowNs();
  t0_ = t0;
  generation_.fetch_add(1, std::memory_order_release);
  status_[0] = job(0);
  end_ns_[0] = NowNs() - t0;
  llc_delta_[0] = counting_ ? counters_[0].Read() - c0 : 0;
  Await([&] { return done_.load(std::memory_order_acquire) == workers_ - 1; });
  LaunchResult r;
  r.ns = NowNs() - t0;
  r.end_ns = end_ns_;
  for (uint32_t w = 0; w < workers_; ++w) {
    r.llc_misses += llc_delta_[w];
    if (r.status == 0 && status_[w] != 0) {
      r.status = status_[w];
      r.failed_worker = w;
    }
  }
  return r;
}

}  // namespace microbench
}  // namespace hpmoe
