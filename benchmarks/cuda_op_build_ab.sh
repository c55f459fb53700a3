#!/usr/bin/env bash
# On a lent GPU machine: the op's persistent kernels (forward + backward of one user step, bf16 weight
# gradients, cuda_step_kernels.py) for each build in $BUILDS, alternating build by build within each round
# ($REPS rounds) and shape ($SHAPES), so that clock and temperature drift hit every build alike. `normal` is
# build/op_host/cuda; any other NAME is build/NAME (carry build/NAME/op_host/{cuda,cpu}). Profile builds
# (-DHPMOE_EXPERIMENT_PROFILE=1, tile_profile.cuh) also print their tile phases.
#   BUILDS="head normal" SHAPES="mixtral-8x7b:4096 deepseek-v3:8192" REPS="1 2" benchmarks/cuda_op_build_ab.sh
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" op_build_ab
for rep in ${REPS:-1 2}; do
  for shape in ${SHAPES:-mixtral-8x7b:4096 deepseek-v3:8192}; do
    for build in ${BUILDS:-normal}; do
      dir="$root/build"; [ "$build" = normal ] || dir="$root/build/$build"
      log="$out/op_${shape/:/_}_${build}_$rep.txt"
      HPMOE_BUILD_DIR="$dir" python3 benchmarks/cuda_step_kernels.py --shape "$shape" --path hpmoe --steps "${STEPS:-3}" \
        > "$log" 2>&1 || { echo "FAILED $shape $build"; tail -3 "$log"; continue; }
      echo "$shape $build round $rep: $(grep -m1 WorkerKernel "$log" | awk '{print $1, $2, $3}') per step" \
        "| step $(grep -m1 'total GPU time' "$log" | awk '{print $1}') ms"
      grep -E "tile profile|pair profile" "$log" | tail -5
    done
  done
done
