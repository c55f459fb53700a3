// Project-written stand-in for CANN's platform_ascendc.h (no CANN here). Doc page (asc-devkit,
// docs/zh/api/...): PlatformAscendC.md (GetCoreNumAic, GetCoreNumAiv, GetLibApiWorkSpaceSize: the system
// workspace, 16 MiB on A2/A3, that precedes the op's own part of workspace[0]).
#pragma once

#include <cstdint>

#include "../../register/op_def_registry.h"

namespace platform_ascendc {

class PlatformAscendC {
 public:
  explicit PlatformAscendC(const fe::PlatFormInfos* info) : info_(info) {}
  uint32_t GetCoreNumAic() const { return info_->core_num_aic; }
  uint32_t GetCoreNumAiv() const { return info_->core_num_aiv; }
  uint32_t GetLibApiWorkSpaceSize() const { return 16u * 1024 * 1024; }

 private:
  const fe::PlatFormInfos* info_;
};

}  // namespace platform_ascendc
