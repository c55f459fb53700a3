// Which SMs share a half of the H100/H200 L2, and what reading data that the other half fetched costs.
// The L2 is two partitions joined by a fabric (ncu's "ltcfabric"); the question for the persistent kernel's
// tile order is whether a line that SMs of one half read is fetched from DRAM again when SMs of the other
// half read it (docs/cuda.md, "The two halves of L2").
//
// Each launch: one block per SM (dynamic shared memory forces it). The block on SM `first` reads a buffer X
// (8 MB, L2 only: ld.global.cg) and raises a flag; the block on SM `second` waits for the flag, then reads X
// and times its read. Every other block exits. Before every launch a 256 MB scratch write evicts X from L2.
//   --pairs [first]      one launch per second SM, print "second_sm first_us second_us" (default first: 0)
//   --launches [first]   the same launches without the timing table, for Nsight Compute:
//                        ncu --metrics dram__bytes_read.sum,... -k regex:PairRead ./hpmoe_l2_sides_probe --launches
// Build: CMake builds hpmoe_l2_sides_probe where nvcc is found, or
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a benchmarks/cuda_l2_sides_probe.cu -o l2_sides_probe
// Not a test: it measures, it does not check.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

constexpr int kThreads = 1024, kUnroll = 8;
constexpr size_t kBytes = size_t(8) << 20;
constexpr size_t kScratchBytes = size_t(256) << 20;
constexpr uint64_t kFlagTimeoutNs = 2000000000ull;  // a second SM whose first never ran reports, never hangs

__device__ __forceinline__ uint32_t SmId() {
  uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

__device__ __forceinline__ uint64_t GlobalNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint4 LoadL2Only(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// The whole buffer through one block, kUnroll loads in flight per thread; returns an xor of what it read.
__device__ uint32_t ReadAll(const uint4* x, size_t n16) {
  uint32_t acc = 0;
  for (size_t base = threadIdx.x; base < n16; base += size_t(kThreads) * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + size_t(u) * kThreads;
      v[u] = i < n16 ? LoadL2Only(x + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  return acc;
}

// The block's timed read of X: thread 0 writes its ns to *ns and folds what it read into the sink.
__device__ void TimedRead(const uint4* x, size_t n16, unsigned long long* ns, unsigned long long* sink) {
  __syncthreads();
  const uint64_t t0 = GlobalNs();
  const uint32_t acc = ReadAll(x, n16);
  __syncthreads();
  if (threadIdx.x == 0) {
    *ns = GlobalNs() - t0;
    atomicXor(reinterpret_cast<unsigned int*>(sink), acc);
  }
}

// out: [0] first's read ns, [1] second's read ns, [2] xor sink, [3] 1 if the second SM timed out on the flag.
__global__ void PairRead(const uint4* x, size_t n16, uint32_t first, uint32_t second, uint32_t* flag,
                         unsigned long long* out) {
  extern __shared__ uint8_t unused[];
  const uint32_t sm = SmId();
  __shared__ uint32_t go;
  if (sm == first) {
    TimedRead(x, n16, out + 0, out + 2);
    if (threadIdx.x == 0) {
      __threadfence();
      atomicExch(flag, 1u);
    }
  } else if (sm == second) {
    if (threadIdx.x == 0) {
      const uint64_t deadline = GlobalNs() + kFlagTimeoutNs;
      uint32_t seen = 0;
      while ((seen = atomicAdd(flag, 0u)) == 0 && GlobalNs() < deadline) {
      }
      go = seen;
      if (!seen) out[3] = 1;
    }
    __syncthreads();
    if (!go) return;
    TimedRead(x, n16, out + 1, out + 2);
  }
  (void)unused;
}

#define CHECK(call)                                                                         \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));              \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3 || (std::strcmp(argv[1], "--pairs") != 0 && std::strcmp(argv[1], "--launches") != 0)) {
    std::fprintf(stderr, "usage: %s --pairs|--launches [first_sm]\n", argv[0]);
    return 2;
  }
  const bool table = std::strcmp(argv[1], "--pairs") == 0;
  char* end = nullptr;
  const long first_arg = argc > 2 ? std::strtol(argv[2], &end, 10) : 0;
  if (argc > 2 && (end == argv[2] || *end != '\0' || first_arg < 0)) {  // a whole number, nothing after it
    std::fprintf(stderr, "first_sm %s: expected an SM number\n", argv[2]);
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  if (first_arg >= sms) {
    std::fprintf(stderr, "first_sm %ld: the device has SMs 0-%d\n", first_arg, sms - 1);
    return 2;
  }
  const uint32_t first = uint32_t(first_arg);
  // One block per SM: more than half of an SM's shared memory each (less room for the static `go` word).
  const int smem = int(prop.sharedMemPerBlockOptin) - 1024;
  CHECK(cudaFuncSetAttribute(PairRead, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, PairRead, kThreads, smem));
  if (per_sm != 1) {
    std::fprintf(stderr, "expected one block per SM, occupancy says %d\n", per_sm);
    return 1;
  }
  uint4* x;
  uint8_t* scratch;
  uint32_t* flag;
  unsigned long long* out;
  CHECK(cudaMalloc(&x, kBytes));
  CHECK(cudaMalloc(&scratch, kScratchBytes));
  CHECK(cudaMalloc(&flag, 4));
  CHECK(cudaMalloc(&out, 4 * sizeof(unsigned long long)));
  CHECK(cudaMemset(x, 0x5a, kBytes));
  std::printf("# %s, %d SMs, L2 %d MB, X %zu MB, first SM %u\n", prop.name, sms, prop.l2CacheSize >> 20,
              kBytes >> 20, first);
  if (table) std::printf("# second_sm first_us second_us\n");
  for (int second = 0; second < sms; ++second) {
    if (uint32_t(second) == first) continue;
    CHECK(cudaMemset(scratch, second & 0xff, kScratchBytes));  // evicts X from L2
    CHECK(cudaMemset(flag, 0, 4));
    CHECK(cudaMemset(out, 0, 4 * sizeof(unsigned long long)));
    PairRead<<<sms, kThreads, smem>>>(x, kBytes / 16, first, uint32_t(second), flag, out);
    CHECK(cudaGetLastError());
    unsigned long long h[4];
    CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    if (h[3]) {
      std::fprintf(stderr, "SM %d never saw SM %u's flag: the blocks were not co-resident\n", second, first);
      return 1;
    }
    if (table) std::printf("%d %.1f %.1f\n", second, h[0] / 1e3, h[1] / 1e3);
  }
  return 0;
}
