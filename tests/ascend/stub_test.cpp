// The project's AscendC stubs behave as documented: the mixed-kernel core model, DMA copies (and their
// 32-byte rule), DMA atomics, vector ops, Cast rounding, ReduceSum, the Matmul API, local-memory limits, and
// the call log the protocol tests read.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "stub/stub_launch.h"

using namespace AscendC;

namespace {

struct Seen {
  int32_t type;
  int64_t block, num, sub;
  bool is_aic, is_aiv;
};
std::mutex g_mu;
std::vector<Seen> g_seen;

void IdentityKernel(GM_ADDR) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_seen.push_back({g_coreType, GetBlockIdx(), GetBlockNum(), GetSubBlockIdx(), ASCEND_IS_AIC, ASCEND_IS_AIV});
}

TEST(AscendStub, MixedLaunchHasOneAicAndTwoAivsPerCore) {
  g_seen.clear();
  stub::LaunchMix<GM_ADDR>(3, &IdentityKernel, stub::LaunchEnv{}, nullptr);
  std::set<int64_t> aic, aiv;
  for (const Seen& s : g_seen) {
    EXPECT_EQ(s.num, 3);
    EXPECT_EQ(s.is_aic, s.type == AIC);
    EXPECT_EQ(s.is_aiv, s.type == AIV);
    if (s.type == AIC) {
      aic.insert(s.block);
      EXPECT_EQ(s.sub, 0);
    } else {
      aiv.insert(s.block);
      EXPECT_EQ(s.sub, s.block % 2);
    }
  }
  EXPECT_EQ(aic, (std::set<int64_t>{0, 1, 2}));
  EXPECT_EQ(aiv, (std::set<int64_t>{0, 1, 2, 3, 4, 5}));
}

int32_t g_counter[16];
void AtomicKernel(GM_ADDR gm) {
  TPipe pipe;
  TBuf<TPosition::VECOUT> buf;
  pipe.InitBuffer(buf, 64);
  LocalTensor<int32_t> line = buf.Get<int32_t>();
  for (int i = 0; i < 16; ++i) line.SetValue(i, i == 0 ? 1 : 0);
  GlobalTensor<int32_t> g;
  g.SetGlobalBuffer(reinterpret_cast<int32_t*>(gm));
  for (int rep = 0; rep < 1000; ++rep) {
    SetAtomicAdd<int32_t>();
    DataCopy(g, line, 16);
    SetAtomicNone();
  }
}

TEST(AscendStub, AtomicDataCopyAddsFromEveryCore) {
  std::memset(g_counter, 0, sizeof(g_counter));
  // AIC threads have an L1 arena, so the same kernel runs there too (the kernel itself signals from A1).
  stub::LaunchMix<GM_ADDR>(4, &AtomicKernel, stub::LaunchEnv{}, reinterpret_cast<GM_ADDR>(g_counter));
  EXPECT_EQ(g_counter[0], 12 * 1000);
  for (int i = 1; i < 16; ++i) EXPECT_EQ(g_counter[i], 0);
}

int32_t g_max_word[16];
void MaxKernel(GM_ADDR gm) {
  TPipe pipe;
  TBuf<TPosition::VECOUT> buf;
  pipe.InitBuffer(buf, 64);
  LocalTensor<int32_t> line = buf.Get<int32_t>();
  for (int i = 0; i < 16; ++i) line.SetValue(i, 0);
  line.SetValue(0, int32_t(g_coreType == AIV ? 100 + GetBlockIdx() : GetBlockIdx()));
  GlobalTensor<int32_t> g;
  g.SetGlobalBuffer(reinterpret_cast<int32_t*>(gm));
  SetAtomicMax<int32_t>();
  DataCopy(g, line, 16);
  SetAtomicNone();
}

TEST(AscendStub, AtomicMaxDataCopyKeepsTheLargest) {
  std::memset(g_max_word, 0, sizeof(g_max_word));
  g_max_word[1] = 7;
  stub::LaunchMix<GM_ADDR>(3, &MaxKernel, stub::LaunchEnv{}, reinterpret_cast<GM_ADDR>(g_max_word));
  EXPECT_EQ(g_max_word[0], 105);  // AIV block 5
  EXPECT_EQ(g_max_word[1], 7);    // max with 0 leaves the rest of the line alone
}

// Runs `f` on one AIV with a UB arena and a log.
template <class F>
stub::CoreLog OnAiv(F f) {
  std::vector<stub::CoreLog> logs;
  static F* fn;
  fn = &f;
  stub::LaunchMix<GM_ADDR>(1, +[](GM_ADDR) { if (g_coreType == AIV && GetBlockIdx() == 0) (*fn)(); }, stub::LaunchEnv{&logs}, nullptr);
  return logs[1];
}

TEST(AscendStub, DataCopyCopiesAndLogs) {
  std::vector<float> src(64), dst(64, 0.0f);
  for (int i = 0; i < 64; ++i) src[i] = float(i) * 0.5f;
  stub::CoreLog log = OnAiv([&] {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 256);
    GlobalTensor<float> gs, gd;
    gs.SetGlobalBuffer(src.data());
    gd.SetGlobalBuffer(dst.data());
    LocalTensor<float> ub = buf.Get<float>();
    DataCopy(ub, gs, 64);
    PipeBarrier<PIPE_ALL>();
    DataCopy(gd, ub, 64);
    DataCacheCleanAndInvalid<float, CacheLine::SINGLE_CACHE_LINE, DcciDst::CACHELINE_OUT>(gd);
  });
  EXPECT_EQ(src, dst);
  ASSERT_EQ(log.records.size(), 4u);
  EXPECT_EQ(log.records[0].op, stub::Op::kCopyGmToLocal);
  EXPECT_EQ(log.records[1].op, stub::Op::kPipeBarrier);
  EXPECT_EQ(log.records[2].op, stub::Op::kCopyLocalToGm);
  EXPECT_EQ(log.records[2].addr, reinterpret_cast<uint64_t>(dst.data()));
  EXPECT_EQ(log.records[2].bytes, 256u);
  EXPECT_EQ(log.records[3].op, stub::Op::kDcci);
}

TEST(AscendStubDeathTest, MisuseTheHardwareRejectsStopsTheProcess) {
  std::vector<float> gm(64);
  EXPECT_DEATH(OnAiv([&] {
                 TPipe pipe;
                 TBuf<TPosition::VECCALC> buf;
                 pipe.InitBuffer(buf, 256);
                 GlobalTensor<float> g;
                 g.SetGlobalBuffer(gm.data());
                 DataCopy(buf.Get<float>(), g, 7);  // 28 bytes: not whole 32-byte blocks
               }),
               "multiple of 32 bytes");
  EXPECT_DEATH(OnAiv([&] {
                 TPipe pipe;
                 TBuf<TPosition::VECCALC> buf;
                 pipe.InitBuffer(buf, 200 * 1024);  // UB is 192 KiB
               }),
               "UB exhausted");
}

TEST(AscendStub, VectorOpsCastAndReduce) {
  std::vector<float> out(8);
  OnAiv([&] {
    TPipe pipe;
    TBuf<TPosition::VECCALC> a, b, w;
    pipe.InitBuffer(a, 4096);
    pipe.InitBuffer(b, 4096);
    pipe.InitBuffer(w, 4096);
    LocalTensor<float> x = a.Get<float>(), y = b.Get<float>(), work = w.Get<float>();
    for (int i = 0; i < 5; ++i) x.SetValue(i, float(i + 1));  // 1 2 3 4 5
    Duplicate(y, 2.0f, 5);
    Axpy(y, x, 3.0f, 5);  // 2 + 3x: 5 8 11 14 17
    out[0] = y.GetValue(4);
    ReduceSum(y, y, work, 5);  // 55
    out[1] = y.GetValue(0);
    // bf16 of 1 + 2^-8 is a tie between 1 and 1 + 2^-7: round to even gives 1.
    x.SetValue(0, 1.0f + std::ldexp(1.0f, -8));
    x.SetValue(1, 1.0f + 3 * std::ldexp(1.0f, -8));  // tie between 1+2^-7 and 1+2^-6: even is 1+2^-6
    LocalTensor<bfloat16_t> h = w.Get<bfloat16_t>();
    Cast(h, x, RoundMode::CAST_RINT, 2);
    Cast(y, h, RoundMode::CAST_NONE, 2);
    out[2] = y.GetValue(0);
    out[3] = y.GetValue(1);
  });
  EXPECT_EQ(out[0], 17.0f);
  EXPECT_EQ(out[1], 55.0f);
  EXPECT_EQ(out[2], 1.0f);
  EXPECT_EQ(out[3], 1.0f + std::ldexp(1.0f, -6));
}

TEST(AscendStub, MatmulMatchesFloat64WithTransposesAndAtomicAccumulation) {
  const int m = 5, n = 7, k = 9;
  std::vector<float> a(m * k), b(k * n), bt(n * k), at(k * m), c(m * n), acc(m * n, 1.0f);
  for (int i = 0; i < m * k; ++i) a[i] = std::sin(float(i));
  for (int i = 0; i < k * n; ++i) b[i] = std::cos(float(i));
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p) at[p * m + i] = a[i * k + p];
  for (int p = 0; p < k; ++p)
    for (int j = 0; j < n; ++j) bt[j * k + p] = b[p * n + j];
  static float *pa, *pb, *pbt, *pat, *pc, *pacc;
  pa = a.data(), pb = b.data(), pbt = bt.data(), pat = at.data(), pc = c.data(), pacc = acc.data();
  std::vector<stub::CoreLog> logs;
  stub::LaunchMix<GM_ADDR>(1, +[](GM_ADDR) {
    if (g_coreType != AIC) return;
    using T = MatmulType<TPosition::GM, CubeFormat::ND, float>;
    Matmul<T, T, T> mm;
    GlobalTensor<float> ga, gb, gbt, gat, gc, gacc;
    ga.SetGlobalBuffer(pa), gb.SetGlobalBuffer(pb), gbt.SetGlobalBuffer(pbt), gat.SetGlobalBuffer(pat);
    gc.SetGlobalBuffer(pc), gacc.SetGlobalBuffer(pacc);
    mm.SetOrgShape(5, 7, 9);
    mm.SetSingleShape(5, 7, 9);
    mm.SetTensorA(ga, false);
    mm.SetTensorB(gbt, true);  // B given as its transpose
    mm.IterateAll(gc);
    mm.SetTensorA(gat, true);  // A given as its transpose, accumulated onto acc (= 1)
    mm.SetTensorB(gb, false);
    mm.IterateAll(gacc, 1);
    mm.End();
  }, stub::LaunchEnv{&logs}, nullptr);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0;
      for (int p = 0; p < k; ++p) ref += double(a[i * k + p]) * b[p * n + j];
      EXPECT_NEAR(c[i * n + j], ref, 1e-5) << i << "," << j;     // fp32 sum of 9 products of |x| <= 1
      EXPECT_NEAR(acc[i * n + j], ref + 1.0, 1e-5) << i << "," << j;
    }
  }
  EXPECT_EQ(logs[0].records.size(), 2u);  // two IterateAll records on the AIC
}

TEST(AscendStubDeathTest, CubeAndVectorWorkStayOnTheirCores) {
  EXPECT_DEATH(stub::LaunchMix<GM_ADDR>(1, +[](GM_ADDR) {
                 if (g_coreType != AIC) return;
                 TPipe pipe;
                 TBuf<TPosition::A1> buf;
                 pipe.InitBuffer(buf, 64);
                 Duplicate(buf.Get<float>(), 0.0f, 16);
               }, stub::LaunchEnv{}, nullptr),
               "vector instruction issued on an AIC");
}

}  // namespace
