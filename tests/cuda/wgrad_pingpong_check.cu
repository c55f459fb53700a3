// GPU check of the ping-pong weight-gradient unit (op_kernel/cuda/block_gemm_pingpong.cuh), run by
// tests/cuda/test_wgrad_pingpong.py: dW = X^T dY over K segments (an expert's rows per source slot, some empty,
// ends not on 64-row steps), each block one unit (a 128-row slab of dW x a column block), against the default
// tile (BlockGemmTma, 128 x 256, both warpgroups on one tile) bitwise and a float64 reference on the host, with
// its whole tiles leaving by TMA stores (a dW map given) and with every tile stored by its warps (none).
// Cases cover one K step a tile, odd tile counts, ragged rows and columns, tails of whole k16 groups. A kernel
// still running after 20 s is reported as a hang (exit 3), not waited for. Prints one line per case; exit 0
// iff all pass.
// --bench: the unit alone, one an SM, both tiles timed: Qwen3-235B-A22B's widths (256 and 250 rows an expert,
// whole widths), and 1024-column units at 64 to 2048 rows an expert. --bench-loaded: units on half the SMs, first
// alone, then with a kernel streaming reads from DRAM through L2 on the other half (the op's other blocks, as far
// as the memory system sees them): whether a unit's K loop slows with the traffic of other SMs. --bench-tensor:
// the same, the other half running wgmma on operands already in shared memory (no memory traffic): whether the
// unit's K loop slows with other SMs' tensor work alone.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gemm_variant.h"
#include "block_gemm_pingpong.cuh"
#include "tile_check_host.h"

using namespace hpmoe::cuda;
using tile_check::EncodeTiled;
using tile_check::Ok;
using T = __nv_bfloat16;

namespace {

constexpr int kMaxSegments = 8;

// One unit: dW rows [b0, b0 + rows) x columns [c0, c1), K the rows of `seg`.
struct Unit {
  int32_t rows, c0, c1;
};

template <bool kPingPong>
__global__ void __launch_bounds__(kThreads, 1) UnitKernel(const void* map_x, const void* map_dy, const void* map_dw,
                                                          T* dw, int32_t ldc, const uint64_t* segments, int nseg,
                                                          Unit unit, int32_t h) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ uint64_t seg[2 * kMaxSegments];
  if (threadIdx.x < 2 * nseg) seg[threadIdx.x] = segments[threadIdx.x];
  __syncthreads();
  const int32_t b0 = int32_t(blockIdx.x) * unit.rows;
  const int32_t rows = min(unit.rows, h - b0);
  const TmaOperand a{map_x, b0, 0, 0};
  const TmaOperand b{map_dy, 0, 0, 0};
  T* out = dw + int64_t(b0) * ldc;
  if constexpr (kPingPong) {
    WeightGradPingPong<T> pp(smem, seg, nseg, rows, unit.c0, unit.c1);
    pp.Run(a, b, out, ldc, TmaOperand{map_dw, 0, b0, 0});
  } else {
    BlockGemmTma<T, true, false> g(smem);
    for (int32_t m0 = 0; m0 < rows; m0 += kBM)
      for (int32_t n0 = unit.c0; n0 < unit.c1; n0 += kBN) {
        g.Zero();
        for (int s = 0; s < nseg; ++s)
          if (seg[2 * s] < seg[2 * s + 1]) g.Accumulate(a, b, m0, n0, int32_t(seg[2 * s]), int32_t(seg[2 * s + 1]));
        g.WriteStaged(out, ldc, m0, n0, rows, unit.c1);
      }
  }
}

// --bench-loaded's traffic: one block an SM (its shared memory keeps units off its SM), 16-byte loads streaming
// through `buf` until *stop (host-mapped) is set, or after 5 s.
__global__ void __launch_bounds__(256, 1) StreamReads(const int4* buf, size_t n, const volatile int* stop, int* sink) {
  extern __shared__ int4 unused[];
  const uint64_t t0 = clock64();
  int acc = 0;
  for (size_t pass = 0;; ++pass) {
    for (size_t i = blockIdx.x * 256 + threadIdx.x; i < n; i += size_t(gridDim.x) * 256) acc ^= buf[i].x + buf[i].w;
    if (*stop != 0 || clock64() - t0 > 10'000'000'000ull) break;
  }
  if (acc == 0x12345678) sink[0] = int(unused[0].x);  // keeps the loads
}

// --bench-tensor's load: one block an SM, both warpgroups running the unit's own step (IssueStep: two
// m64n128k16 a k16 on one 32 KB slot) on random operands that stay in shared memory, until *stop or after 5 s;
// no global traffic.
__global__ void __launch_bounds__(kThreads, 1) TensorSpin(const int4* init, const volatile int* stop, int* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  WeightGradPingPong<T> pp(smem, nullptr, 0, kBM, 0, kPpBN);  // no segments: only its slots and its step
  int4* slot = reinterpret_cast<int4*>(smem + (pp.Slot(0) - static_cast<uint32_t>(__cvta_generic_to_shared(smem))));
  for (int i = threadIdx.x; i < int(kPpStageBytes / 16); i += kThreads) slot[i] = init[i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // written by threads, read by wgmma
  __syncthreads();
  pp.Zero();
  const uint64_t t0 = clock64();
  for (uint32_t round = 0;; ++round) {
    pp.IssueStep(0);
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    // One decision for the block: wgmma is warpgroup-collective, so no warp may leave alone.
    if ((round & 255) == 0 && __syncthreads_or(threadIdx.x == 0 && (*stop != 0 || clock64() - t0 > 10'000'000'000ull)))
      break;
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < 128; ++i) acc += pp.d[i];
  if (acc == 1.2345f) sink[0] = 1;  // keeps the products
}

// Waits for the device, reporting a kernel that runs past 20 s as a hang (the process exits: the context
// cannot be recovered from a kernel that never ends).
bool Finish(const char* what) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t e = cudaStreamQuery(nullptr);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) return Ok(e, what);
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) {
      std::printf("wgrad ping-pong: %s HANG (still running after 20 s)\n", what);
      std::fflush(stdout);
      std::_Exit(3);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// map_dw: dW's map for the ping-pong's TMA stores (null: its warps store every tile).
template <bool kPingPong>
bool Launch(const CUtensorMap* maps, const CUtensorMap* map_dw, T* dw, int32_t ldc, const uint64_t* segs, int nseg,
            Unit unit, int32_t h, float* ms = nullptr) {
  auto kernel = UnitKernel<kPingPong>;
  const uint32_t bytes = kGemmTmaSmemBytes;
  if (!Ok(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), "smem attribute"))
    return false;
  const int blocks = (h + unit.rows - 1) / unit.rows;
  const char* name = kPingPong ? "ping-pong unit kernel" : "default tile kernel";
  kernel<<<blocks, kThreads, bytes>>>(&maps[0], &maps[1], map_dw, dw, ldc, segs, nseg, unit, h);
  if (!Ok(cudaGetLastError(), "launch") || !Finish(name)) return false;
  if (ms == nullptr) return true;
  return tile_check::TimeLaunches(
      [&] { kernel<<<blocks, kThreads, bytes>>>(&maps[0], &maps[1], map_dw, dw, ldc, segs, nseg, unit, h); },
      [&](const char*) { return Finish(name); }, ms);
}

float ToF(T v) { return __bfloat162float(v); }

struct Case {
  const char* name;
  int32_t h, n;                   // dW is h x n
  Unit unit;                      // each block: `unit.rows` rows of dW, columns [c0, c1)
  std::vector<uint64_t> segments; // K ranges [s0, s1), ...: rows of X and dY
};

// Load: --bench-loaded's other half of the SMs (null: none).
struct Load {
  bool tensor;  // TensorSpin (buf: its operands) instead of StreamReads
  int blocks;
  const int4* buf;
  size_t n;
  int* stop;  // host-mapped
  int* sink;
  cudaStream_t stream;
};

bool Run(EncodeTiled encode, std::mt19937& rng, const Case& c, bool bench, const Load* load = nullptr) {
  const int32_t k_rows = int32_t(*std::max_element(c.segments.begin(), c.segments.end())) + 64;  // rows past the
  const int nseg = int(c.segments.size() / 2);  // last segment: another expert's, never summed
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<T> x(size_t(k_rows) * c.h), dy(size_t(k_rows) * c.n);
  for (auto& v : x) v = __float2bfloat16(dist(rng));
  for (auto& v : dy) v = __float2bfloat16(dist(rng));
  T *dx, *ddy, *dw_pp, *dw_thr, *dw_ref;  // ping-pong with TMA stores, with its warps' stores; default tile
  uint64_t* dseg;
  CUtensorMap* dmaps;
  const size_t w_bytes = size_t(c.h) * c.n * sizeof(T);
  if (!Ok(cudaMalloc(&dx, x.size() * 2), "cudaMalloc") || !Ok(cudaMalloc(&ddy, dy.size() * 2), "cudaMalloc") ||
      !Ok(cudaMalloc(&dw_pp, w_bytes), "cudaMalloc") || !Ok(cudaMalloc(&dw_thr, w_bytes), "cudaMalloc") ||
      !Ok(cudaMalloc(&dw_ref, w_bytes), "cudaMalloc") || !Ok(cudaMalloc(&dseg, c.segments.size() * 8), "cudaMalloc") ||
      !Ok(cudaMalloc(&dmaps, 3 * sizeof(CUtensorMap)), "cudaMalloc"))
    return false;
  cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(ddy, dy.data(), dy.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dseg, c.segments.data(), c.segments.size() * 8, cudaMemcpyHostToDevice);
  // 0x7f7f (3.4e38): an element the unit should write and did not fails the float64 check; one outside the
  // unit's columns must still hold it.
  cudaMemset(dw_pp, 0x7f, w_bytes);
  cudaMemset(dw_thr, 0x7f, w_bytes);
  cudaMemset(dw_ref, 0x7f, w_bytes);
  CUtensorMap maps[3];
  std::memset(maps, 0, sizeof(maps));
  if (!tile_check::Map(encode, dx, k_rows, c.h, kBoxLines[kBoxRows64], &maps[0]) ||
      !tile_check::Map(encode, ddy, k_rows, c.n, kBoxLines[kBoxRows64], &maps[1]) ||
      !tile_check::Map(encode, dw_pp, c.h, c.n, kBoxLines[kBoxRows64], &maps[2])) {
    std::printf("wgrad ping-pong: cuTensorMapEncodeTiled failed\n");
    return false;
  }
  cudaMemcpy(dmaps, maps, sizeof(maps), cudaMemcpyHostToDevice);
  float pp_ms = 0, thr_ms = 0, ref_ms = 0;
  if (load != nullptr) {  // the traffic first, so that it holds its SMs; stopped below
    *load->stop = 0;
    const uint32_t bytes = kGemmTmaSmemBytes;
    if (load->tensor) {
      cudaFuncSetAttribute(TensorSpin, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
      TensorSpin<<<load->blocks, kThreads, bytes, load->stream>>>(load->buf, load->stop, load->sink);
    } else {
      cudaFuncSetAttribute(StreamReads, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
      StreamReads<<<load->blocks, 256, bytes, load->stream>>>(load->buf, load->n, load->stop, load->sink);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const bool failed = !Launch<false>(dmaps, nullptr, dw_ref, c.n, dseg, nseg, c.unit, c.h, bench ? &ref_ms : nullptr) ||
      !Launch<true>(dmaps, &dmaps[2], dw_pp, c.n, dseg, nseg, c.unit, c.h, bench ? &pp_ms : nullptr) ||
      !Launch<true>(dmaps, nullptr, dw_thr, c.n, dseg, nseg, c.unit, c.h, bench ? &thr_ms : nullptr);
  if (load != nullptr) {
    *load->stop = 1;
    if (!Ok(cudaStreamSynchronize(load->stream), "traffic kernel")) return false;
  }
  if (failed) return false;
  uint64_t k_total = 0;
  for (int s = 0; s < nseg; ++s) k_total += c.segments[2 * s + 1] - c.segments[2 * s];
  if (bench) {
#if HPMOE_EXPERIMENT_PROFILE
    ProfilePrintKernel<<<1, 1>>>(1);  // the ping-pong lines; the default tile's are not counted here
    cudaDeviceSynchronize();
#endif
    const double flop = 2.0 * c.h * (c.unit.c1 - c.unit.c0) * double(k_total);
    const char* beside =
        load == nullptr ? "" : load->tensor ? ", other SMs multiplying" : ", other SMs streaming reads";
    std::printf("wgrad ping-pong bench %s%s: default tile %.3f ms (%.0f TFLOP/s), ping-pong %.3f ms (%.0f TFLOP/s; "
                "its warps storing: %.3f ms)\n",
                c.name, beside, ref_ms, flop / ref_ms / 1e9, pp_ms, flop / pp_ms / 1e9, thr_ms);
  }
  std::vector<T> pp(size_t(c.h) * c.n), thr(size_t(c.h) * c.n), ref(size_t(c.h) * c.n);
  cudaMemcpy(pp.data(), dw_pp, w_bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(thr.data(), dw_thr, w_bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(ref.data(), dw_ref, w_bytes, cudaMemcpyDeviceToHost);
  // Both store paths bitwise the default tile (which also covers the outside columns of the warps' path).
  const bool bitwise = std::memcmp(pp.data(), ref.data(), w_bytes) == 0 &&
                       std::memcmp(thr.data(), ref.data(), w_bytes) == 0;
  // Against float64, relative to max(|ref|, sqrt(K)) (unit normals: |dW| ~ sqrt(K), so near-zero sums are
  // measured on that scale): the bf16 output's rounding is at most half an ulp, 2^-9 relative; fp32 sums of
  // K <= 1000 products add about K * 2^-24. Tolerance: one ulp, 2^-8. Outside [c0, c1): untouched bits.
  double worst = 0.0;
  bool untouched = true;
  for (int32_t m = 0; m < c.h && !bench; ++m) {  // (--bench: the bitwise comparison only)
    for (int32_t n = 0; n < c.n; ++n) {
      const uint16_t bits = reinterpret_cast<const uint16_t*>(pp.data())[size_t(m) * c.n + n];
      if (n < c.unit.c0 || n >= c.unit.c1) {
        untouched = untouched && bits == 0x7f7f;
        continue;
      }
      double r = 0.0;
      for (int s = 0; s < nseg; ++s)
        for (uint64_t k = c.segments[2 * s]; k < c.segments[2 * s + 1]; ++k)
          r += double(ToF(x[k * c.h + m])) * ToF(dy[k * c.n + n]);
      const double err = std::fabs(double(ToF(pp[size_t(m) * c.n + n])) - r) /
                         std::fmax(std::fabs(r), std::sqrt(double(std::max<uint64_t>(k_total, 1))));
      worst = std::isnan(err) ? INFINITY : std::fmax(worst, err);
    }
  }
  const bool close = worst < 1.0 / 256;
  std::printf("wgrad ping-pong %s: bitwise equal to the default tile %s, max rel err vs float64 %.2e (tol 2^-8) %s, "
              "columns outside the unit untouched %s\n",
              c.name, bitwise ? "yes" : "NO", worst, close ? "ok" : "FAIL", untouched ? "yes" : "NO");
  cudaFree(dx);
  cudaFree(ddy);
  cudaFree(dw_pp);
  cudaFree(dw_thr);
  cudaFree(dw_ref);
  cudaFree(dseg);
  cudaFree(dmaps);
  return bitwise && close && untouched;
}

}  // namespace

int main(int argc, char** argv) {
  const bool tensor = argc > 1 && std::strcmp(argv[1], "--bench-tensor") == 0;
  const bool loaded = tensor || (argc > 1 && std::strcmp(argv[1], "--bench-loaded") == 0);
  const bool bench = loaded || (argc > 1 && std::strcmp(argv[1], "--bench") == 0);
  cudaDeviceProp prop{};
  EncodeTiled encode = nullptr;
  if (const int code = tile_check::Setup("wgrad ping-pong", &prop, &encode)) return code;
  std::mt19937 rng(21);
  std::vector<Case> cases;
  if (bench) {  // one unit (a 128-row slab) per SM: Qwen3-235B-A22B's DW1 widths (2I 3072 whole, 256 rows an
    // expert), Mixtral-8x22B's units (1024 columns, 1024 rows an expert)
    const int32_t h = 128 * (loaded ? prop.multiProcessorCount / 2 : prop.multiProcessorCount);
    cases.push_back({"one unit an SM, 3072 columns whole, K 256", h, 3072, {128, 0, 3072}, {0, 256}});
    cases.push_back({"one unit an SM, 3072 columns whole, K 250", h, 3072, {128, 0, 3072}, {0, 250}});
    const char* names[] = {"one unit an SM, 1024 columns, K 64",  "one unit an SM, 1024 columns, K 128",
                           "one unit an SM, 1024 columns, K 256",  "one unit an SM, 1024 columns, K 512",
                           "one unit an SM, 1024 columns, K 1024", "one unit an SM, 1024 columns, K 2048"};
    for (int i = 0; i < 6; ++i) cases.push_back({names[i], h, 1024, {128, 0, 1024}, {0, 64ull << i}});
  } else {
    // Three source slots, one empty, ends inside 64-row steps: 5 + 11 steps a tile, 8 tiles a unit.
    cases.push_back({"3 slots (one empty), ragged K, 8 tiles", 384, 1024, {128, 0, 1024}, {0, 300, 300, 300, 337, 1000}});
    // One K step a tile (an expert with 40 rows): every refill is another tile's.
    cases.push_back({"one K step a tile", 256, 1024, {128, 0, 1024}, {0, 40}});
    // Three steps a tile, odd tile count (7), ragged last tile, rows not a multiple of 128 (200: 128 + 72).
    cases.push_back({"3 steps, 7 tiles, ragged rows and columns", 200, 1000, {128, 128, 1000}, {5, 60, 100, 150, 180, 230}});
    // Tails of whole k16 groups (48 and 16 lines): fewer wgmmas and no zeroed lines.
    cases.push_back({"K tails of whole k16 groups", 256, 512, {128, 0, 512}, {0, 112, 112, 192}});
    // A single tile: the second warpgroup has none.
    cases.push_back({"one tile", 128, 128, {128, 0, 128}, {0, 700}});
  }
  bool ok = true;
  if (loaded) {  // each case alone on half the SMs, then beside the traffic on the other half
    Load load{tensor, prop.multiProcessorCount - prop.multiProcessorCount / 2, nullptr, size_t(1) << 26, nullptr,
              nullptr, nullptr};  // 1 GiB of int4
    int4* buf;
    if (!Ok(cudaMalloc(&buf, load.n * sizeof(int4)), "cudaMalloc") || !Ok(cudaMalloc(&load.sink, 4), "cudaMalloc") ||
        !Ok(cudaHostAlloc(&load.stop, 4, cudaHostAllocMapped), "cudaHostAlloc") ||
        !Ok(cudaStreamCreateWithFlags(&load.stream, cudaStreamNonBlocking), "stream"))
      return 1;
    cudaMemset(buf, 1, load.n * sizeof(int4));
    if (tensor) {  // TensorSpin's operands: random bf16, so that the products toggle as the unit's do
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<T> v(kPpStageBytes / 2);
      for (auto& e : v) e = __float2bfloat16(dist(rng));
      cudaMemcpy(buf, v.data(), kPpStageBytes, cudaMemcpyHostToDevice);
    }
    load.buf = buf;
    for (const Case& c : {cases[0], cases[4]}) ok = Run(encode, rng, c, true) && Run(encode, rng, c, true, &load) && ok;
    return ok ? 0 : 1;
  }
  for (const Case& c : cases) ok = Run(encode, rng, c, bench) && ok;
  return ok ? 0 : 1;
}
