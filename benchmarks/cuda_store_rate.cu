// How fast one SM writes a staged 128 x 256 bf16 tile (64 KB) to global memory, the weight-gradient tile's
// store phase (docs/cuda.md, "Time between tasks"), with nothing else running: `blocks` blocks of 256 threads
// each store `tiles` tiles from shared memory as 16-byte row vectors (BlockGemm::StoreStaged's pattern: a warp
// writes one 512-byte row), then thread 0 fences (the release a signal makes). Printed per tile, mean over
// blocks: cycles to issue the stores (to the block barrier after them) and cycles of the fence after them.
//   build/op_host/cuda/hpmoe_store_rate (CMake builds it where nvcc is found), or
//   nvcc -O3 -std=c++17 -arch=sm_90a benchmarks/cuda_store_rate.cu -o store_rate && ./store_rate
// Not a test: it measures, it does not check.
#include <cstdio>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

constexpr int kRows = 128, kRowBytes = 512, kThreads = 256, kPadded = kRowBytes + 16;

__global__ void StoreTiles(uint8_t* dst, int64_t ld_bytes, int tiles, int64_t tile_stride, unsigned long long* out) {
  extern __shared__ __align__(16) uint8_t staged[];
  for (int i = threadIdx.x; i < kRows * kPadded / 16; i += kThreads)
    reinterpret_cast<uint4*>(staged)[i] = make_uint4(i, blockIdx.x, 1, 2);
  __syncthreads();
  unsigned long long issue = 0, fence = 0;
  for (int t = 0; t < tiles; ++t) {
    uint8_t* tile = dst + (int64_t(blockIdx.x) * tiles + t) * tile_stride;
    const long long t0 = clock64();
    for (int i = threadIdx.x; i < kRows * kRowBytes / 16; i += kThreads) {
      const int row = i / (kRowBytes / 16), v = i % (kRowBytes / 16);
      uint4 x = *reinterpret_cast<const uint4*>(staged + row * kPadded + v * 16);
      asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(tile + row * ld_bytes + v * 16), "r"(x.x),
                   "r"(x.y), "r"(x.z), "r"(x.w)
                   : "memory");
    }
    __syncthreads();
    const long long t1 = clock64();
    if (threadIdx.x == 0) asm volatile("fence.acq_rel.sys;" ::: "memory");
    __syncthreads();
    const long long t2 = clock64();
    issue += t1 - t0;
    fence += t2 - t1;
  }
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = issue;
    out[2 * blockIdx.x + 1] = fence;
  }
}

int main() {
  const int tiles = 64;
  const int64_t ld_bytes = 6144 * 2;                   // a dW row of 6144 bf16 (Mixtral-8x22B's h)
  const int64_t tile_stride = ld_bytes * kRows;        // each tile its own 128 rows: no line written twice
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  uint8_t* dst;
  unsigned long long* out;
  const size_t bytes = size_t(sms) * tiles * tile_stride;
  if (cudaMalloc(&dst, bytes) != cudaSuccess || cudaMalloc(&out, 16 * sms) != cudaSuccess) {
    std::printf("cudaMalloc failed\n");
    return 1;
  }
  cudaFuncSetAttribute(StoreTiles, cudaFuncAttributeMaxDynamicSharedMemorySize, kRows * kPadded);
  std::printf("64 KB tiles stored as 16-byte row vectors, %d tiles a block, %.1f GB written by all blocks\n", tiles,
              bytes / 1e9);
  for (int blocks : {1, 8, 33, 66, 132}) {
    if (blocks > sms) continue;
    for (int rep = 0; rep < 2; ++rep) {
      cudaEvent_t a, b;
      cudaEventCreate(&a);
      cudaEventCreate(&b);
      cudaEventRecord(a);
      StoreTiles<<<blocks, kThreads, kRows * kPadded>>>(dst, ld_bytes, tiles, tile_stride, out);
      cudaEventRecord(b);
      if (cudaEventSynchronize(b) != cudaSuccess) {
        std::printf("launch failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
      }
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      std::vector<unsigned long long> h(2 * blocks);
      cudaMemcpy(h.data(), out, 16 * blocks, cudaMemcpyDeviceToHost);
      double issue = 0, fence = 0;
      for (int i = 0; i < blocks; ++i) {
        issue += double(h[2 * i]) / tiles / blocks;
        fence += double(h[2 * i + 1]) / tiles / blocks;
      }
      std::printf("blocks %3d rep %d: issue %6.0f cycles a tile (%4.1f B/cycle), fence %6.0f; %.3f ms, %.0f GB/s\n",
                  blocks, rep, issue, 65536.0 / issue, fence, ms, blocks * tiles * 65536.0 / ms / 1e6);
    }
  }
  return 0;
}
