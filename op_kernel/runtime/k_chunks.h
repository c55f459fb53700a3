// A second GMM (GMM2: K = I; the gate gradient: K = 2I) whose K is longer than config.gmm_k_block runs as a
// chain of tasks per output tile, one per K chunk of gmm_k_block (the last may be shorter), in K order:
//   chunk 0           reads its K columns of the input,            writes the fp32 sum into kSlotGmmPartial;
//   chunk j (middle)  also reads that sum (input 3) and adds to it, writes it back;
//   the last chunk    also reads the sum, writes the output rounded once, as the K-whole task does.
// Each chunk waits on the one before it (the compiler's chain event), so the sum is formed in one fixed order,
// (((p0 + p1) + p2) ...) of the chunks' fp32 products: results are deterministic. (Not bitwise the K-whole
// tile's: starting a chunk's accumulators from the sum would be, but made ptxas serialise the GPU's wgmma.)
// Why: claimed in (chunk, column block) order, the tasks that read one input chunk run together and share it in
// L2; K-whole, the column blocks of a wide expert read the whole input row tile again each at their own pace
// (Mixtral-8x22B's backward read 31 GB in its data-gradient GEMMs against about 6 compulsory; docs/cuda.md).
// Device-compilable.
#pragma once

#include "../ssc_layout.h"
#include "device.h"

namespace hpmoe {
namespace rt {

// Whether some GMM of config `c` runs in K chunks: the backward's gate gradient has the longest K (2I).
HPMOE_DEVICE bool KChunked(const ssc::SscConfig& c) { return c.gmm_k_block != 0 && 2ull * c.inter > c.gmm_k_block; }

// Where a GMM task's K range and its running sum are: K columns [k0, k0 + kn) of input 0 (the whole K unless
// chunked), whether it starts from the sum (input 3 is kSlotGmmPartial) and whether it leaves the sum
// (output 0 is kSlotGmmPartial) instead of the output.
struct KChunk {
  uint64_t k0, kn;
  bool reads_sum, writes_sum;
};

// The chunk a GMM task runs, for an operation of K `k`; false if its regions do not describe one (the input's
// columns outside [0, k), a sum read or written on other rows or columns than the output tile).
HPMOE_DEVICE bool KChunkOf(const ssc::SscTask& t, uint64_t k, KChunk* out) {
  const ssc::SscTensorRef& in = t.inputs[0];
  const ssc::SscTensorRef& sum = t.inputs[3];
  const ssc::SscTensorRef& o = t.outputs[0];
  const bool reads = sum.slot == ssc::kSlotGmmPartial, writes = o.slot == ssc::kSlotGmmPartial;
  const uint64_t k0 = in.col_offset, k1 = k0 + in.cols;
  if (in.cols == 0 || k1 > k) return false;
  if (k0 == 0 && k1 == k) {
    if (reads || writes) return false;  // K whole: no running sum
  } else if (reads != (k0 != 0) || writes != (k1 != k)) {
    return false;  // the first chunk starts the sum, the last one writes the output
  }
  if (reads && (sum.row_offset != o.row_offset || sum.rows != o.rows || sum.col_offset != o.col_offset ||
                sum.cols != o.cols))
    return false;  // the sum of exactly this output tile
  *out = KChunk{k0, in.cols, reads, writes};
  return true;
}

}  // namespace rt
}  // namespace hpmoe
