#include "checks.h"

namespace hpmoe {
namespace ssc {
namespace validate {

std::string CheckConfigRecord(const SscConfig& c) {
  // ParseSsc already refused zero sizes, an unknown dtype and C not a multiple of tile_m.
  if (c.flags & ~uint32_t(kConfigRatr | kConfigInterleave | kConfigMixedQueues | kConfigRowPipelines |
                          kConfigClaimPool | kConfigWeightsTransposed | kConfigFusedSwiglu |
                          kConfigExpertAligned))
    return Format("config field flags: unknown bits 0x%x", c.flags);
  if ((c.flags & kConfigRowPipelines) && !(c.flags & kConfigMixedQueues))
    return "config field flags: row pipelines without mixed queues (their cube workers run vector tasks)";
  if ((c.flags & kConfigFusedSwiglu) && !(c.flags & kConfigMixedQueues))
    return "config field flags: fused SwiGLU without mixed queues (only the CPU twin and CUDA run it)";
  if ((c.flags & kConfigFusedSwiglu) && c.inter % kFusedSwigluGroup != 0)
    return Format("config field inter: %u, fused SwiGLU needs a multiple of %u", c.inter, kFusedSwigluGroup);
  if (c.reserved[0] != 0 || c.reserved[1] != 0) return "config field reserved: not zero";
  if (c.hidden % c.wgrad_tile != 0 || c.inter % c.wgrad_tile != 0)
    return Format("config field wgrad_tile: %u does not divide hidden=%u and inter=%u", c.wgrad_tile, c.hidden, c.inter);
  if (c.topk > uint64_t(c.ep) * c.experts_per_rank)
    return Format("config field topk: %u exceeds the %llu experts", c.topk,
                  (unsigned long long)(uint64_t(c.ep) * c.experts_per_rank));
  // Row indices and widths are 32-bit in the SSC: receive rows ep*C, 2I columns, weight rows E*h, T*k.
  const uint64_t limit = 1ull << 31;
  if (uint64_t(c.ep) * c.recv_rows_per_src >= limit) return Format("config field recv_rows_per_src: ep*C >= 2^31");
  if (2ull * c.inter >= limit) return Format("config field inter: %u, 2I >= 2^31", c.inter);
  if (uint64_t(c.experts_per_rank) * c.hidden >= limit || uint64_t(c.experts_per_rank) * c.inter >= limit)
    return Format("config field experts_per_rank: %u, weight rows >= 2^31", c.experts_per_rank);
  if (uint64_t(c.tokens) * c.topk >= limit) return Format("config field topk: %u, tokens*topk >= 2^31", c.topk);
  return "";
}

}  // namespace validate
}  // namespace ssc
}  // namespace hpmoe
