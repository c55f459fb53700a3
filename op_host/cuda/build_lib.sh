#!/usr/bin/env bash
# Builds libhpmoe_cuda.so with nvcc alone (no CMake), for the GPU machines: ./op_host/cuda/build_lib.sh OUT_DIR
# NVCC_EXTRA adds flags (e.g. -DHPMOE_GEMM_TMA=0 for the cp.async-fed GMM tile).
# CMake builds the same sources when it finds a CUDA compiler (op_host/cuda/CMakeLists.txt).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/build/op_host/cuda}"
mkdir -p "$out"
nvcc -O3 -std=c++17 ${NVCC_EXTRA:-} -gencode=arch=compute_90a,code=sm_90a -shared -Xcompiler -fPIC,-Wall \
  -I"$root/op_kernel" -I"$root/op_host" \
  "$root/op_host/cuda/c_api.cu" "$root/op_host/cuda/cuda_group.cu" "$root/op_host/cuda/cuda_ipc.cu" "$root/op_host/cuda/tensor_maps.cu" \
  "$root/op_host/ssc_reader.cpp" "$root/op_host/ssc_file.cpp" "$root/op_host/ssc_loader.cpp" \
  "$root/op_kernel/cpu/heap_layout.cpp" -o "$out/libhpmoe_cuda.so"
echo "$out/libhpmoe_cuda.so"
