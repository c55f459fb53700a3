#!/usr/bin/env bash
# EP 1 sweep of the compiled schedule's GPU knobs (cube/vector block split, task row tile) for the default
# build, one GPU, one run: every line is cuda_bench.py's JSON for one config. Logs under $OUT.
# Usage: benchmarks/cuda_split_sweep.sh [TOKENS]
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" cuda_sweep
nvidia-smi -L | tee "$out/device.log"
./op_host/cuda/build_lib.sh "$root/build/op_host/cuda" >"$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
tokens="${1:-8192}"
for cfg in "112 20 128" "120 12 128" "104 28 128" "112 20 256"; do
  set -- $cfg
  echo "== aic $1 aiv $2 tile_m $3" | tee -a "$out/sweep.log"
  timeout 120 python3 benchmarks/cuda_bench.py --tokens $tokens --routing balanced --repeat 3 --aic $1 --aiv $2 \
    --tile-m $3 2>&1 | grep -v "^device" | tee -a "$out/sweep.log"
done
