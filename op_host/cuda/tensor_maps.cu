// Tensor maps for the TMA GMM tiles. A slot is viewed as 3-D (cols, rows per expert, experts) so that a box
// never crosses an expert's weight matrix (the copy engine zero-fills outside it); activation slots have one
// "expert". 128-byte swizzle, boxes 64 elements wide (tensor_map_kinds.h), zero fill out of bounds.
#include "tensor_maps.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <vector>

#include "../../op_kernel/cuda/tensor_map_kinds.h"

namespace hpmoe {
namespace cuda {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

std::string GetEncoder(EncodeTiled* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess || p == nullptr)
    return "the CUDA driver has no cuTensorMapEncodeTiled (TMA GMM tiles need CUDA 12+ and a Hopper GPU)";
  *fn = reinterpret_cast<EncodeTiled>(p);
  return "";
}

}  // namespace

std::string EncodeSlotMaps(const cpu::SlotShape& sh, const void* base, uint8_t (*out)[kTensorMapBytes]) {
  static_assert(sizeof(CUtensorMap) == kTensorMapBytes, "tensor map size");
  static EncodeTiled encode = nullptr;
  if (encode == nullptr) {
    const std::string err = GetEncoder(&encode);
    if (!err.empty()) return err;
  }
  const uint64_t per = sh.ndim == 3 ? sh.dims[1] : sh.rows;
  const cuuint64_t dims[3] = {sh.cols, per, sh.rows / per};
  const cuuint64_t strides[2] = {sh.cols * 2, sh.cols * 2 * per};  // bytes, dims 1 and 2
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUtensorMapDataType type =
      sh.dtype == ssc::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  for (uint32_t box = 0; box < kBoxKinds; ++box) {
    const cuuint32_t box_dims[3] = {64, kBoxLines[box], 1};
    const CUresult r = encode(reinterpret_cast<CUtensorMap*>(out[box]), type, 3, const_cast<void*>(base), dims,
                              strides, box_dims, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return "cuTensorMapEncodeTiled failed (error " + std::to_string(int(r)) + ")";
  }
  return "";
}

bool HasTensorMaps(const cpu::SlotShape& sh) {
  const bool half = sh.dtype == ssc::kBF16 || sh.dtype == ssc::kFP16;
  return half && sh.rows != 0 && sh.cols != 0 && (sh.cols * 2) % 16 == 0;
}

std::string BuildTensorMaps(const cpu::HeapLayout& layout, const uint8_t* segment, const uint64_t* placed,
                            uint8_t** out) {
  std::vector<CUtensorMap> maps(ssc::kSlotCount * kBoxKinds);  // zeroed: unused for other slots
  for (uint32_t slot = 0; slot < ssc::kSlotCount; ++slot) {
    if (!HasTensorMaps(layout.slots[slot])) continue;  // (an external slot's maps are never read: launches bind it)
    const void* base = placed[slot] ? reinterpret_cast<const void*>(placed[slot]) : segment + layout.slot_offset[slot];
    const std::string err = EncodeSlotMaps(layout.slots[slot], base,
                                           reinterpret_cast<uint8_t(*)[kTensorMapBytes]>(&maps[slot * kBoxKinds]));
    if (!err.empty()) return "heap slot " + std::to_string(slot) + ": " + err;
  }
  const size_t bytes = maps.size() * sizeof(CUtensorMap);
  if (cudaMalloc(out, bytes) != cudaSuccess) return "cudaMalloc of the tensor maps failed";
  if (cudaMemcpy(*out, maps.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    return "uploading the tensor maps failed";
  return "";
}

}  // namespace cuda
}  // namespace hpmoe
