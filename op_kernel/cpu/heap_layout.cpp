#include "heap_layout.h"

#include <cstdio>

#include "../runtime/slot_shapes.h"

namespace hpmoe {
namespace cpu {
namespace {

uint64_t RoundUp(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

uint64_t ElemBytes(uint32_t dtype) { return dtype == ssc::kFP16 || dtype == ssc::kBF16 ? 2 : 4; }

void SetShape(SlotShape* s, uint32_t dtype, uint32_t d0, uint32_t d1, uint32_t d2 = 0) {
  s->ndim = d2 ? 3 : 2;
  s->dims[0] = d0;
  s->dims[1] = d1;
  s->dims[2] = d2;
  s->dims[3] = 0;
  s->dtype = dtype;
  s->rows = d2 ? uint64_t(d0) * d1 : d0;
  s->cols = d2 ? d2 : d1;
  s->bytes = s->rows * s->cols * ElemBytes(dtype);
}

}  // namespace

std::string ComputeHeapLayout(const ssc::SscConfig& c, uint32_t counters_fwd, uint32_t counters_bwd,
                              HeapLayout* layout, uint32_t external_mask) {
  using namespace ssc;
  if (c.ep == 0 || c.tokens == 0 || c.hidden == 0 || c.inter == 0 || c.experts_per_rank == 0 || c.topk == 0 ||
      c.recv_rows_per_src == 0 || c.dtype > kBF16)
    return "config has a zero size or an unknown dtype";
  if (uint64_t(c.ep) * c.recv_rows_per_src >= (1ull << 31)) return "receive buffers exceed 2^31 rows";
  SlotShape* s = layout->slots;
  for (uint32_t i = 0; i < kSlotCount; ++i) {  // one shape table for every backend (runtime/slot_shapes.h)
    const rt::SlotSpec spec = rt::ExpectedSlotSpec(c, i);
    SetShape(&s[i], spec.dtype, spec.dims[0], spec.dims[1], spec.dims[2]);
  }
  uint64_t offset = kControlBytes;
  for (uint32_t i = 0; i < kSlotCount; ++i) {
    layout->slot_offset[i] = offset;
    if ((external_mask >> i) & 1u) continue;  // bound per launch: no bytes in the segment
    offset = RoundUp(offset + s[i].bytes, 64);
  }
  const uint32_t caps[2] = {counters_fwd, counters_bwd};
  for (uint32_t d = 0; d < 2; ++d) {
    layout->counter_offset[d] = offset;
    layout->counter_capacity[d] = caps[d];
    offset += uint64_t(caps[d]) * kCounterStrideBytes;
  }
  layout->segment_bytes = RoundUp(offset, kSegmentAlign);
  return "";
}

}  // namespace cpu
}  // namespace hpmoe
