// Qualifiers and the few language utilities the worker loop needs, behind one macro (as catlass does with
// CATLASS_DEVICE). The loop and everything it includes must compile as device code: no exceptions, no heap,
// no standard containers, no virtual calls, nothing from a hosted C++ library.
#pragma once

#include <stdint.h>

#if defined(__CCE_KT_TEST__) || defined(__CCE_AICORE__)
#define HPMOE_DEVICE __aicore__ inline  // AscendC
#define HPMOE_GM __gm__  // what the runtime reads from the SSC image lives in GM (an unqualified pointer is private)
#elif defined(__CUDACC__)
#define HPMOE_DEVICE __device__ __forceinline__
#else
#define HPMOE_DEVICE inline  // CPU twin and the freestanding check
#endif
#ifndef HPMOE_GM
#define HPMOE_GM  // CPU twin and CUDA: one address space
#endif

namespace hpmoe {
namespace rt {

// Minimal detection helpers (no <type_traits> in freestanding device builds).
template <class T>
T&& Declval() noexcept;
template <class...>
using VoidT = void;
struct FalseType {
  static constexpr bool value = false;
};
struct TrueType {
  static constexpr bool value = true;
};
template <class A, class B>
struct IsSame : FalseType {};
template <class A>
struct IsSame<A, A> : TrueType {};

}  // namespace rt
}  // namespace hpmoe
