// Project-written AscendC stub: the kernel side of an MC2 op's HCCL group, as far as the hpmoe kernel uses it
// (the window of every rank; no Prepare/Commit collectives). Doc pages (asc-devkit, docs/zh/api/SIMD-API/
// 高阶API/HCCL通信类/HCCL-Kernel侧接口/...): GetHcclContext.md, Init.md, GetWindowsInAddr.md, GetRankId.md,
// GetRankDim.md. The stub launcher installs the context (the ranks' symmetric regions) per launch.
#pragma once

#include <cstdint>

#include "../../stub_core.h"

namespace AscendC {

constexpr uint32_t HCCL_GROUP_ID_0 = 0;

namespace stub {
// The stub's HcclCombineOpParam: what the kernel can learn about its communication group.
struct HcclContext {
  uint32_t rank_id = 0;
  uint32_t rank_dim = 0;
  uint64_t windows_in[64] = {};
};
}  // namespace stub

template <uint32_t Index>
inline GM_ADDR GetHcclContext() {
  static_assert(Index < 2, "two communication groups at most");
  return reinterpret_cast<GM_ADDR>(stub::Core().hccl_context);
}

class Hccl {
 public:
  void Init(GM_ADDR context) { ctx_ = reinterpret_cast<const stub::HcclContext*>(context); }
  GM_ADDR GetWindowsInAddr(uint32_t rank_id) const {
    if (ctx_ == nullptr) stub::Fail("Hccl used before Init (no HCCL context for this launch)");
    return reinterpret_cast<GM_ADDR>(ctx_->windows_in[rank_id]);
  }
  uint32_t GetRankId() const { return ctx_->rank_id; }
  uint32_t GetRankDim() const { return ctx_->rank_dim; }

 private:
  const stub::HcclContext* ctx_ = nullptr;
};

}  // namespace AscendC
