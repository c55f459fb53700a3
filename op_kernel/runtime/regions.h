// Region predicates every backend's handlers check tasks with, so that the CPU twin, CUDA and AscendC accept
// exactly the same regions.
#pragma once

#include "../ssc_layout.h"
#include "device.h"

namespace hpmoe {
namespace rt {

// Whether two regions cover the same rows (their columns may differ).
HPMOE_DEVICE bool SameRows(const HPMOE_GM ssc::SscTensorRef& a, const HPMOE_GM ssc::SscTensorRef& b) {
  return a.row_offset == b.row_offset && a.rows == b.rows;
}

}  // namespace rt
}  // namespace hpmoe
