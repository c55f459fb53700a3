// op_kernel/runtime/fast_divmod.h: the multiply-and-shift quotient and remainder equal the integer division's
// for every divisor up to 4096 against every dividend up to 2^16, and at the edges of the range (dividends up
// to 2^31 - 1, divisors up to 2^31 - 1, powers of two and their neighbours), with random pairs in between.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "../../op_kernel/runtime/fast_divmod.h"

namespace {

using hpmoe::rt::FastDivmod;

constexpr uint32_t kMaxArg = (1u << 31) - 1;

::testing::AssertionResult Agrees(const FastDivmod& f, uint32_t n) {
  uint32_t q = 0, r = 0;
  f.DivMod(n, &q, &r);
  if (q == n / f.d && r == n % f.d && f.Div(n) == q) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << n << " / " << f.d << ": got " << q << " r " << r << ", want " << n / f.d
                                       << " r " << n % f.d;
}

std::vector<uint32_t> Edges() {
  std::vector<uint32_t> v = {0, 1, 2, 3, kMaxArg, kMaxArg - 1};
  for (uint32_t b = 1; b < 31; ++b)
    for (int64_t dlt = -2; dlt <= 2; ++dlt) v.push_back(uint32_t(int64_t(1u << b) + dlt));
  return v;
}

TEST(FastDivmod, EverySmallDivisorAndDividend) {
  for (uint32_t d = 1; d <= 4096; ++d) {
    const FastDivmod f(d);
    for (uint32_t n = 0; n < (1u << 16); ++n) ASSERT_TRUE(Agrees(f, n));
  }
}

TEST(FastDivmod, EdgesOfTheRange) {
  const std::vector<uint32_t> edges = Edges();
  for (uint32_t d : edges) {
    if (d == 0) continue;
    const FastDivmod f(d);
    for (uint32_t n : edges) ASSERT_TRUE(Agrees(f, n));
    // The dividends next to multiples of d near the top of the range, where the rounding of m shows first.
    for (uint64_t q = kMaxArg / d; q + 3 > kMaxArg / d && q > 0; --q)
      for (int64_t dlt = -1; dlt <= 1; ++dlt) {
        const int64_t n = int64_t(q * d) + dlt;
        if (n >= 0 && n <= int64_t(kMaxArg)) {
          ASSERT_TRUE(Agrees(f, uint32_t(n)));
        }
      }
  }
}

TEST(FastDivmod, RandomPairs) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<uint32_t> any(0, kMaxArg), small(1, 1u << 14);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t d = i % 2 ? small(rng) : (any(rng) | 1u);
    ASSERT_TRUE(Agrees(FastDivmod(d), any(rng)));
  }
}

}  // namespace
