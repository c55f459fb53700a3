// Experiment (-DHPMOE_EXPERIMENT_SIBLINGS=1, session 30; not the default): the row tiles of one expert read the
// same weight panels, but blocks that run them drift apart by more than L2 keeps a panel (about 14 us of DRAM
// traffic at Qwen3-235B-A22B's shapes), so each tile reads its expert's weights from DRAM again (forward: 13.5 GB
// against about 6 compulsory). Here a GMM row tile and its sibling (the expert's other tile of the pair 2i,
// 2i + 1, counted from the expert's first row; expert-aligned slots only) meet at every column tile: each posts
// the column it starts and waits, bounded, until the sibling has started it too, so both read each K step of
// the panel within a few microseconds. Only timing changes; the outputs are bitwise the default's.
// The progress words live in the control block's spare first half page (1024..2047: 256 entries); an entry is
// tagged with the launch's invocation, the output slot and the tile, so that no reset is needed and a collision
// only costs a wait.
#pragma once
#include <stdint.h>
#include "device_rank.cuh"
#include "row_segments.cuh"
#include "tile_profile.cuh"
#include "worker_threads.cuh"

#ifndef HPMOE_EXPERIMENT_SIBLINGS
#define HPMOE_EXPERIMENT_SIBLINGS 0
#endif
#ifndef HPMOE_SIBLING_PATIENCE_NS
#define HPMOE_SIBLING_PATIENCE_NS 20000  // a sibling later than this at a column is left to run alone
#endif

namespace hpmoe {
namespace cuda {

constexpr uint64_t kSiblingTableOffset = 1024;
constexpr uint32_t kSiblingEntries = 256;
constexpr uint32_t kSiblingColumnBits = 9;

struct SiblingSync {
  uint32_t* mine = nullptr;
  const uint32_t* peer = nullptr;
  uint32_t tag_mine = 0, tag_peer = 0;
  bool active = false;

  __device__ static uint32_t* Entry(const DeviceRank& d, uint32_t out_slot, uint64_t tile) {
    return reinterpret_cast<uint32_t*>(d.Segment() + kSiblingTableOffset) + (tile + 37u * out_slot) % kSiblingEntries;
  }
  __device__ static uint32_t Tag(const DeviceRank& d, uint32_t out_slot, uint64_t tile) {
    return ((d.program.invocation & 0xFFu) << 24) | ((out_slot & 0x1Fu) << 19) |
           ((uint32_t(tile) & 0x3FFu) << kSiblingColumnBits);
  }

  // Every thread: the sibling of the row tile starting at `row0` (expert e's rows). 0 or kErrCounts.
  __device__ int32_t Setup(const DeviceRank& d, uint32_t out_slot, uint64_t row0, uint32_t e) {
    __shared__ uint64_t spans[2 * kMaxRanks];
    const uint64_t tile_m = d.cfg.tile_m, C = d.cfg.recv_rows_per_src;
    active = false;
    mine = nullptr;
    if ((d.cfg.flags & ssc::kConfigExpertAligned) == 0 || row0 % tile_m != 0 || C == 0) return 0;
    const int32_t err = ExpertRowsPerSlot(d, e, spans);
    WorkerSync();
    const uint64_t s = row0 / C, begin = spans[2 * s], end = spans[2 * s + 1];
    WorkerSync();  // read before the next Setup writes
    if (err != 0) return err;
    if (row0 < begin || row0 >= end) return 0;
    const uint64_t q = (row0 - begin) / tile_m, partner = begin + (q ^ 1u) * tile_m;
    const uint64_t tile = row0 / tile_m, partner_tile = partner / tile_m;
    if (partner >= end) return 0;  // the expert's last, unpaired tile: posts nothing, waits for nobody
    mine = Entry(d, out_slot, tile);
    tag_mine = Tag(d, out_slot, tile);
    peer = Entry(d, out_slot, partner_tile);
    tag_peer = Tag(d, out_slot, partner_tile);
    active = true;
#if HPMOE_EXPERIMENT_PROFILE
    if (threadIdx.x == 0) atomicAdd(&g_sibling_profile[kSibTasks], 1ull);
#endif
    return 0;
  }

  // Thread 0, before column tile `col` (n0 / kBN) of the expert's width: post it (also once this tile runs alone,
  // so that a sibling that is only a little behind need not wait out its patience), then wait (bounded) until the
  // sibling has posted it too.
  __device__ void AtColumn(uint32_t col) {
    if (mine == nullptr) return;
    const uint32_t mark = (col + 1) & ((1u << kSiblingColumnBits) - 1);
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(mine), "r"(tag_mine | mark) : "memory");
    if (!active) return;
    const uint64_t start = GlobalTimerNs(), give_up = start + HPMOE_SIBLING_PATIENCE_NS;
    for (bool first = true;; first = false) {
      uint32_t v;
      asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(peer) : "memory");
      if ((v >> kSiblingColumnBits) == (tag_peer >> kSiblingColumnBits) && (v & ((1u << kSiblingColumnBits) - 1)) >= mark) {
#if HPMOE_EXPERIMENT_PROFILE
        atomicAdd(&g_sibling_profile[first ? kSibAtOnce : kSibAfterSpin], 1ull);
        if (!first) atomicAdd(&g_sibling_profile[kSibSpinNs], (unsigned long long)(GlobalTimerNs() - start));
#endif
        return;
      }
      if (GlobalTimerNs() > give_up) {
#if HPMOE_EXPERIMENT_PROFILE
        atomicAdd(&g_sibling_profile[kSibGaveUp], 1ull);
#endif
        active = false;  // the sibling is elsewhere: the rest of this task runs alone
        return;
      }
    }
  }
};

}  // namespace cuda
}  // namespace hpmoe
