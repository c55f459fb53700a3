// A handler set that forwards every task to another one and adds the handler's wall time to a per-type
// total: where a launch's worker time goes (SwiGLU vs Add). Two clock reads per task (tens of ns) against
// tasks of tens of microseconds or more; the no-op modes are never wrapped.
#pragma once

#include <chrono>
#include <cstdint>

#include "../../op_kernel/runtime/backend_traits.h"

namespace hpmoe {
namespace microbench {

inline uint64_t NowNs() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

template <class Inner>
class TimedHandlers {
 public:
  TimedHandlers(Inner& inner, uint64_t* ns_by_type) : inner_(inner), ns_(ns_by_type) {}
#define HPMOE_TIMED(NAME, TYPE)                 \
  int32_t NAME(const rt::TaskCall& c) {         \
    const uint64_t t0 = NowNs();                \
    const int32_t r = inner_.NAME(c);           \
    ns_[ssc::TYPE] += NowNs() - t0;             \
    return r;                                   \
  }
  HPMOE_HANDLER_LIST(HPMOE_TIMED)
#undef HPMOE_TIMED

 private:
  Inner& inner_;
  uint64_t* ns_;
};

}  // namespace microbench
}  // namespace hpmoe
