#include "../../op_kernel/runtime/slot_shapes.h"
#include "checks.h"

namespace hpmoe {
namespace ssc {
namespace validate {

std::string CheckTensorTable(const SscView& v) {
  uint32_t seen = 0;  // slot bitmask
  for (uint32_t i = 0; i < v.num_tensors; ++i) {
    const SscTensor& t = v.tensors[i];
    if (t.slot >= kSlotCount) return Format("tensor %u field slot: %u (unknown)", i, t.slot);
    const char* name = SlotName(t.slot);
    if (seen & (1u << t.slot)) return Format("tensor %u field slot: %u (%s) appears twice", i, t.slot, name);
    seen |= 1u << t.slot;
    const rt::SlotSpec want = rt::ExpectedSlotSpec(v.config(), t.slot);
    if (t.ndim != want.ndim) return Format("tensor %u (%s) field ndim: %u, the config implies %u", i, name, t.ndim, want.ndim);
    uint64_t elems = 1;
    for (uint32_t d = 0; d < kMaxTensorDims; ++d) {
      const uint32_t expect = d < want.ndim ? want.dims[d] : 0;
      if (t.dims[d] != expect)
        return Format("tensor %u (%s) field dims[%u]: %u, the config implies %u", i, name, d, t.dims[d], expect);
      if (d < want.ndim) elems *= t.dims[d];
    }
    if (t.dtype != want.dtype) return Format("tensor %u (%s) field dtype: %u, the config implies %u", i, name, t.dtype, want.dtype);
    if (t.bytes != elems * rt::DTypeSize(want.dtype))
      return Format("tensor %u (%s) field bytes: %llu, shape and dtype give %llu", i, name, (unsigned long long)t.bytes,
                    (unsigned long long)(elems * rt::DTypeSize(want.dtype)));
    if (t.role > kRoleOutput) return Format("tensor %u (%s) field role: %u (unknown)", i, name, t.role);
    const uint32_t flags = want.symmetric ? uint32_t(kTensorSymmetric) : 0u;
    if (t.flags != flags) return Format("tensor %u (%s) field flags: %u, expected %u", i, name, t.flags, flags);
  }
  return "";
}

}  // namespace validate
}  // namespace ssc
}  // namespace hpmoe
