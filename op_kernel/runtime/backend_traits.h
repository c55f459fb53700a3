// Compile-time contract between the worker loop and a backend. A backend is two classes:
//   Sync     - counters and one-sided communication (memory ordering is its job):
//                int32_t Wait(uint32_t event, uint32_t target, WaitResult*)   acquire; bounded
//                void    Signal(uint32_t rank, uint32_t event)                release add 1
//                void    PutMemSignal(const void* src, uint32_t dst_rank, void* dst, uint64_t bytes,  (HPMOE_GM)
//                                     uint32_t event, uint32_t value)         copy, release, add
//                uint32_t Claim()                                     fetch-add 1 on the rank's claim counter
//                                                                     (counter num_events), the old value
//   Handlers - one member per task type: int32_t Name(const TaskCall&) returning 0 or an error code.
// Missing pieces fail the build with the static_assert messages below (no virtual calls anywhere).
#pragma once

#include "device.h"
#include "program.h"

namespace hpmoe {
namespace rt {

struct WaitResult {
  uint32_t counter;  // last observed value
  int32_t detail;    // on kAborted: the rank that failed first
};

#define HPMOE_DETECT(NAME, EXPR)                                      \
  template <class B, class = void>                                    \
  struct NAME : FalseType {};                                         \
  template <class B>                                                  \
  struct NAME<B, VoidT<decltype(EXPR)>> : IsSame<decltype(EXPR), int32_t> {};

#define HPMOE_DETECT_U32(NAME, EXPR)                                  \
  template <class B, class = void>                                    \
  struct NAME : FalseType {};                                         \
  template <class B>                                                  \
  struct NAME<B, VoidT<decltype(EXPR)>> : IsSame<decltype(EXPR), uint32_t> {};

#define HPMOE_DETECT_VOID(NAME, EXPR)                                 \
  template <class B, class = void>                                    \
  struct NAME : FalseType {};                                         \
  template <class B>                                                  \
  struct NAME<B, VoidT<decltype(EXPR)>> : IsSame<decltype(EXPR), void> {};

HPMOE_DETECT(HasWait, Declval<B&>().Wait(0u, 0u, static_cast<WaitResult*>(nullptr)))
HPMOE_DETECT_VOID(HasSignal, Declval<B&>().Signal(0u, 0u))
HPMOE_DETECT_U32(HasClaim, Declval<B&>().Claim())
HPMOE_DETECT_VOID(HasPutMemSignal, Declval<B&>().PutMemSignal(static_cast<const HPMOE_GM void*>(nullptr), 0u,
                                                             static_cast<HPMOE_GM void*>(nullptr), uint64_t(0), 0u,
                                                             0u))

#define HPMOE_HANDLER_LIST(X)                                                                     \
  X(EntrySignal, kTaskEntrySignal) X(CountPut, kTaskCountPut) X(DispatchPut, kTaskDispatchPut)    \
  X(Gmm, kTaskGmm) X(Swiglu, kTaskSwiglu) X(CombinePut, kTaskCombinePut)                          \
  X(CombineReduce, kTaskCombineReduce) X(BwdDispatchPut, kTaskBwdDispatchPut)                     \
  X(GmmTransB, kTaskGmmTransB) X(GmmWeightGrad, kTaskGmmWeightGrad) X(SwigluGrad, kTaskSwigluGrad) \
  X(BwdCombineReduce, kTaskBwdCombineReduce) X(TopkWeightGrad, kTaskTopkWeightGrad) X(Add, kTaskAdd)  \
  X(GmmSwiglu, kTaskGmmSwiglu) X(GmmSwigluGrad, kTaskGmmSwigluGrad)

#define HPMOE_DETECT_HANDLER(NAME, TYPE) HPMOE_DETECT(HasHandler##NAME, Declval<B&>().NAME(Declval<const TaskCall&>()))
HPMOE_HANDLER_LIST(HPMOE_DETECT_HANDLER)
#undef HPMOE_DETECT_HANDLER

template <class Sync, class Handlers>
HPMOE_DEVICE constexpr bool CheckBackend() {
  static_assert(HasWait<Sync>::value,
                "hpmoe backend Sync lacks `int32_t Wait(uint32_t event, uint32_t target, WaitResult*)`");
  static_assert(HasSignal<Sync>::value, "hpmoe backend Sync lacks `void Signal(uint32_t rank, uint32_t event)`");
  static_assert(HasClaim<Sync>::value, "hpmoe backend Sync lacks `uint32_t Claim()`");
  static_assert(HasPutMemSignal<Sync>::value,
                "hpmoe backend Sync lacks `void PutMemSignal(const void*, uint32_t dst_rank, void* dst, "
                "uint64_t bytes, uint32_t event, uint32_t value)`");
#define HPMOE_ASSERT_HANDLER(NAME, TYPE)            \
  static_assert(HasHandler##NAME<Handlers>::value, \
                "hpmoe backend Handlers lacks `int32_t " #NAME "(const TaskCall&)` for ssc::" #TYPE);
  HPMOE_HANDLER_LIST(HPMOE_ASSERT_HANDLER)
#undef HPMOE_ASSERT_HANDLER
  return true;
}

#undef HPMOE_DETECT
#undef HPMOE_DETECT_VOID

}  // namespace rt
}  // namespace hpmoe
