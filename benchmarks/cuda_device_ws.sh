#!/usr/bin/env bash
# One GPU session comparing the 256-thread TMA GMM tile (the default build, build/) with the warp-specialised
# one (-DHPMOE_GEMM_WS=1, built into build/ws by `benchmarks/cuda_device_ws.sh --build` here, where nvcc is):
# the SASS spill summary of both kernels, the GPU tests on the default build (TESTS_ON=build/ws: on that one),
# then the EP 1 kernel benchmark (GMM in the loop vs torch._grouped_mm) on both, one after the other.
# Logs under $OUT (or out/cuda_ws). Usage: benchmarks/cuda_device_ws.sh [--build | --tests-only] [TOKENS...]
# BUILDS="build build/ws" (the default) names the build folders compared; TESTS=0 skips the tests.
set -uo pipefail
if [ "${1:-}" = --build ]; then
  root="$(cd "$(dirname "$0")/.." && pwd)"
  "$root/op_host/cuda/build_lib.sh" "$root/build/op_host/cuda" &&
    NVCC_EXTRA="-DHPMOE_GEMM_WS=1" "$root/op_host/cuda/build_lib.sh" "$root/build/ws/op_host/cuda" &&
    mkdir -p "$root/build/ws/op_host/cpu" && cp "$root/build/op_host/cpu/libhpmoe_cpu.so" "$root/build/ws/op_host/cpu/"
  exit
fi
tests_only=0
[ "${1:-}" = --tests-only ] && { tests_only=1; shift; }
source "$(dirname "$0")/cuda_session_env.sh" cuda_ws
{ nvidia-smi -L; date -u; echo "commit ${HPMOE_COMMIT:-$(git rev-parse --short HEAD)}"; } | tee "$out/device.log"
# Where the local-memory traffic is: spill stores/loads per kernel, and how many sit between wgmma instructions.
builds="${BUILDS:-build build/ws}"
for build in $builds; do
  cuobjdump -sass "$root/$build/op_host/cuda/libhpmoe_cuda.so" 2>/dev/null | awk -v b="$build" '
    /Function :/ { if (name != "") printf "%s %s: STL %d LDL %d HGMMA %d\n", b, name, stl, ldl, mma; name = $3; stl = ldl = mma = 0 }
    /STL/ { stl++ } /LDL/ { ldl++ } /HGMMA/ { mma++ }
    END { printf "%s %s: STL %d LDL %d HGMMA %d\n", b, name, stl, ldl, mma }' | grep -i worker | tee -a "$out/sass.log"
done
[ "${TESTS:-1}" = 1 ] && HPMOE_BUILD_DIR="$root/${TESTS_ON:-build}" timeout 300 python3 -m pytest -x -q -ra tests/cuda 2>&1 | tail -30 | tee "$out/pytest.log"
[ "$tests_only" = 1 ] && exit 0
tokens="${*:-8192}"
for build in $builds; do
  echo "== $build" | tee -a "$out/bench.log"
  HPMOE_BUILD_DIR="$root/$build" timeout 150 python3 benchmarks/cuda_bench.py --tokens $tokens \
    --routing balanced --repeat 3 --variants ${VARIANTS:-pipelines+pool:128+4 mixed+pool} 2>&1 | tee -a "$out/bench.log"
done
