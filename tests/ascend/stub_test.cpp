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
#include "lib/hccl/hccl.h"
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
int32_t g_one_line[16] = {1};
void AtomicKernel(GM_ADDR gm) {
  TPipe pipe;
  GlobalTensor<int32_t> g, one;
  g.SetGlobalBuffer(reinterpret_cast<int32_t*>(gm));
  one.SetGlobalBuffer(g_one_line);
  auto add = [&](const LocalTensor<int32_t>& line) {
    for (int rep = 0; rep < 1000; ++rep) {
      SetAtomicAdd<int32_t>();
      DataCopy(g, line, 16);
      SetAtomicNone();
    }
  };
  if (g_coreType == AIV) {  // the line from scalar writes into UB
    TBuf<TPosition::VECOUT> buf;
    pipe.InitBuffer(buf, 64);
    LocalTensor<int32_t> line = buf.Get<int32_t>();
    for (int i = 0; i < 16; ++i) line.SetValue(i, i == 0 ? 1 : 0);
    PipeBarrier<PIPE_ALL>();
    add(line);
  } else {  // the AIC has no UB: its line comes from GM into L1 (as the kernel's AIC signals)
    TBuf<TPosition::A1> buf;
    pipe.InitBuffer(buf, 64);
    LocalTensor<int32_t> line = buf.Get<int32_t>();
    DataCopy(line, one, 16);
    PipeBarrier<PIPE_ALL>();
    add(line);
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
  if (g_coreType != AIV) return;
  TPipe pipe;
  TBuf<TPosition::VECOUT> buf;
  pipe.InitBuffer(buf, 64);
  LocalTensor<int32_t> line = buf.Get<int32_t>();
  for (int i = 0; i < 16; ++i) line.SetValue(i, 0);
  line.SetValue(0, int32_t(100 + GetBlockIdx()));
  PipeBarrier<PIPE_ALL>();
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
    PipeBarrier<PIPE_ALL>();  // scalar writes before the vector reads (the pipe model checks it)
    Duplicate(y, 2.0f, 5);
    Axpy(y, x, 3.0f, 5);  // 2 + 3x: 5 8 11 14 17
    PipeBarrier<PIPE_ALL>();
    out[0] = y.GetValue(4);
    ReduceSum(y, y, work, 5);  // 55
    PipeBarrier<PIPE_ALL>();
    out[1] = y.GetValue(0);
    // bf16 of 1 + 2^-8 is a tie between 1 and 1 + 2^-7: round to even gives 1.
    x.SetValue(0, 1.0f + std::ldexp(1.0f, -8));
    x.SetValue(1, 1.0f + 3 * std::ldexp(1.0f, -8));  // tie between 1+2^-7 and 1+2^-6: even is 1+2^-6
    PipeBarrier<PIPE_ALL>();
    LocalTensor<bfloat16_t> h = w.Get<bfloat16_t>();
    Cast(h, x, RoundMode::CAST_RINT, 2);
    Cast(y, h, RoundMode::CAST_NONE, 2);
    PipeBarrier<PIPE_ALL>();
    out[2] = y.GetValue(0);
    out[3] = y.GetValue(1);
  });
  EXPECT_EQ(out[0], 17.0f);
  EXPECT_EQ(out[1], 55.0f);
  EXPECT_EQ(out[2], 1.0f);
  EXPECT_EQ(out[3], 1.0f + std::ldexp(1.0f, -6));
}

TCubeTiling Tiling(int32_t m, int32_t n, int32_t k) {
  TCubeTiling t;
  t.usedCoreNum = 1, t.M = t.singleCoreM = m, t.N = t.singleCoreN = n, t.Ka = t.Kb = t.singleCoreK = k;
  t.baseM = 16, t.baseN = 16, t.baseK = 16, t.depthA1 = t.depthB1 = 2;
  t.stepM = t.stepN = t.stepKa = t.stepKb = 1, t.dbL0A = t.dbL0B = 2, t.dbL0C = 1;
  return t;
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
    TPipe pipe;
    TCubeTiling tiling = Tiling(16, 16, 16);
    mm.Init(&tiling, &pipe);
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

// Runs `f` on AIC 0 of a one-core launch with a workspace of `workspace_bytes`.
template <class F>
void OnAic(F f, uint64_t workspace_bytes = 0) {
  static F* fn;
  fn = &f;
  stub::LaunchEnv env;
  env.workspace_bytes = workspace_bytes;
  stub::LaunchMix<GM_ADDR>(1, +[](GM_ADDR) { if (g_coreType == AIC) (*fn)(); }, env, nullptr);
}

// Issue 18 rules: each is broken here on purpose and must stop the process with its message.
TEST(AscendStubDeathTest, PipeModelCatchesBufferReuseWithoutAFlag) {
  std::vector<uint8_t> a(64, 1), b(64, 0);
  auto copy_twice = [&](bool with_flag) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 64);
    GlobalTensor<uint8_t> ga, gb;
    ga.SetGlobalBuffer(a.data());
    gb.SetGlobalBuffer(b.data());
    LocalTensor<uint8_t> ub = buf.Get<uint8_t>();
    for (int chunk = 0; chunk < 2; ++chunk) {  // the pre-issue-18 CopyChunk loop
      DataCopyPad(ub, ga, DataCopyExtParams{1, 64, 0, 0, 0}, DataCopyPadExtParams<uint8_t>{});
      PipeBarrier<PIPE_ALL>();
      DataCopyPad(gb, ub, DataCopyExtParams{1, 64, 0, 0, 0});
      if (with_flag) {
        SetFlag<HardEvent::MTE3_MTE2>(0);
        WaitFlag<HardEvent::MTE3_MTE2>(0);
      }
    }
  };
  OnAiv([&] { copy_twice(true); });
  EXPECT_EQ(a, b);
  EXPECT_DEATH(OnAiv([&] { copy_twice(false); }), "pipe hazard: DataCopyPad GM->UB \\(MTE2 write\\).*MTE3 read");
  // Reading a vector result with the scalar unit needs V -> S ordering.
  EXPECT_DEATH(OnAiv([&] {
                 TPipe pipe;
                 TBuf<TPosition::VECCALC> buf;
                 pipe.InitBuffer(buf, 256);
                 LocalTensor<float> x = buf.Get<float>();
                 Duplicate(x, 1.0f, 64);
                 (void)x.GetValue(0);
               }),
               "pipe hazard: LocalTensor::GetValue");
  EXPECT_DEATH(OnAiv([&] { WaitFlag<HardEvent::MTE2_V>(3); }), "WaitFlag on an event id no SetFlag set");
}

TEST(AscendStubDeathTest, CopiesAndBuffersKeepToTheirDocumentedPositions) {
  std::vector<uint8_t> gm(4096);
  EXPECT_DEATH(OnAic([&] {  // the pre-issue-18 zero block: DataCopyPad from A1 to GM
                 TPipe pipe;
                 TBuf<TPosition::A1> l1;
                 pipe.InitBuffer(l1, 4096);
                 GlobalTensor<uint8_t> g;
                 g.SetGlobalBuffer(gm.data());
                 DataCopyPad(g, l1.Get<uint8_t>(), DataCopyExtParams{1, 4096, 0, 0, 0});
               }),
               "DataCopyPad to GM from a non-UB position");
  EXPECT_DEATH(OnAic([&] {
                 TPipe pipe;
                 TBuf<TPosition::VECCALC> ub;
                 pipe.InitBuffer(ub, 64);
               }),
               "a UB buffer \\(VECIN/VECOUT/VECCALC\\) on an AIC");
}

TEST(AscendStubDeathTest, MatmulNeedsAConsistentHostTiling) {
  using T = MatmulType<TPosition::GM, CubeFormat::ND, AscendC::half>;
  EXPECT_DEATH(OnAic([] {  // the pre-issue-18 kernel: mm.Init(nullptr)
                 TPipe pipe;
                 Matmul<T, T, T> mm;
                 mm.Init(nullptr, &pipe);
               }),
               "Matmul::Init: the tiling is nullptr");
  EXPECT_DEATH(OnAic([] {
                 TPipe pipe;
                 Matmul<T, T, T> mm;
                 TCubeTiling t = Tiling(256, 512, 64);
                 t.baseM = 256, t.baseN = 512;  // 512 KiB of fp32 in L0C
                 mm.Init(&t, &pipe);
               }),
               "exceeds L0C");
  EXPECT_DEATH(OnAic([] {  // every live Matmul object holds its L1 queues
                 TPipe pipe;
                 TCubeTiling t = Tiling(128, 256, 64);
                 t.baseM = 128, t.baseN = 256, t.baseK = 64, t.depthA1 = t.depthB1 = 8;
                 Matmul<T, T, T> mm[3];
                 for (auto& m : mm) m.Init(&t, &pipe);
               }),
               "L1 exhausted");
}

TEST(AscendStubDeathTest, UserWorkspaceLiesPastTheSystemWorkspace) {
  EXPECT_DEATH(OnAic([] { (void)GetUserWorkspace(nullptr); }, 4096), "GetUserWorkspace: the workspace is not larger");
  static uint8_t ws[64];
  GM_ADDR user = nullptr;
  OnAic([&] { user = GetUserWorkspace(ws); }, stub::kSystemWorkspaceBytes + 64);
  EXPECT_EQ(user, ws + stub::kSystemWorkspaceBytes);
}

// Hccl stub rule (Init.md, SetCcTiling.md; every ops-transformer MoeDistribute* kernel): Init takes the host's
// Mc2InitTiling and SetCcTiling its Mc2CcTiling, both filled by Mc2CcTilingConfig::GetTiling; the windows
// exist only after both. Broken here: the pre-issue-18 kernel's Init(context) with no tiling, blocks the host
// never filled, SetCcTiling skipped.
template <class F>
void OnAicWithGroup(F f) {
  static F* fn;
  fn = &f;
  static stub::HcclContext group;
  static uint8_t window[64];
  group.rank_dim = 1;
  group.windows_in[0] = reinterpret_cast<uint64_t>(window);
  stub::LaunchEnv env;
  env.hccl_context = &group;
  stub::LaunchMix<GM_ADDR>(1, +[](GM_ADDR) { if (g_coreType == AIC) (*fn)(); }, env, nullptr);
}

TEST(AscendStubDeathTest, HcclNeedsTheHostsMc2TilingBlocks) {
  static uint8_t filled[280], unfilled[280];
  std::memcpy(filled, &stub::kMc2TilingMark, 4);
  std::memset(unfilled, 0, sizeof(unfilled));
  auto ctx = [] { return GetHcclContext<HCCL_GROUP_ID_0>(); };
  OnAicWithGroup([&] {  // the rule's pass case: both blocks filled, then the windows
    Hccl hccl;
    hccl.Init(ctx(), filled);
    hccl.SetCcTiling(filled);
    EXPECT_NE(hccl.GetWindowsInAddr(0), nullptr);
  });
  EXPECT_DEATH(OnAicWithGroup([&] { Hccl().Init(ctx(), nullptr); }), "Mc2InitTiling missing or not filled");
  EXPECT_DEATH(OnAicWithGroup([&] { Hccl().Init(ctx(), unfilled); }), "Mc2InitTiling missing or not filled");
  EXPECT_DEATH(OnAicWithGroup([&] {
                 Hccl hccl;
                 hccl.Init(ctx(), filled);
                 hccl.SetCcTiling(unfilled);
               }),
               "Mc2CcTiling missing or not filled");
  EXPECT_DEATH(OnAicWithGroup([&] {
                 Hccl hccl;
                 hccl.Init(ctx(), filled);
                 (void)hccl.GetWindowsInAddr(0);
               }),
               "Hccl windows used before Init\\(context, Mc2InitTiling\\) \\+ SetCcTiling");
}

}  // namespace
