// Project-written stand-in for CANN's MC2 host tiling API (no CANN here): Mc2CcTilingConfig fills the
// Mc2InitTiling / Mc2CcTiling blocks an MC2 kernel passes to Hccl::Init and SetCcTiling (as ops-transformer's
// MoeDistribute* tiling functions do). The stub writes AscendC::stub's mark, which the kernel-side Hccl stub
// requires. The header path on CANN may differ; a CANN build is the check.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

enum HcclCMDType : uint32_t { HCCL_CMD_BATCH_WRITE = 18 };  // the op writes peers' windows itself

class Mc2CcTilingConfig {
 public:
  Mc2CcTilingConfig(const std::string& group, uint32_t op_type, const std::string& alg_config)
      : group_(group), op_type_(op_type), alg_(alg_config) {}
  template <class Block>
  uint32_t GetTiling(Block& block) const {
    static_assert(sizeof(Block) >= 8, "an MC2 tiling block");
    const uint32_t mark = 0x3243434Du;  // AscendC::stub::kMc2TilingMark ("MCC2")
    std::memset(&block, 0, sizeof(block));
    std::memcpy(&block, &mark, 4);
    std::memcpy(reinterpret_cast<uint8_t*>(&block) + 4, &op_type_, 4);
    return group_.empty() ? 1u : 0u;
  }

 private:
  std::string group_;
  uint32_t op_type_;
  std::string alg_;
};
