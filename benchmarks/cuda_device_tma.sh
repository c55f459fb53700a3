#!/usr/bin/env bash
# One GPU session comparing the GMM tiles side by side: builds the default library (wgmma, cp.async) and the
# TMA one (-DHPMOE_GEMM_TMA=1), runs the GPU tests on the TMA build (or on the build named by TESTS_ON),
# then the EP 1 benchmark on both, in one run. Logs under $OUT (or out/cuda_tma).
# Usage: benchmarks/cuda_device_tma.sh [TOKENS...]
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" cuda_tma
nvidia-smi -L | tee "$out/device.log"
date -u | tee -a "$out/device.log"
NVCC_EXTRA="-DHPMOE_GEMM_TMA=0" ./op_host/cuda/build_lib.sh "$root/build_def/op_host/cuda" >"$out/build.log" 2>&1 &
NVCC_EXTRA="-DHPMOE_GEMM_TMA=1" ./op_host/cuda/build_lib.sh "$root/build_tma/op_host/cuda" >>"$out/build.log" 2>&1 || {
  cat "$out/build.log"; exit 1; }
wait || { cat "$out/build.log"; exit 1; }
HPMOE_BUILD_DIR="$root/build_${TESTS_ON:-tma}" timeout 240 python3 -m pytest -x -q -ra tests/cuda 2>&1 | tee "$out/pytest.log"
tokens="${*:-8192}"
for build in tma def; do
  echo "== $build" | tee -a "$out/bench.log"
  HPMOE_BUILD_DIR="$root/build_$build" timeout 200 python3 benchmarks/cuda_bench.py --tokens $tokens \
    --routing balanced --repeat 3 2>&1 | tee -a "$out/bench.log"
done
