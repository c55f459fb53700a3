// The routing plan phase (docs/design.md, "The routing plan phase"): from one source rank's topk_ids
// [T, k] (global expert ids; expert g lives on rank g / E), the rows it sends each destination.
//   send_counts[d][e]  rows for local expert e of destination d
//   send_rows[d][i]    the t*k + j carried by row i of this rank's slot on d, -1 for a pad; rows are
//                      sorted by local expert on d, then by t*k + j (a stable counting sort); local expert e's
//                      first row is the sum over e' < e of send_counts[d][e'] rounded up to `align` (1, or
//                      tile_m under kConfigExpertAligned: pads between experts, then pads to C)
//   token_rows[t][j]   row of (t, j) in this rank's return buffers: d*C + i
// A plan of a token range [token_begin, token_end) (a pass of the speculative bucket, docs/design.md) routes
// only those tokens: the others' entries get no row and token_rows -1.
// Every backend builds the same plan: this serial form is the CPU twin's (and the reference the CUDA
// backend's parallel kernels, op_kernel/cuda/routing_plan.cuh, must equal bit for bit). Device-compilable.
#pragma once

#include <stdint.h>

#include "device.h"

namespace hpmoe {
namespace rt {

// What the plan phase found. need: the most rows this rank sends one destination, pads between experts
// included (the bucket it needs);
// bad_id: the first t*k + j whose id is outside [0, ep*E), or -1.
struct PlanResult {
  uint32_t need;
  int64_t bad_id;
};

struct PlanShape {
  uint32_t tokens, topk, ep, experts_per_rank, rows_per_src;  // T, k, ep, E, C
  uint32_t align = 1;  // an expert's first row in its slot is a multiple of this: 1, or tile_m (kConfigExpertAligned)
  uint32_t token_begin = 0, token_end = ~0u;  // the tokens routed (end clipped to T)
};

HPMOE_DEVICE uint32_t AlignRows(uint32_t n, uint32_t align) { return (n + align - 1) / align * align; }

// The tokens [begin, end) of a reduction task over tokens [first, first + rows) that a launch reducing only
// [token_begin, token_end) writes (a pass of the speculative bucket routed only those; every backend's
// reductions clip alike). Empty (begin == end) when they do not meet.
struct TokenSpan {
  uint64_t begin, end;
};
HPMOE_DEVICE TokenSpan RoutedTokens(uint64_t first, uint64_t rows, uint64_t token_begin, uint64_t token_end) {
  const uint64_t b = first > token_begin ? first : token_begin;
  const uint64_t e = first + rows < token_end ? first + rows : token_end;
  return {b, e > b ? e : b};
}

// The rows a dispatch put carries from its chunk of send_rows (`cols` entries, read(i)): up to its last valid
// entry. Every entry must be -1 (a pad) or a t*k + j below `limit`, and a valid entry may follow a pad only
// where pads sit between experts (`pads_between`, kConfigExpertAligned); else -1 (the put's kErrPlan). The
// same check in every backend, before any row moves.
template <class Read>
HPMOE_DEVICE int64_t PlanChunkRows(Read&& read, uint64_t cols, uint64_t limit, bool pads_between) {
  uint64_t n = 0;
  bool after_pad = false;
  for (uint64_t i = 0; i < cols; ++i) {
    const int32_t v = read(i);
    if (v == -1) {
      after_pad = true;
      continue;
    }
    if (v < 0 || uint64_t(v) >= limit || (after_pad && !pads_between)) return -1;
    n = i + 1;
  }
  return int64_t(n);
}

// scratch: ep*E uint32. When need > C the plan is incomplete (rows past C are not written, their token_rows
// are -1) and must not be used: the caller refuses the routing or grows the bucket.
HPMOE_DEVICE PlanResult BuildRoutingPlan(const PlanShape& s, const int32_t* ids, int32_t* send_counts,
                                         int32_t* send_rows, int32_t* token_rows, uint32_t* scratch) {
  const uint64_t n = uint64_t(s.tokens) * s.topk;
  const uint64_t first = uint64_t(s.token_begin) * s.topk;
  const uint64_t last = uint64_t(s.token_end < s.tokens ? s.token_end : s.tokens) * s.topk;
  const uint32_t experts = s.ep * s.experts_per_rank;
  PlanResult res{0, -1};
  for (uint32_t g = 0; g < experts; ++g) scratch[g] = 0;
  for (uint64_t i = first; i < last; ++i) {
    const int32_t g = ids[i];
    if (g < 0 || uint32_t(g) >= experts) {
      res.bad_id = int64_t(i);
      return res;
    }
    ++scratch[g];
  }
  // scratch[g] becomes the first row of expert g inside its destination's slot.
  for (uint32_t d = 0; d < s.ep; ++d) {
    uint32_t row = 0;
    for (uint32_t e = 0; e < s.experts_per_rank; ++e) {
      const uint32_t g = d * s.experts_per_rank + e;
      send_counts[g] = int32_t(scratch[g]);
      scratch[g] = row;
      const uint32_t span = AlignRows(uint32_t(send_counts[g]), s.align);
      for (uint32_t i = row + uint32_t(send_counts[g]); i < row + span && i < s.rows_per_src; ++i)
        send_rows[uint64_t(d) * s.rows_per_src + i] = -1;  // pads between experts
      row += span;
    }
    if (row > res.need) res.need = row;
    for (uint32_t i = row; i < s.rows_per_src; ++i) send_rows[uint64_t(d) * s.rows_per_src + i] = -1;
  }
  for (uint64_t i = 0; i < n; ++i) {  // ascending t*k + j: stable within each expert
    if (i < first || i >= last) {
      token_rows[i] = -1;  // not routed by this plan
      continue;
    }
    const uint32_t g = uint32_t(ids[i]), d = g / s.experts_per_rank;
    const uint32_t pos = scratch[g]++;
    if (pos >= s.rows_per_src) {
      token_rows[i] = -1;
      continue;
    }
    send_rows[uint64_t(d) * s.rows_per_src + pos] = int32_t(i);
    token_rows[i] = int32_t(uint64_t(d) * s.rows_per_src + pos);
  }
  return res;
}

}  // namespace rt
}  // namespace hpmoe
