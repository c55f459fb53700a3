// Project-written AscendC stub: the kernel side of an MC2 op's HCCL group, as far as the hpmoe kernel uses it
// (the window of every rank; no Prepare/Commit collectives). Doc pages (asc-devkit, docs/zh/api/SIMD-API/
// 高阶API/HCCL通信类/HCCL-Kernel侧接口/...): GetHcclContext.md, Init.md, SetCcTiling.md, GetWindowsInAddr.md,
// GetRankId.md, GetRankDim.md. The stub launcher installs the context (the ranks' symmetric regions) per launch.
// Rules: Init takes the host's Mc2InitTiling and SetCcTiling its Mc2CcTiling (as every ops-transformer
// MoeDistribute* kernel does); the stub host's Mc2 tiling (kMc2TilingMark) must be there, windows need both.
#pragma once

#include <cstdint>
#include <cstring>

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
// What the stub host's Mc2CcTilingConfig::GetTiling writes at the start of both MC2 tiling blocks.
constexpr uint32_t kMc2TilingMark = 0x3243434Du;  // "MCC2"
inline bool HasMc2Mark(GM_ADDR p) {
  uint32_t v;
  std::memcpy(&v, Host(p), 4);
  return v == kMc2TilingMark;
}
}  // namespace stub

template <uint32_t Index>
inline GM_ADDR GetHcclContext() {
  static_assert(Index < 2, "two communication groups at most");
  return reinterpret_cast<GM_ADDR>(reinterpret_cast<uint64_t>(stub::Core().hccl_context));
}

class Hccl {
 public:
  void Init(GM_ADDR context, __gm__ void* init_tiling) {
    if (context == nullptr) stub::Fail("Hccl::Init: no HCCL context for this launch (MC2 group missing)");
    if (init_tiling == nullptr || !stub::HasMc2Mark(reinterpret_cast<GM_ADDR>(init_tiling)))
      stub::Fail("Hccl::Init: Mc2InitTiling missing or not filled on the host (Mc2CcTilingConfig::GetTiling)");
    ctx_ = reinterpret_cast<const stub::HcclContext*>(stub::Host(context));
  }
  int32_t SetCcTiling(__gm__ void* cc_tiling) {
    if (ctx_ == nullptr) stub::Fail("Hccl::SetCcTiling before Init");
    if (cc_tiling == nullptr || !stub::HasMc2Mark(reinterpret_cast<GM_ADDR>(cc_tiling)))
      stub::Fail("Hccl::SetCcTiling: Mc2CcTiling missing or not filled on the host");
    cc_set_ = true;
    return 0;
  }
  GM_ADDR GetWindowsInAddr(uint32_t rank_id) const {
    if (ctx_ == nullptr || !cc_set_) stub::Fail("Hccl windows used before Init(context, Mc2InitTiling) + SetCcTiling");
    if (rank_id >= ctx_->rank_dim) stub::Fail("Hccl::GetWindowsInAddr: rank outside the group");
    return reinterpret_cast<GM_ADDR>(ctx_->windows_in[rank_id]);
  }
  uint32_t GetRankId() const { return ctx_->rank_id; }
  uint32_t GetRankDim() const { return ctx_->rank_dim; }

 private:
  const stub::HcclContext* ctx_ = nullptr;
  bool cc_set_ = false;
};

}  // namespace AscendC
