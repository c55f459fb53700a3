// The shape, dtype and placement every tensor slot has for a given config: the contract between the compiler
// (scheduler/hpmoe/graphs.py:tensor_specs writes these into the SSC's tensor table), the load-time validator
// (which refuses a tensor record that differs) and each backend's memory layout (op_kernel/cpu/heap_layout.cpp).
// Device-compilable.
#pragma once

#include "../ssc_layout.h"
#include "device.h"

namespace hpmoe {
namespace rt {

struct SlotSpec {
  uint32_t ndim;
  uint32_t dims[ssc::kMaxTensorDims];
  uint32_t dtype;      // ssc::DType
  bool symmetric;      // lives in the symmetric heap: peers put into it
};

HPMOE_DEVICE SlotSpec MakeSlotSpec(uint32_t dtype, bool symmetric, uint32_t d0, uint32_t d1, uint32_t d2 = 0) {
  SlotSpec s{d2 ? 3u : 2u, {d0, d1, d2, 0}, dtype, symmetric};
  return s;
}

// Spec of `slot` for config `c` (slot < kSlotCount). Receive buffers have ep * C rows (docs/design.md).
HPMOE_DEVICE SlotSpec ExpectedSlotSpec(const ssc::SscConfig& c, uint32_t slot) {
  using namespace ssc;
  const uint32_t T = c.tokens, h = c.hidden, I2 = 2 * c.inter, I = c.inter, E = c.experts_per_rank, k = c.topk;
  const uint32_t ep = c.ep, C = c.recv_rows_per_src, R = c.ep * c.recv_rows_per_src, act = c.dtype;
  // nn.Linear's layout (kConfigWeightsTransposed): each expert's matrix [out features, in features].
  const bool wt = (c.flags & kConfigWeightsTransposed) != 0;
  const uint32_t w1_rows = wt ? I2 : h, w1_cols = wt ? h : I2, w2_rows = wt ? h : I, w2_cols = wt ? I : h;
  switch (slot) {
    case kSlotX: return MakeSlotSpec(act, false, T, h);
    case kSlotTopkIds: return MakeSlotSpec(kINT32, false, T, k);
    case kSlotTopkWeights: return MakeSlotSpec(kFP32, false, T, k);
    case kSlotW1: return MakeSlotSpec(act, false, E, w1_rows, w1_cols);
    case kSlotW2: return MakeSlotSpec(act, false, E, w2_rows, w2_cols);
    case kSlotSendRows: return MakeSlotSpec(kINT32, false, ep, C);
    case kSlotSendCounts: return MakeSlotSpec(kINT32, false, ep, E);
    case kSlotRecvCounts: return MakeSlotSpec(kINT32, true, ep, E);
    case kSlotPeerReady: return MakeSlotSpec(kINT32, true, 1, ep);
    case kSlotRecvX: return MakeSlotSpec(act, true, R, h);
    case kSlotH: return MakeSlotSpec(act, false, R, I2);
    case kSlotA: return MakeSlotSpec(act, false, R, I);
    case kSlotYExpert: return MakeSlotSpec(act, false, R, h);
    case kSlotRetY: return MakeSlotSpec(act, true, R, h);
    case kSlotY: return MakeSlotSpec(act, false, T, h);
    case kSlotDy: return MakeSlotSpec(act, false, T, h);
    case kSlotRecvDy: return MakeSlotSpec(act, true, R, h);
    case kSlotDA: return MakeSlotSpec(act, false, R, I);
    case kSlotDH: return MakeSlotSpec(act, false, R, I2);
    case kSlotDxExpert: return MakeSlotSpec(act, false, R, h);
    case kSlotRetDx: return MakeSlotSpec(act, true, R, h);
    case kSlotDx: return MakeSlotSpec(act, false, T, h);
    case kSlotDW1: return MakeSlotSpec(kFP32, false, E, w1_rows, w1_cols);
    case kSlotDW2: return MakeSlotSpec(kFP32, false, E, w2_rows, w2_cols);
    case kSlotDTopkWeights: return MakeSlotSpec(kFP32, false, T, k);
    default: return MakeSlotSpec(kINT32, false, T, k);  // kSlotTokenRows
  }
}

HPMOE_DEVICE uint64_t DTypeSize(uint32_t dtype) { return dtype == ssc::kFP16 || dtype == ssc::kBF16 ? 2 : 4; }

}  // namespace rt
}  // namespace hpmoe
