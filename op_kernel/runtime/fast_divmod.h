// Division by a divisor that stays fixed over a loop, as one multiply-high and a shift (Granlund and Montgomery,
// "Division by invariant integers using multiplication", PLDI 1994, section 4). A GPU has no integer divider:
// n / d by a runtime d is a sequence of about fifteen instructions with a reciprocal on the SFU, which the
// vector handlers also use for SwiGLU's exp and reciprocal, and a 64-bit one is a call. Session 23 found two
// such divisions per 16-byte chunk costing more than the stores they addressed (docs/cuda.md).
#pragma once

#include "device.h"

namespace hpmoe {
namespace rt {

// n / d and n % d for n in [0, 2^31) and d in [1, 2^31). Build it once, outside the loop: building costs a
// 64-bit division.
struct FastDivmod {
  uint32_t d = 1, mul = 0, shift = 0;  // d == 1: mul unused

  FastDivmod() = default;
  HPMOE_DEVICE explicit FastDivmod(uint32_t divisor) : d(divisor) {
    if (d <= 1) return;
    uint32_t l = 1;  // ceil(log2 d): 2^(l-1) < d <= 2^l
    while ((uint64_t(1) << l) < d) ++l;
    // m = ceil(2^(31+l) / d) < 2^32 since d > 2^(l-1); then floor(n m / 2^(31+l)) = floor(n / d) for n < 2^31.
    mul = uint32_t(((uint64_t(1) << (31 + l)) + d - 1) / d);
    shift = l - 1;
  }
  HPMOE_DEVICE uint32_t Div(uint32_t n) const {
    return d == 1 ? n : uint32_t((uint64_t(n) * mul) >> 32) >> shift;  // the high word: one IMAD.WIDE.U32
  }
  HPMOE_DEVICE void DivMod(uint32_t n, uint32_t* q, uint32_t* r) const {
    *q = Div(n);
    *r = n - *q * d;
  }
};

}  // namespace rt
}  // namespace hpmoe
