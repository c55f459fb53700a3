#!/usr/bin/env bash
# Builds libhpmoe_cuda.so with nvcc alone (no CMake), for the GPU machines: ./op_host/cuda/build_lib.sh OUT_DIR
# (--sources: print the source list and stop)
# NVCC_EXTRA adds flags (e.g. -DHPMOE_GEMM_TMA=0 for the cp.async-fed GMM tile).
# CMake builds the same sources when it finds a CUDA compiler (op_host/cuda/CMakeLists.txt).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
# The sources are CMake's (targets hpmoe_cuda and hpmoe_ssc), read from the CMakeLists files so that the two
# builds cannot drift apart. $1: CMakeLists.txt, $2: target, $3: the folder its relative paths start from.
cmake_sources() {
  awk -v t="add_library($2 " 'index($0, t) { f = 1 } f { line = line " " $0 } f && /\)/ { exit } END { print line }' "$1" |
    sed -e 's/.*add_library([A-Za-z_]* [A-Z]*//' -e 's/).*//' | tr ' ' '\n' | grep -E '\.(cu|cpp)$' |
    sed -e "s|\${PROJECT_SOURCE_DIR}|$root|" -e "s|^\([^/]\)|$3/\1|"
}
sources="$(cmake_sources "$root/op_host/cuda/CMakeLists.txt" hpmoe_cuda "$root/op_host/cuda")
$(cmake_sources "$root/op_host/CMakeLists.txt" hpmoe_ssc "$root/op_host")"
if [ "${1:-}" = --sources ]; then echo "$sources"; exit 0; fi
out="${1:-$root/build/op_host/cuda}"
mkdir -p "$out"
for f in $sources; do [ -f "$f" ] || { echo "build_lib.sh: source $f (from CMakeLists) is missing" >&2; exit 1; }; done
nvcc -O3 -std=c++17 ${NVCC_EXTRA:-} -gencode=arch=compute_90a,code=sm_90a -shared -Xcompiler -fPIC,-Wall \
  -I"$root/op_kernel" -I"$root/op_host" $sources -o "$out/libhpmoe_cuda.so" 2>&1 | tee "$out/build.log"
"$root/op_host/cuda/refuse_serialised_wgmma.sh" "$out/build.log"
echo "$out/libhpmoe_cuda.so"
