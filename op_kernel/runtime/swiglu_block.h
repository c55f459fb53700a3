// The regions of a SWIGLU or SWIGLU_GRAD task as one column block of A: rows [row0, row0 + rows) x columns
// [c0, c0 + cols) of A (dA), H's gate at column c0 and up at inter + c0 (dH's alike). Two forms reach a
// handler (task_access.h has a row for each):
//   whole width   SWIGLU      (H [0, 2I), counts) -> A [0, I)
//                 SWIGLU_GRAD (dA [0, I), H [0, 2I), counts) -> dH [0, 2I)
//   column block  SWIGLU      (H [c0, +m), H [I + c0, +m), counts) -> A [c0, +m)
//                 SWIGLU_GRAD (dA [c0, +m), H [c0, +m), H [I + c0, +m), counts) -> (dH [c0, +m), dH [I + c0, +m))
// (scheduler/hpmoe/act_split.py). Shared by the CPU twin's and the CUDA handlers so both accept exactly the
// same regions; the slots themselves were checked against task_access.h when the file was loaded.
#pragma once

#include "../ssc_layout.h"
#include "device.h"
#include "regions.h"

namespace hpmoe {
namespace rt {

struct SwigluBlock {
  uint64_t row0, rows;  // receive rows of the tile (every region has these rows)
  uint64_t c0, cols;    // columns of A; gate columns c0.., up columns inter + c0.. of H (and dH)
};

// The block a region names: its rows and columns.
HPMOE_DEVICE SwigluBlock BlockOf(const HPMOE_GM ssc::SscTensorRef& r) {
  return {r.row_offset, r.rows, r.col_offset, r.cols};
}

// Whether `gate` and `up` are the two halves of the block [c0, +cols) of an H-wide ([*, 2I]) slot, or one
// whole-width region (`up` unused) when the block is all of I.
HPMOE_DEVICE bool HalvesOf(const HPMOE_GM ssc::SscTensorRef& gate, const HPMOE_GM ssc::SscTensorRef* up,
                           uint64_t inter, uint64_t c0, uint64_t cols) {
  if (up == nullptr) return gate.col_offset == 0 && gate.cols == 2 * inter && c0 == 0 && cols == inter;
  return gate.slot == up->slot && SameRows(gate, *up) && gate.col_offset == c0 && gate.cols == cols &&
         up->col_offset == inter + c0 && up->cols == cols;
}

// Whether a block's 8-element vectors can be counted in 31 bits, as the CUDA handlers' element loops do
// (FastDivmod's range): a row tile is far below; a region of 2^31 vectors (32 GiB of bf16) is refused, not
// wrapped.
HPMOE_DEVICE bool VectorsFit31(const SwigluBlock& b) { return b.rows * ((b.cols + 7) / 8) < (uint64_t(1) << 31); }

// SWIGLU: false when the regions form neither shape (the handler returns kErrRegion).
HPMOE_DEVICE bool SwigluBlockOf(const HPMOE_GM ssc::SscTask& t, uint64_t inter, SwigluBlock* b) {
  const HPMOE_GM ssc::SscTensorRef& h = t.inputs[0];
  const HPMOE_GM ssc::SscTensorRef& out = t.outputs[0];
  const bool split = t.inputs[1].slot == ssc::kSlotH;
  *b = BlockOf(out);
  return h.slot == ssc::kSlotH && out.slot == ssc::kSlotA && t.outputs[1].slot == ssc::kNoSlot && b->cols > 0 &&
         b->c0 + b->cols <= inter && VectorsFit31(*b) && SameRows(h, out) &&
         HalvesOf(h, split ? &t.inputs[1] : nullptr, inter, b->c0, b->cols);
}

// SWIGLU_GRAD: dA's columns name the block.
HPMOE_DEVICE bool SwigluGradBlockOf(const HPMOE_GM ssc::SscTask& t, uint64_t inter, SwigluBlock* b) {
  const HPMOE_GM ssc::SscTensorRef& da = t.inputs[0];
  const HPMOE_GM ssc::SscTensorRef& h = t.inputs[1];
  const HPMOE_GM ssc::SscTensorRef& dh = t.outputs[0];
  const bool split = t.inputs[2].slot == ssc::kSlotH;
  *b = BlockOf(da);
  if (da.slot != ssc::kSlotDA || h.slot != ssc::kSlotH || dh.slot != ssc::kSlotDH || b->cols == 0 ||
      b->c0 + b->cols > inter || !VectorsFit31(*b) || !SameRows(da, h) || !SameRows(da, dh))
    return false;
  if (!split) return t.outputs[1].slot == ssc::kNoSlot && HalvesOf(h, nullptr, inter, b->c0, b->cols) &&
                     HalvesOf(dh, nullptr, inter, b->c0, b->cols);
  return HalvesOf(h, &t.inputs[2], inter, b->c0, b->cols) && HalvesOf(dh, &t.outputs[1], inter, b->c0, b->cols);
}

// kConfigFusedSwiglu: H's column of A's column c, gate (up = false) or up, in groups of kFusedSwigluGroup.
HPMOE_DEVICE constexpr uint64_t FusedHCol(uint64_t c, bool up) {
  return (c / ssc::kFusedSwigluGroup) * 2 * ssc::kFusedSwigluGroup + (up ? ssc::kFusedSwigluGroup : 0) +
         c % ssc::kFusedSwigluGroup;
}

// Whether H's region is the interleaved image of A's block [c0, +cols), whole groups, rows of `rows_of`.
HPMOE_DEVICE bool InterleavedOf(const HPMOE_GM ssc::SscTensorRef& h, const HPMOE_GM ssc::SscTensorRef& rows_of,
                                uint64_t inter, uint64_t c0, uint64_t cols) {
  return h.slot == ssc::kSlotH && SameRows(h, rows_of) && cols > 0 && c0 + cols <= inter &&
         c0 % ssc::kFusedSwigluGroup == 0 && cols % ssc::kFusedSwigluGroup == 0 && h.col_offset == 2 * c0 &&
         h.cols == 2 * cols;
}

// GMM_SWIGLU: (recv_x rows, W1, counts) -> (H interleaved [2 c0, +2 m), A [c0, +m)); A's region names the block.
HPMOE_DEVICE bool GmmSwigluBlockOf(const HPMOE_GM ssc::SscTask& t, uint64_t inter, SwigluBlock* b) {
  const HPMOE_GM ssc::SscTensorRef& x = t.inputs[0];
  const HPMOE_GM ssc::SscTensorRef& a = t.outputs[1];
  *b = BlockOf(a);
  return x.slot == ssc::kSlotRecvX && t.inputs[1].slot == ssc::kSlotW1 && a.slot == ssc::kSlotA &&
         SameRows(x, a) && InterleavedOf(t.outputs[0], a, inter, b->c0, b->cols);
}

// GMM_SWIGLU_GRAD: (recv_dy rows, W2, H interleaved [2 c0, +2 m), counts) -> (dH [c0, +m), dH [I + c0, +m)).
HPMOE_DEVICE bool GmmSwigluGradBlockOf(const HPMOE_GM ssc::SscTask& t, uint64_t inter, SwigluBlock* b) {
  const HPMOE_GM ssc::SscTensorRef& dy = t.inputs[0];
  const HPMOE_GM ssc::SscTensorRef& gate = t.outputs[0];
  *b = BlockOf(gate);
  return dy.slot == ssc::kSlotRecvDy && t.inputs[1].slot == ssc::kSlotW2 && gate.slot == ssc::kSlotDH &&
         SameRows(dy, gate) && InterleavedOf(t.inputs[2], gate, inter, b->c0, b->cols) &&
         HalvesOf(gate, &t.outputs[1], inter, b->c0, b->cols);
}

}  // namespace rt
}  // namespace hpmoe
