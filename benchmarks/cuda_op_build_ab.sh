#!/usr/bin/env bash
# On a lent GPU machine: the op's persistent kernels (forward + backward of one user step, bf16 weight
# gradients, cuda_step_kernels.py) for each build in $BUILDS, alternating build by build within each round
# ($REPS rounds) and shape ($SHAPES), so that clock and temperature drift hit every build alike. `normal` is
# build/op_host/cuda; any other NAME is build/NAME (carry build/NAME/op_host/{cuda,cpu}). Profile builds
# (-DHPMOE_EXPERIMENT_PROFILE=1, tile_profile.cuh) also print their tile phases.
#   BUILDS="head normal" SHAPES="mixtral-8x7b:4096 deepseek-v3:8192" REPS="1 2" benchmarks/cuda_op_build_ab.sh
# A BUILDS entry NAME+ARGS runs build NAME with cuda_step_kernels.py's extra ARGS (commas for spaces), so that
# schedules A/B too: BUILDS="normal normal+--gmm-k-block,4096".
# Short runs compare kernel time at whatever clock each gets; a change that saves power shows its gain only
# back to back at the power cap (benchmarks/cuda_sustained_step.py; docs/cuda.md, "Measuring: the power cap").
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" op_build_ab
for rep in ${REPS:-1 2}; do
  for shape in ${SHAPES:-mixtral-8x7b:4096 deepseek-v3:8192}; do
    for entry in ${BUILDS:-normal}; do
      build="${entry%%+*}"; extra=""; [ "$entry" = "$build" ] || extra="${entry#*+}"
      dir="$root/build"; [ "$build" = normal ] || dir="$root/build/$build"
      log="$out/op_${shape/:/_}_${entry//[^A-Za-z0-9_.-]/_}_$rep.txt"
      # shellcheck disable=SC2086  # the extra arguments split on the commas' spaces
      HPMOE_BUILD_DIR="$dir" python3 benchmarks/cuda_step_kernels.py --shape "$shape" --path hpmoe --steps "${STEPS:-3}" \
        ${extra//,/ } > "$log" 2>&1 || { echo "FAILED $shape $entry"; tail -3 "$log"; continue; }
      echo "$shape $entry round $rep: $(grep -m1 WorkerKernel "$log" | awk '{print $1, $2, $3}') per step" \
        "| step $(grep -m1 'total GPU time' "$log" | awk '{print $1}') ms"
      grep -E "block profile|tile profile|ping-pong profile|pair profile|sync profile|wait profile" "$log" | tail -n 60
    done
  done
done
