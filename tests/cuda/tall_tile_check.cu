// GPU check of the tall GMM tile (op_kernel/cuda/block_gemm_tall.cuh, 256 x 192 outputs a block), run by
// tests/cuda/test_tall_tile.py: C = A B with ragged M, N and K, two blocks each walking several tiles (warpgroup 1
// held back before each tile's last K step, so the two reach the epilogue apart), against the 128 x 256 tile in
// the same roles (BlockGemmWs, HPMOE_GEMM_WS=2; compared bitwise) and a float64 reference on the host. Both B
// orders the GMM tasks read: MN-major (GMM: B is [K, N]) and K-major (GMM_TRANS_B: B is W^T with W [N, K]), and
// both of the tile's epilogues. Prints one line per case; exit 0 iff all pass.
// --sustain SECONDS [M N K [staged|direct|nostore]]: the question the tile is for (docs/cuda.md, "The tall
// tile, alone"): at one shape (default one Mixtral-8x22B expert's first GMM, below), each tile launched back to
// back for SECONDS, twice, alternating, after a warm-up; prints TFLOP/s and the SM clock the launches ran at
// (block 0's clock64 against %globaltimer). The last word picks the tall tile's epilogue (TallOut; `nostore`:
// neither tile writes, the K loops alone); all but `staged` time the MN-major B only.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "gemm_variant.h"
#include "block_gemm_tall.cuh"
#include "tile_check_host.h"

using namespace hpmoe::cuda;
using tile_check::EncodeTiled;
using tile_check::Map;
using tile_check::Ok;
using T = __nv_bfloat16;

static_assert(HPMOE_GEMM_WS == 2, "built with HPMOE_GEMM_WS=2: the 128 x 256 tile in the tall tile's roles");
static_assert(HPMOE_TALL_CHECK_SKEW, "built with HPMOE_TALL_CHECK_SKEW=1: the check holds warpgroup 1 back");

namespace {

// Block 0's SM cycles and nanoseconds over the launches since the last reset: the clock they ran at.
struct ClockSpan {
  unsigned long long cycles, ns;
};

// Block 0's thread 0 at the start and end of its work (after its consumers are done).
struct SpanMark {
  uint64_t c0 = 0, t0 = 0;
  __device__ SpanMark() {
    if (blockIdx.x == 0 && threadIdx.x == 0) c0 = clock64(), t0 = GlobalTimerNs();
  }
  __device__ void End(ClockSpan* span) const {
    if (blockIdx.x == 0 && threadIdx.x == 0 && span != nullptr) {
      atomicAdd(&span->cycles, (unsigned long long)(clock64() - c0));
      atomicAdd(&span->ns, (unsigned long long)(GlobalTimerNs() - t0));
    }
  }
};

// How the tall tile's rows leave: staged in the held slot (its epilogue), straight from the accumulators (its
// fallback), or not at all (--sustain's `nostore`: the K loops alone; the 128 x 256 tile then writes nothing too).
enum TallOut : int { kOutStaged = 0, kOutDirect = 1, kOutNone = 2 };

// Both kernels: threads 256.. produce (one issues), 0..255 consume, each role at its setmaxnreg budget; the
// pipeline lives across the block's tiles. Tiles go to blocks in turn, column by column (all row tiles of a
// column tile, then the next), as the op's GMM tasks meet a weight panel: each panel is read from DRAM once
// and by the row tiles of one wave from L2, the activations stay in L2.
template <class Gemm, int kTileM, int kTileN>
__device__ void RunTiles(Gemm& g, const TmaOperand& a, const TmaOperand& b, T* c, int32_t M, int32_t N, int32_t K,
                         int out, int skew_ns, ClockSpan* span) {
  const SpanMark mark;
  const int32_t row_tiles = (M + kTileM - 1) / kTileM, tiles = row_tiles * ((N + kTileN - 1) / kTileN);
  if (g.Producer()) {
    SetMaxRegsDec<kWsProducerRegs>();
    if (g.Issuer())
      for (int32_t t = blockIdx.x; t < tiles; t += gridDim.x)
        g.Produce(a, b, t % row_tiles * kTileM, t / row_tiles * kTileN, 0, K);
    NamedBarrier<kBarRegsBack, kThreads>();  // asleep until the consumers gave theirs back (block_gemm_ws.cuh)
    SetMaxRegsInc<kWsBaseRegs>();
  } else {
    SetMaxRegsInc<kWsConsumerRegs>();
    for (int32_t t = blockIdx.x; t < tiles; t += gridDim.x) {
      const int32_t m0 = t % row_tiles * kTileM, n0 = t / row_tiles * kTileN;
      if constexpr (kTileN == kTallBN) g.skew_last_ns = uint32_t(skew_ns);
      g.Zero();
      if constexpr (kTileN == kTallBN) {
        g.template Consume<false>(0, K);
        if (out == kOutStaged) g.WriteStaged(c, N, m0, n0, M, N);
        if (out == kOutDirect) g.Write(c, N, m0, n0, M, N);
        g.ReleaseHeld();
      } else {
        g.template Consume<false>(0, K);
        if (out != kOutNone) g.WriteStaged(c, N, m0, n0, M, N);
      }
    }
    SetMaxRegsDec<kWsBaseRegs>();
    NamedBarrierArrive<kBarRegsBack, kThreads>();
  }
  mark.End(span);
}

template <bool kTransB, bool kTall>
__global__ void __launch_bounds__(kThreads, 1) TileKernel(const void* map_a, const void* map_b, const void* map_b_half,
                                                          T* c, int32_t M, int32_t N, int32_t K, int out,
                                                          int skew_ns, ClockSpan* span) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const TmaOperand a{map_a, 0, 0, 0};
  const TmaOperand b{map_b, 0, 0, 0, 0, map_b_half};
  if constexpr (kTall) {
    BlockGemmTall<T, kTransB> g(smem);
    if (threadIdx.x == 0) g.InitBarriers();
    __syncthreads();
    RunTiles<decltype(g), kTallBM, kTallBN>(g, a, b, c, M, N, K, out, skew_ns, span);
  } else {
    if (threadIdx.x == 0) WsInitPipeline<T>(smem);
    __syncthreads();
    BlockGemmWs<T, false, kTransB> g(smem);
    RunTiles<decltype(g), kBM, kBN>(g, a, b, c, M, N, K, out, skew_ns, span);
  }
}

struct Problem {
  int M, N, K;
  int sms;  // blocks a launch: one an SM, each walking tiles in turn
  int out;  // TallOut
  int skew_ns;  // the tall tile's warpgroup 1 waits this long before each tile's last K step (0 when timing)
  T *a, *b, *c_tall, *c_base;
  // Device: A (128-line boxes, both tiles); the tall tile's B (K-major: 128-line boxes, then its 64-line map;
  // MN-major: 64-line boxes, and the second unused); the 128 x 256 tile's B (K-major: 256 lines; MN-major: 64).
  CUtensorMap* maps;
};

template <bool kTransB, bool kTall>
bool Launch(const Problem& p, ClockSpan* span = nullptr) {
  auto kernel = TileKernel<kTransB, kTall>;
  const uint32_t smem = kTall ? kTallSmemBytes : kGemmWsSmemBytes;
  const int rows = kTall ? kTallBM : kBM;
  if (!Ok(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attribute"))
    return false;
  const int cols = kTall ? kTallBN : kBN, tiles = (p.M + rows - 1) / rows * ((p.N + cols - 1) / cols);
  kernel<<<tiles < p.sms ? tiles : p.sms, kThreads, smem>>>(&p.maps[0], &p.maps[kTall ? 1 : 3], &p.maps[2],
                                                             kTall ? p.c_tall : p.c_base, p.M, p.N, p.K, p.out,
                                                             p.skew_ns, span);
  return Ok(cudaGetLastError(), kTall ? "tall tile launch" : "128 x 256 tile launch");
}

float ToF(T v) { return __bfloat162float(v); }

template <bool kTransB>
bool Prepare(EncodeTiled encode, std::mt19937& rng, int M, int N, int K, Problem* p, std::vector<T>* a,
             std::vector<T>* b) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  a->assign(size_t(M) * K, T{});
  b->assign(size_t(K) * N, T{});  // [K, N], or W [N, K] for kTransB
  for (auto& v : *a) v = __float2bfloat16(dist(rng));
  for (auto& v : *b) v = __float2bfloat16(dist(rng));
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  *p = Problem{M, N, K, sms, kOutStaged, 0};
  const size_t c_bytes = size_t(M) * N * sizeof(T);
  if (!Ok(cudaMalloc(&p->a, a->size() * 2), "cudaMalloc") || !Ok(cudaMalloc(&p->b, b->size() * 2), "cudaMalloc") ||
      !Ok(cudaMalloc(&p->c_tall, c_bytes), "cudaMalloc") || !Ok(cudaMalloc(&p->c_base, c_bytes), "cudaMalloc") ||
      !Ok(cudaMalloc(&p->maps, 4 * sizeof(CUtensorMap)), "cudaMalloc"))
    return false;
  cudaMemcpy(p->a, a->data(), a->size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(p->b, b->data(), b->size() * 2, cudaMemcpyHostToDevice);
  cudaMemset(p->c_tall, 0xff, c_bytes);  // NaN bits: a row or column the tile did not write fails the checks
  cudaMemset(p->c_base, 0xff, c_bytes);
  CUtensorMap maps[4];
  std::memset(maps, 0, sizeof(maps));
  bool mapped = Map(encode, p->a, M, K, kBoxLines[kBoxRows128], &maps[0]);
  if (kTransB) {
    mapped = mapped && Map(encode, p->b, N, K, kBoxLines[kBoxRows128], &maps[1]) &&
             Map(encode, p->b, N, K, kBoxLines[kBoxRows64], &maps[2]) &&
             Map(encode, p->b, N, K, kBoxLines[kBoxRows256], &maps[3]);
  } else {
    mapped = mapped && Map(encode, p->b, K, N, kBoxLines[kBoxRows64], &maps[1]);
    maps[2] = maps[3] = maps[1];  // both tiles read MN-major B as 64-line boxes
  }
  if (!mapped) {
    std::printf("tall tile: cuTensorMapEncodeTiled failed\n");
    return false;
  }
  cudaMemcpy(p->maps, maps, sizeof(maps), cudaMemcpyHostToDevice);
  return true;
}

void Release(Problem& p) {
  cudaFree(p.a);
  cudaFree(p.b);
  cudaFree(p.c_tall);
  cudaFree(p.c_base);
  cudaFree(p.maps);
}

const char* OrderName(bool trans_b) { return trans_b ? "K-major B (GMM_TRANS_B)" : "MN-major B (GMM)"; }

// The check: ragged M (not a multiple of 256 or 128), N (of 192 or 256) and K (of 64).
template <bool kTransB>
bool Case(EncodeTiled encode, std::mt19937& rng, int M, int N, int K) {
  Problem p;
  std::vector<T> a, b;
  if (!Prepare<kTransB>(encode, rng, M, N, K, &p, &a, &b)) return false;
  p.sms = 2;  // two blocks, each walking several tiles: the pipeline carries its slots and phases across tiles
  // The tall tile's warpgroup 1 20 us late before each tile's last K step, so warpgroup 0 reaches the epilogue
  // while the other still reads the held slot: an epilogue that staged over it before both were done fails here
  // (it did, in the op, before the warpgroups met first; with the two in step this check passed).
  p.skew_ns = 20000;
  const size_t count = size_t(M) * N;
  std::vector<T> tall(count), base(count);
  bool ok = true;
  for (const int out : {kOutStaged, kOutDirect}) {
    p.out = out;
    cudaMemset(p.c_tall, 0xff, count * 2);
    if (!Launch<kTransB, true>(p) || !Launch<kTransB, false>(p) || !Ok(cudaDeviceSynchronize(), "tile kernels"))
      return false;
    cudaMemcpy(tall.data(), p.c_tall, count * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(base.data(), p.c_base, count * 2, cudaMemcpyDeviceToHost);
    const bool bitwise = std::memcmp(tall.data(), base.data(), count * 2) == 0;
    // Against float64, relative to max(|ref|, sqrt(K)) (unit normals: |C| ~ sqrt(K), so near-zero sums are
    // measured on that scale): the bf16 output's rounding is at most half an ulp, 2^-9 relative; fp32 sums of
    // K products add about K * 2^-24. Tolerance: one ulp, 2^-8.
    double worst = 0.0;
    for (int m = 0; m < M; ++m) {
      for (int n = 0; n < N; ++n) {
        double ref = 0.0;
        for (int k = 0; k < K; ++k)
          ref += double(ToF(a[size_t(m) * K + k])) * ToF(kTransB ? b[size_t(n) * K + k] : b[size_t(k) * N + n]);
        const double err =
            std::fabs(double(ToF(tall[size_t(m) * N + n])) - ref) / std::fmax(std::fabs(ref), std::sqrt(double(K)));
        worst = std::isnan(err) ? INFINITY : std::fmax(worst, err);
      }
    }
    const bool close = worst < 1.0 / 256;
    std::printf("tall tile %s, %s epilogue, M %d N %d K %d: bitwise equal to the 128 x 256 tile %s, max rel err vs "
                "float64 %.2e (tol 2^-8) %s\n",
                OrderName(kTransB), out == kOutStaged ? "staged" : "direct", M, N, K, bitwise ? "yes" : "NO", worst,
                close ? "ok" : "FAIL");
    ok = ok && bitwise && close;
  }
  Release(p);
  return ok;
}

// --sustain: launches of one tile back to back for `seconds`; TFLOP/s over them and the clock block 0 saw.
template <bool kTransB, bool kTall>
bool Sustain(const Problem& p, double seconds, ClockSpan* span, const char* round) {
  cudaMemset(span, 0, sizeof(ClockSpan));
  const auto start = std::chrono::steady_clock::now();
  long launches = 0;
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < 20; ++i)
      if (!Launch<kTransB, kTall>(p, span)) return false;
    launches += 20;
    if (!Ok(cudaDeviceSynchronize(), "sustained launches")) return false;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  ClockSpan s{};
  cudaMemcpy(&s, span, sizeof(s), cudaMemcpyDeviceToHost);
  const double flop = 2.0 * p.M * p.N * double(p.K) * launches;
  std::printf("tall tile sustain %s, %s, %s: %ld launches in %.2f s, %.1f TFLOP/s, SM clock %.0f MHz\n", round,
              OrderName(kTransB), kTall ? "256 x 192" : "128 x 256", launches, elapsed, flop / elapsed / 1e12,
              s.ns ? 1e3 * double(s.cycles) / double(s.ns) : 0.0);
  return true;
}

template <bool kTransB>
bool SustainCase(EncodeTiled encode, std::mt19937& rng, int M, int N, int K, double seconds, int out) {
  Problem p;
  std::vector<T> a, b;
  if (!Prepare<kTransB>(encode, rng, M, N, K, &p, &a, &b)) return false;
  p.out = out;
  ClockSpan* span;
  if (!Ok(cudaMalloc(&span, sizeof(ClockSpan)), "cudaMalloc")) return false;
  bool ok = Sustain<kTransB, true>(p, 1.0, span, "warm-up") && Sustain<kTransB, false>(p, 1.0, span, "warm-up");
  for (int round = 1; round <= 2 && ok; ++round) {
    const char* name = round == 1 ? "round 1" : "round 2";
    ok = Sustain<kTransB, false>(p, seconds, span, name) && Sustain<kTransB, true>(p, seconds, span, name);
  }
  cudaFree(span);
  Release(p);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const bool sustain = argc > 2 && std::strcmp(argv[1], "--sustain") == 0;
  cudaDeviceProp prop{};
  EncodeTiled encode = nullptr;
  if (const int code = tile_check::Setup("tall tile", &prop, &encode)) return code;
  std::mt19937 rng(17);
  if (sustain) {
    const double seconds = std::atof(argv[2]);
    // Default: one Mixtral-8x22B expert's first GMM at 4096 tokens, top-2 (1024 rows, K = h = 6144), N cut to
    // 25344 = 33 x 768 so that both tiles fill whole waves of 132 SMs (792 and 528 tiles).
    const int M = argc > 5 ? std::atoi(argv[3]) : 1024, N = argc > 5 ? std::atoi(argv[4]) : 25344,
              K = argc > 5 ? std::atoi(argv[5]) : 6144;
    const char* how = argc > 6 ? argv[6] : "staged";
    const int out = std::strcmp(how, "nostore") == 0  ? kOutNone
                    : std::strcmp(how, "direct") == 0 ? kOutDirect
                                                      : kOutStaged;
    std::printf("tall tile sustain: %d SMs, M %d N %d K %d, %.1f s a tile and round, tall tile epilogue %s\n",
                prop.multiProcessorCount, M, N, K, seconds,
                out == kOutNone     ? "none (K loops alone; neither tile stores)"
                : out == kOutDirect ? "direct"
                                    : "staged");
    const bool gmm = SustainCase<false>(encode, rng, M, N, K, seconds, out);
    const bool trans_b = out != kOutStaged || SustainCase<true>(encode, rng, M, N, K, seconds, out);
    return gmm && trans_b ? 0 : 1;
  }
  bool ok = true;
  // Two bands, the second ragged; three column tiles of 192 (two of 256), the last ragged; ten K steps, the
  // last partial. Then one band of fewer rows than a slab, N a single partial tile, K one partial step.
  ok = Case<false>(encode, rng, 300, 520, 600) && ok;
  ok = Case<true>(encode, rng, 300, 520, 600) && ok;
  ok = Case<false>(encode, rng, 40, 136, 56) && ok;
  ok = Case<true>(encode, rng, 40, 136, 56) && ok;
  return ok ? 0 : 1;
}
