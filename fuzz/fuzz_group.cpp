#include "fuzz_group.h"

#include <cstdlib>
#include <cstring>

#include "shm_heap.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HPMOE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HPMOE_ASAN 1
#endif
#ifdef HPMOE_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace hpmoe {
namespace fuzz {
namespace {

uint64_t RoundUp(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

uint32_t Hash(uint32_t x) {  // deterministic filler values
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

}  // namespace

bool SmallEnoughToRun(const ssc::SscConfig& c) {
  return c.ep <= 4 && c.tokens <= 256 && c.hidden <= 256 && c.inter <= 256 && c.experts_per_rank <= 4 &&
         c.recv_rows_per_src <= 256 && c.num_aic + c.num_aiv <= 8;
}

std::string FencedGroupHeap::Create(const ssc::SscConfig& cfg, uint32_t counters_fwd, uint32_t counters_bwd) {
  cfg_ = cfg;
  std::string err = cpu::ComputeHeapLayout(cfg, counters_fwd, counters_bwd, &layout_);
  if (!err.empty()) return err;
  // Guards as large as the largest slot: a handler indexing a slot with another slot's row count ends in one.
  for (uint32_t s = 0; s < ssc::kSlotCount; ++s) guard_ = guard_ > layout_.slots[s].bytes ? guard_ : layout_.slots[s].bytes;
  guard_ = RoundUp(guard_, 64);
  uint64_t offset = cpu::kControlBytes;
  for (uint32_t s = 0; s < ssc::kSlotCount; ++s) {
    offset += guard_;
    layout_.slot_offset[s] = offset;
    offset = RoundUp(offset + layout_.slots[s].bytes, 64);
  }
  offset += guard_;
  for (uint32_t d = 0; d < 2; ++d) {
    layout_.counter_offset[d] = offset;
    offset += uint64_t(layout_.counter_capacity[d]) * ssc::kCounterStrideBytes;
  }
  layout_.segment_bytes = RoundUp(offset, cpu::kSegmentAlign);
  const uint64_t bytes = layout_.segment_bytes * cfg.ep;
  if (posix_memalign(&memory_, cpu::kSegmentAlign, bytes) != 0) {
    memory_ = nullptr;
    return "cannot allocate the fuzz heap";
  }
  std::memset(memory_, 0, bytes);
  group_.base = static_cast<uint8_t*>(memory_);
  group_.segment_bytes = layout_.segment_bytes;
  group_.ep = cfg.ep;
  cpu::InitGroupHeap(memory_, cfg.ep, layout_.segment_bytes);
  Poison(true);
  return "";
}

void FencedGroupHeap::Poison(bool on) {
#ifdef HPMOE_ASAN
  for (uint32_t r = 0; r < cfg_.ep; ++r) {
    uint8_t* seg = group_.Segment(r);
    for (uint32_t s = 0; s < ssc::kSlotCount; ++s) {
      uint8_t* guard = seg + layout_.slot_offset[s] - guard_;
      if (on) ASAN_POISON_MEMORY_REGION(guard, guard_);
      else ASAN_UNPOISON_MEMORY_REGION(guard, guard_);
    }
    const uint64_t last = layout_.slot_offset[ssc::kSlotCount - 1] + layout_.slots[ssc::kSlotCount - 1].bytes;
    if (on) ASAN_POISON_MEMORY_REGION(seg + RoundUp(last, 64), guard_);
    else ASAN_UNPOISON_MEMORY_REGION(seg + RoundUp(last, 64), guard_);
  }
#else
  (void)on;
#endif
}

FencedGroupHeap::~FencedGroupHeap() {
  if (memory_ == nullptr) return;
  Poison(false);
  std::free(memory_);
}

void FencedGroupHeap::FillInputs(uint32_t seed) {
  const uint32_t ep = cfg_.ep, T = cfg_.tokens, k = cfg_.topk, E = cfg_.experts_per_rank, C = cfg_.recv_rows_per_src;
  for (uint32_t r = 0; r < ep; ++r) {
    uint8_t* seg = group_.Segment(r);
    // Activations and weights: small values whatever the dtype (bf16/fp16 bit patterns of ordinary numbers).
    for (uint32_t s : {ssc::kSlotX, ssc::kSlotW1, ssc::kSlotW2, ssc::kSlotDy}) {
      const cpu::SlotShape& sh = layout_.slots[s];
      uint8_t* p = seg + layout_.slot_offset[s];
      const uint64_t n = sh.rows * sh.cols;
      for (uint64_t i = 0; i < n; ++i) {
        const uint32_t h = Hash(seed ^ (r << 24) ^ uint32_t(i * 2654435761u) ^ s);
        if (sh.dtype == ssc::kFP32) {
          reinterpret_cast<float*>(p)[i] = float(int32_t(h % 2001) - 1000) / 1000.0f;
        } else {
          reinterpret_cast<uint16_t*>(p)[i] = uint16_t(sh.dtype == ssc::kBF16 ? 0x3c00 + (h & 0x1ff) : 0x3000 + (h & 0x7ff));
        }
      }
    }
    float* weights = reinterpret_cast<float*>(seg + layout_.slot_offset[ssc::kSlotTopkWeights]);
    int32_t* ids = reinterpret_cast<int32_t*>(seg + layout_.slot_offset[ssc::kSlotTopkIds]);
    int32_t* send_rows = reinterpret_cast<int32_t*>(seg + layout_.slot_offset[ssc::kSlotSendRows]);
    int32_t* send_counts = reinterpret_cast<int32_t*>(seg + layout_.slot_offset[ssc::kSlotSendCounts]);
    int32_t* token_rows = reinterpret_cast<int32_t*>(seg + layout_.slot_offset[ssc::kSlotTokenRows]);
    for (uint64_t i = 0; i < uint64_t(ep) * C; ++i) send_rows[i] = -1;
    // Routing: token t's j-th expert spread over the group; rows sorted by local expert inside each
    // destination slot; a row that does not fit the bucket C is dropped (token_rows -1: handlers refuse it).
    std::vector<uint32_t> fill(uint64_t(ep) * E, 0);
    for (uint32_t e = 0; e < E; ++e)
      for (uint32_t t = 0; t < T; ++t)
        for (uint32_t j = 0; j < k; ++j) {
          const uint32_t g = (Hash(seed + r * 977 + t) + j) % (ep * E);
          if (g % E != e) continue;
          const uint32_t d = g / E;
          uint32_t used = 0;
          for (uint32_t x = 0; x < E; ++x) used += fill[d * E + x];
          const uint64_t tk = uint64_t(t) * k + j;
          ids[tk] = int32_t(g);
          weights[tk] = 1.0f / float(k);
          if (used >= C) {
            token_rows[tk] = -1;
            continue;
          }
          send_rows[uint64_t(d) * C + used] = int32_t(tk);
          token_rows[tk] = int32_t(uint64_t(d) * C + used);
          ++fill[d * E + e];
        }
    for (uint64_t i = 0; i < uint64_t(ep) * E; ++i) send_counts[i] = int32_t(fill[i]);
  }
  // recv_counts[d][s] = send_counts[s][d], as the forward count puts leave them (backward reads them).
  for (uint32_t d = 0; d < ep; ++d)
    for (uint32_t s = 0; s < ep; ++s) {
      const int32_t* src = reinterpret_cast<int32_t*>(group_.Segment(s) + layout_.slot_offset[ssc::kSlotSendCounts]);
      int32_t* dst = reinterpret_cast<int32_t*>(group_.Segment(d) + layout_.slot_offset[ssc::kSlotRecvCounts]);
      for (uint32_t e = 0; e < E; ++e) dst[s * E + e] = src[d * E + e];
    }
}

}  // namespace fuzz
}  // namespace hpmoe
