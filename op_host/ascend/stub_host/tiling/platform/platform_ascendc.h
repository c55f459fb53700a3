// Project-written stand-in for CANN's platform_ascendc.h (no CANN here). Doc page (asc-devkit,
// docs/zh/api/...): PlatformAscendC.md (GetCoreNumAic, GetCoreNumAiv).
#pragma once

#include <cstdint>

#include "../../register/op_def_registry.h"

namespace platform_ascendc {

class PlatformAscendC {
 public:
  explicit PlatformAscendC(const fe::PlatFormInfos* info) : info_(info) {}
  uint32_t GetCoreNumAic() const { return info_->core_num_aic; }
  uint32_t GetCoreNumAiv() const { return info_->core_num_aiv; }

 private:
  const fe::PlatFormInfos* info_;
};

}  // namespace platform_ascendc
