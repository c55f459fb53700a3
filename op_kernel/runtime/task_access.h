// Which tensor slots each task type's handler may read and write: the one definition the scheduler's writer
// (scheduler/hpmoe/task_access.py mirrors it; tests/test_task_access.py compares the two through
// hpmoe_ssc_layout_probe) and the load-time validator (op_host/validate/) both follow. A handler trusts the
// slot of each region it is given (e.g. COMBINE_REDUCE indexes its input 0 with token_rows, which is only safe
// on ret_y's ep*C rows), so a file naming any other slot there must be refused before it runs.
//
// A task type has one or more variants (GMM is GMM1 or GMM2). A task matches a variant when every input and
// output position holds a slot in that position's mask, and a zero mask means the position must be unused.
// Device-compilable: plain constexpr data, no library.
#pragma once

#include "../ssc_layout.h"
#include "device.h"

namespace hpmoe {
namespace rt {

constexpr uint32_t SlotBit(uint32_t slot) { return 1u << slot; }
static_assert(ssc::kSlotCount <= 32, "slot masks are 32 bits");

enum AccessFlags : uint32_t {
  kAccessFwd = 1u << 0,           // may appear in a forward SSC
  kAccessBwd = 1u << 1,           // may appear in a backward SSC
  kAccessRemoteOutput = 1u << 2,  // a put: output 0 may live on another rank (put_mem_signal)
  kAccessWeightsStd = 1u << 3,    // only in a file without kConfigWeightsTransposed
  kAccessWeightsT = 1u << 4,      // only in a file with kConfigWeightsTransposed
  kAccessUnfused = 1u << 5,       // only in a file without kConfigFusedSwiglu (H in gate | up order)
  kAccessFused = 1u << 6,         // only in a file with kConfigFusedSwiglu (H interleaved, ssc_layout.h)
};

// Activation-dtype slots: the plain elementwise ADD may touch any of them (it checks its own shapes).
constexpr uint32_t kActivationSlots =
    SlotBit(ssc::kSlotX) | SlotBit(ssc::kSlotRecvX) | SlotBit(ssc::kSlotH) | SlotBit(ssc::kSlotA) |
    SlotBit(ssc::kSlotYExpert) | SlotBit(ssc::kSlotRetY) | SlotBit(ssc::kSlotY) | SlotBit(ssc::kSlotDy) |
    SlotBit(ssc::kSlotRecvDy) | SlotBit(ssc::kSlotDA) | SlotBit(ssc::kSlotDH) | SlotBit(ssc::kSlotDxExpert) |
    SlotBit(ssc::kSlotRetDx) | SlotBit(ssc::kSlotDx);

struct TaskAccess {
  uint32_t task_type;
  uint32_t flags;                       // AccessFlags
  uint32_t inputs[ssc::kMaxInputs];     // allowed slots per input position (0: unused)
  uint32_t outputs[ssc::kMaxOutputs];   // allowed slots per output position (0: unused)
};

#define HPMOE_B(s) SlotBit(ssc::kSlot##s)
constexpr TaskAccess kTaskAccess[] = {
    {ssc::kTaskEntrySignal, kAccessFwd | kAccessBwd | kAccessRemoteOutput, {0, 0, 0, 0}, {HPMOE_B(PeerReady), 0}},
    {ssc::kTaskCountPut, kAccessFwd | kAccessRemoteOutput, {HPMOE_B(SendCounts), HPMOE_B(PeerReady), 0, 0},
     {HPMOE_B(RecvCounts), 0}},
    {ssc::kTaskDispatchPut, kAccessFwd | kAccessRemoteOutput,
     {HPMOE_B(X), HPMOE_B(SendRows), HPMOE_B(PeerReady), 0}, {HPMOE_B(RecvX), 0}},
    {ssc::kTaskGmm, kAccessFwd | kAccessUnfused, {HPMOE_B(RecvX), HPMOE_B(W1), HPMOE_B(RecvCounts), 0}, {HPMOE_B(H), 0}},
    {ssc::kTaskGmm, kAccessFwd, {HPMOE_B(A), HPMOE_B(W2), HPMOE_B(RecvCounts), 0}, {HPMOE_B(YExpert), 0}},
    {ssc::kTaskSwiglu, kAccessFwd | kAccessUnfused, {HPMOE_B(H), HPMOE_B(RecvCounts), 0, 0}, {HPMOE_B(A), 0}},
    // A column block (swiglu_block.h): H's gate and up columns of the block as two regions.
    {ssc::kTaskSwiglu, kAccessFwd | kAccessUnfused, {HPMOE_B(H), HPMOE_B(H), HPMOE_B(RecvCounts), 0}, {HPMOE_B(A), 0}},
    {ssc::kTaskCombinePut, kAccessFwd | kAccessRemoteOutput, {HPMOE_B(YExpert), HPMOE_B(RecvCounts), 0, 0},
     {HPMOE_B(RetY), 0}},
    {ssc::kTaskCombinePut, kAccessBwd | kAccessRemoteOutput, {HPMOE_B(DxExpert), HPMOE_B(RecvCounts), 0, 0},
     {HPMOE_B(RetDx), 0}},
    {ssc::kTaskCombineReduce, kAccessFwd, {HPMOE_B(RetY), HPMOE_B(TopkWeights), HPMOE_B(TokenRows), 0},
     {HPMOE_B(Y), 0}},
    {ssc::kTaskBwdDispatchPut, kAccessBwd | kAccessRemoteOutput,
     {HPMOE_B(Dy), HPMOE_B(TopkWeights), HPMOE_B(SendRows), HPMOE_B(PeerReady)}, {HPMOE_B(RecvDy), 0}},
    {ssc::kTaskGmmTransB, kAccessBwd | kAccessUnfused, {HPMOE_B(RecvDy), HPMOE_B(W2), HPMOE_B(RecvCounts), 0},
     {HPMOE_B(DA), 0}},
    {ssc::kTaskGmmTransB, kAccessBwd, {HPMOE_B(DH), HPMOE_B(W1), HPMOE_B(RecvCounts), 0}, {HPMOE_B(DxExpert), 0}},
    // dW[e][block] = in0[:, block]^T in1: dW2 = A^T dY, dW1 = X^T dH; transposed, dW2t = dY^T A, dW1t = dH^T X.
    {ssc::kTaskGmmWeightGrad, kAccessBwd | kAccessWeightsStd, {HPMOE_B(A), HPMOE_B(RecvDy), HPMOE_B(RecvCounts), 0},
     {HPMOE_B(DW2), 0}},
    {ssc::kTaskGmmWeightGrad, kAccessBwd | kAccessWeightsStd | kAccessUnfused,
     {HPMOE_B(RecvX), HPMOE_B(DH), HPMOE_B(RecvCounts), 0}, {HPMOE_B(DW1), 0}},
    {ssc::kTaskGmmWeightGrad, kAccessBwd | kAccessWeightsT, {HPMOE_B(RecvDy), HPMOE_B(A), HPMOE_B(RecvCounts), 0},
     {HPMOE_B(DW2), 0}},
    {ssc::kTaskGmmWeightGrad, kAccessBwd | kAccessWeightsT | kAccessUnfused,
     {HPMOE_B(DH), HPMOE_B(RecvX), HPMOE_B(RecvCounts), 0}, {HPMOE_B(DW1), 0}},
    // Fused: input 3 is the whole of dH, read by no handler: the unit waits on every dH producer, so a fused
    // gradient task triggers two events (its row tile's gate gradient, this one), not one per dW1 column block.
    {ssc::kTaskGmmWeightGrad, kAccessBwd | kAccessWeightsStd | kAccessFused,
     {HPMOE_B(RecvX), HPMOE_B(DH), HPMOE_B(RecvCounts), HPMOE_B(DH)}, {HPMOE_B(DW1), 0}},
    {ssc::kTaskGmmWeightGrad, kAccessBwd | kAccessWeightsT | kAccessFused,
     {HPMOE_B(DH), HPMOE_B(RecvX), HPMOE_B(RecvCounts), HPMOE_B(DH)}, {HPMOE_B(DW1), 0}},
    {ssc::kTaskSwigluGrad, kAccessBwd | kAccessUnfused, {HPMOE_B(DA), HPMOE_B(H), HPMOE_B(RecvCounts), 0},
     {HPMOE_B(DH), 0}},
    {ssc::kTaskSwigluGrad, kAccessBwd | kAccessUnfused, {HPMOE_B(DA), HPMOE_B(H), HPMOE_B(H), HPMOE_B(RecvCounts)},
     {HPMOE_B(DH), HPMOE_B(DH)}},
    {ssc::kTaskBwdCombineReduce, kAccessBwd, {HPMOE_B(RetDx), HPMOE_B(TokenRows), 0, 0}, {HPMOE_B(Dx), 0}},
    {ssc::kTaskTopkWeightGrad, kAccessBwd, {HPMOE_B(Dy), HPMOE_B(RetY), HPMOE_B(TokenRows), 0},
     {HPMOE_B(DTopkWeights), 0}},
    {ssc::kTaskAdd, kAccessFwd | kAccessBwd, {kActivationSlots, kActivationSlots, 0, 0}, {kActivationSlots, 0}},
    // Fused SwiGLU (kConfigFusedSwiglu): H's interleaved columns [2 c0, 2 c0 + 2 m) of A's block [c0, c0 + m).
    {ssc::kTaskGmmSwiglu, kAccessFwd | kAccessFused, {HPMOE_B(RecvX), HPMOE_B(W1), HPMOE_B(RecvCounts), 0},
     {HPMOE_B(H), HPMOE_B(A)}},
    {ssc::kTaskGmmSwigluGrad, kAccessBwd | kAccessFused,
     {HPMOE_B(RecvDy), HPMOE_B(W2), HPMOE_B(H), HPMOE_B(RecvCounts)}, {HPMOE_B(DH), HPMOE_B(DH)}},
};
#undef HPMOE_B
constexpr uint32_t kTaskAccessCount = sizeof(kTaskAccess) / sizeof(kTaskAccess[0]);

// Whether a row applies to a file with config flags `config_flags` (the weight layout, fused SwiGLU).
HPMOE_DEVICE constexpr bool LayoutAllows(uint32_t access_flags, uint32_t config_flags) {
  return ((config_flags & ssc::kConfigWeightsTransposed) ? !(access_flags & kAccessWeightsStd)
                                                         : !(access_flags & kAccessWeightsT)) &&
         ((config_flags & ssc::kConfigFusedSwiglu) ? !(access_flags & kAccessUnfused) : !(access_flags & kAccessFused));
}

// Whether `slot` (kNoSlot = unused) fits a position whose mask is `mask`.
HPMOE_DEVICE constexpr bool SlotAllowed(uint32_t mask, uint32_t slot) {
  return slot == ssc::kNoSlot ? mask == 0 : slot < ssc::kSlotCount && (mask & SlotBit(slot)) != 0;
}

// Whether task type `type` has at least one variant (used to prove the table covers every type).
HPMOE_DEVICE constexpr bool HasAccessRow(uint32_t type, uint32_t i = 0) {
  return i < kTaskAccessCount && (kTaskAccess[i].task_type == type || HasAccessRow(type, i + 1));
}
template <uint32_t T = 0>
HPMOE_DEVICE constexpr bool EveryTypeHasAccessRow() {
  if constexpr (T == ssc::kTaskTypeCount) {
    return true;
  } else {
    return HasAccessRow(T) && EveryTypeHasAccessRow<T + 1>();
  }
}
static_assert(EveryTypeHasAccessRow(), "a task type has no row in kTaskAccess: add what its handler reads/writes");

}  // namespace rt
}  // namespace hpmoe
