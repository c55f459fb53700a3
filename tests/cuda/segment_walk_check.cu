// GPU check of the CUDA expert-segment walk (op_kernel/cuda/row_segments.cuh, ForEachExpertSegment: 32 experts
// a warp step) against the one walk every backend shares (op_kernel/runtime/row_segments.h,
// rt::ForEachExpertSegment, one expert a step), run by tests/cuda/test_segment_walk.py: the same segments in the
// same order and the same verdict, on every warp of a block, over random receive counts (empty experts, 1 to
// 256 local experts, 1 to 8 source slots, expert-aligned spans or not) and random row ranges, and over counts a
// corrupted exchange would leave (negative, past the bucket). Prints one line; exit 0 iff every case agrees.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "row_segments.cuh"

using namespace hpmoe;
using namespace hpmoe::cuda;

namespace {

constexpr int kMaxCalls = 512;  // segments recorded a case (both walks count every call; the first these many compared)
constexpr int kWarps = 4;

struct Walked {
  int32_t status;
  int32_t calls;
  uint32_t e[kMaxCalls];
  uint64_t b[kMaxCalls], t[kMaxCalls];
};

struct Range {
  uint64_t row0, rows;
};

// Block c walks case c: every warp walks with the CUDA walk (its lane 0 records), and warp 0 with the shared
// one (a plain L2 read per count), so that a warp that strayed from the others shows too.
__global__ void Walk(const DeviceRank* ranks, const Range* ranges, Walked* fast, Walked* ref) {
  const DeviceRank& d = ranks[blockIdx.x];
  const Range r = ranges[blockIdx.x];
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Walked& w = fast[blockIdx.x * kWarps + warp];
  int32_t calls = 0;
  const int32_t st = ForEachExpertSegment(d, r.row0, r.rows, [&](uint32_t e, uint64_t b, uint64_t t) {
    if (lane == 0 && calls < kMaxCalls) w.e[calls] = e, w.b[calls] = b, w.t[calls] = t;
    ++calls;
  });
  if (lane == 0) w.status = st, w.calls = calls;
  if (warp != 0 || lane != 0) return;
  Walked& o = ref[blockIdx.x];
  int32_t n = 0;
  auto count_at = [&](uint64_t s, uint64_t e) { return LoadI32(SlotCounts(d, s) + e); };
  o.status = rt::ForEachExpertSegment(d.cfg, count_at, r.row0, r.rows, [&](uint32_t e, uint64_t b, uint64_t t) {
    if (n < kMaxCalls) o.e[n] = e, o.b[n] = b, o.t[n] = t;
    ++n;
    return int32_t(0);
  });
  o.calls = n;
}

bool Ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::printf("segment walk check: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main() {
  constexpr int kCases = 3000;
  std::mt19937_64 rng(20261129);
  auto pick = [&](std::initializer_list<uint32_t> v) { return *(v.begin() + rng() % v.size()); };
  std::vector<DeviceRank> ranks(kCases);
  std::vector<Range> ranges(kCases);
  std::vector<std::vector<int32_t>> counts(kCases);
  size_t total = 0;
  for (int c = 0; c < kCases; ++c) {
    DeviceRank& d = ranks[c];
    std::memset(static_cast<void*>(&d), 0, sizeof d);
    d.cfg.ep = pick({1, 1, 2, 4, 8});
    d.cfg.experts_per_rank = pick({1, 7, 8, 31, 32, 33, 63, 64, 128, 200, 256});
    d.cfg.tile_m = pick({64, 128});
    d.cfg.recv_rows_per_src = d.cfg.tile_m * pick({1, 4, 16, 64});
    const bool aligned = rng() % 3 == 0;
    d.cfg.flags = aligned ? ssc::kConfigExpertAligned : 0;
    const uint32_t E = d.cfg.experts_per_rank, C = d.cfg.recv_rows_per_src;
    std::vector<int32_t>& n = counts[c];
    n.assign(size_t(d.cfg.ep) * E, 0);
    for (uint32_t s = 0; s < d.cfg.ep; ++s) {
      uint64_t used = 0;  // fill the slot within C (its spans) unless the case corrupts it below
      const uint32_t density = pick({0, 1, 2, 3});
      for (uint32_t e = 0; e < E; ++e) {
        if (density == 0 || rng() % 4 < 4 - density) continue;  // empty experts
        const uint64_t room = C - used;
        const uint64_t want = rng() % (2 * C / E + 2);
        uint64_t k = want < room ? want : room;
        if (aligned) {
          while (k > 0 && (k + d.cfg.tile_m - 1) / d.cfg.tile_m * d.cfg.tile_m > room) --k;
        }
        n[size_t(s) * E + e] = int32_t(k);
        used += aligned ? (k + d.cfg.tile_m - 1) / d.cfg.tile_m * d.cfg.tile_m : k;
      }
    }
    const uint32_t corrupt = rng() % 10;
    if (corrupt == 0) n[rng() % n.size()] = -int32_t(1 + rng() % 5);
    if (corrupt == 1) n[rng() % n.size()] = int32_t(C + 1 + rng() % 3);
    const uint64_t all = uint64_t(d.cfg.ep) * C;
    ranges[c].row0 = rng() % all;
    ranges[c].rows = pick({0, 1, 64, 128, 256}) + (rng() % 2 ? rng() % (2 * C) : 0);
    total += n.size();
  }
  // One count array: case c's at its offset, each rank's slot of recv counts bound to it.
  std::vector<int32_t> flat;
  std::vector<size_t> at(kCases);
  for (int c = 0; c < kCases; ++c) at[c] = flat.size(), flat.insert(flat.end(), counts[c].begin(), counts[c].end());
  int32_t* dcounts = nullptr;
  DeviceRank* dranks = nullptr;
  Range* dranges = nullptr;
  Walked *dfast = nullptr, *dref = nullptr;
  if (!Ok(cudaMalloc(&dcounts, flat.size() * 4), "cudaMalloc") ||
      !Ok(cudaMemcpy(dcounts, flat.data(), flat.size() * 4, cudaMemcpyHostToDevice), "copy counts"))
    return 2;
  for (int c = 0; c < kCases; ++c) ranks[c].bound[ssc::kSlotRecvCounts] = reinterpret_cast<uint8_t*>(dcounts + at[c]);
  if (!Ok(cudaMalloc(&dranks, sizeof(DeviceRank) * kCases), "cudaMalloc") ||
      !Ok(cudaMalloc(&dranges, sizeof(Range) * kCases), "cudaMalloc") ||
      !Ok(cudaMalloc(&dfast, sizeof(Walked) * kCases * kWarps), "cudaMalloc") ||
      !Ok(cudaMalloc(&dref, sizeof(Walked) * kCases), "cudaMalloc") ||
      !Ok(cudaMemcpy(dranks, ranks.data(), sizeof(DeviceRank) * kCases, cudaMemcpyHostToDevice), "copy ranks") ||
      !Ok(cudaMemcpy(dranges, ranges.data(), sizeof(Range) * kCases, cudaMemcpyHostToDevice), "copy ranges"))
    return 2;
  Walk<<<kCases, 32 * kWarps>>>(dranks, dranges, dfast, dref);
  if (!Ok(cudaGetLastError(), "launch") || !Ok(cudaDeviceSynchronize(), "run")) return 2;
  std::vector<Walked> fast(size_t(kCases) * kWarps), ref(kCases);
  if (!Ok(cudaMemcpy(fast.data(), dfast, sizeof(Walked) * fast.size(), cudaMemcpyDeviceToHost), "copy back") ||
      !Ok(cudaMemcpy(ref.data(), dref, sizeof(Walked) * kCases, cudaMemcpyDeviceToHost), "copy back"))
    return 2;
  int bad = 0, errors = 0, segments = 0;
  for (int c = 0; c < kCases; ++c) {
    const Walked& o = ref[c];
    errors += o.status != 0;
    segments += o.calls;
    for (int w = 0; w < kWarps; ++w) {
      const Walked& f = fast[size_t(c) * kWarps + w];
      bool same = f.status == o.status && f.calls == o.calls;
      for (int i = 0; same && i < o.calls && i < kMaxCalls; ++i)
        same = f.e[i] == o.e[i] && f.b[i] == o.b[i] && f.t[i] == o.t[i];
      if (!same && bad++ < 5)
        std::printf("segment walk check: case %d warp %d: status %d / %d, calls %d / %d (ep %u, E %u, C %u, "
                    "aligned %d, rows [%llu, +%llu))\n",
                    c, w, f.status, o.status, f.calls, o.calls, ranks[c].cfg.ep, ranks[c].cfg.experts_per_rank,
                    ranks[c].cfg.recv_rows_per_src, int(ranks[c].cfg.flags != 0),
                    (unsigned long long)ranges[c].row0, (unsigned long long)ranges[c].rows);
    }
  }
  std::printf("segment walk check: %d cases (%d with bad counts, %d segments, %zu counts): %s\n", kCases, errors,
              segments, total, bad == 0 ? "every warp's walk equals the shared walk" : "MISMATCH");
  return bad == 0 && errors > 0 && segments > 0 ? 0 : 1;
}
