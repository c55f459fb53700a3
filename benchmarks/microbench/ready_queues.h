// Ready queues of the microbenchmark's dynamic-dispatch modes. ReadyFifo is the CPU twin's dynamic-dispatch
// queue (op_host/cpu/ready_queue.h): a lock-free one-shot MPMC ring, tasks popped in the order they became ready. ReadyLifo pops the most recently readied task first (a spin-locked stack), so a
// consumer readied by the task a worker just finished runs next, as in work-first runtimes: the dynamic
// order that keeps producer/consumer pairs together. Both are reset between launches (outside the timing).
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "../../op_host/cpu/ready_queue.h"

namespace hpmoe {
namespace microbench {

constexpr uint32_t kEmpty = cpu::kReadyEmpty;  // nothing ready now
constexpr uint32_t kDone = cpu::kReadyDone;    // every task of the launch was taken

using ReadyFifo = cpu::ReadyFifo;  // the twin's own queue (op_host/cpu/ready_queue.h)

class ReadyLifo {
 public:
  explicit ReadyLifo(uint32_t capacity) : slots_(capacity), total_(capacity) { Reset(); }
  void Reset() {
    size_ = 0;
    popped_ = 0;
  }
  void Push(uint32_t task) {
    Lock();
    slots_[size_++] = task;
    Unlock();
  }
  uint32_t Pop() {
    Lock();
    uint32_t task;
    if (size_ > 0) {
      task = slots_[--size_];
      ++popped_;
    } else {
      task = popped_ == total_ ? kDone : kEmpty;
    }
    Unlock();
    return task;
  }

 private:
  void Lock() {
    for (uint32_t spin = 0; lock_.exchange(1, std::memory_order_acquire) != 0; ++spin) {
      while (lock_.load(std::memory_order_relaxed) != 0) {
        if (++spin % 128 == 0) sched_yield();  // the holder may be preempted (workers can outnumber cores)
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
    }
  }
  void Unlock() { lock_.store(0, std::memory_order_release); }

  std::vector<uint32_t> slots_;
  uint32_t total_;
  uint32_t size_ = 0;
  uint32_t popped_ = 0;
  alignas(64) std::atomic<uint32_t> lock_{0};
};

}  // namespace microbench
}  // namespace hpmoe
