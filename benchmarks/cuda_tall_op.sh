#!/usr/bin/env bash
# On a lent GPU machine: the op with the tall GMM tile (a library built with -DHPMOE_GEMM_WS=2 -DHPMOE_GEMM_TALL=1,
# $TALL) against the same roles with the 128 x 256 tile ($ROLES, -DHPMOE_GEMM_WS=2) and the default build
# ($DEFAULT). Carry the three build folders. Parts, chosen by $PARTS (default "digest tests kernels loop"):
#   digest   outputs of one step, bit for bit, tall against roles at tile_m 256 (cuda_build_digest.py)
#   tests    the GPU tests on the tall build (float64 references, bitwise repeats)
#   kernels  the op's kernels, builds alternating (cuda_op_build_ab.sh), tile_m 256 for the roles builds
#   loop     the training loop at the power cap against PyTorch (cuda_sustained_step.py), tall and default
#   TALL=build/s37t ROLES=build/s37w DEFAULT=build/s36p bash benchmarks/cuda_tall_op.sh
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" tall_op
TALL="${TALL:-build/tall}" ROLES="${ROLES:-build/roles}" DEFAULT="${DEFAULT:-build}"
SHAPES="${SHAPES:-mixtral-8x22b:4096 dbrx:4096 deepseek-v3:8192}"
for part in ${PARTS:-digest tests kernels loop}; do
  case "$part" in
    digest)
      for b in "$ROLES" "$TALL"; do
        # shellcheck disable=SC2086  # the shapes are separate arguments
        HPMOE_BUILD_DIR="$root/$b" python3 benchmarks/cuda_build_digest.py --tile-m 256 $SHAPES > "$out/digest_$(basename "$b").txt" 2>&1
      done
      if diff <(awk '{print $1, $2, $3}' "$out/digest_$(basename "$ROLES").txt") \
              <(awk '{print $1, $2, $3}' "$out/digest_$(basename "$TALL").txt") > "$out/digest_diff.txt"; then
        echo "digest: tall tile bitwise the 128 x 256 tile at tile_m 256 ($SHAPES)"
      else
        echo "digest: DIFFERENT"; head -20 "$out/digest_diff.txt"
      fi
      cat "$out/digest_$(basename "$TALL").txt" ;;
    tests)
      HPMOE_BUILD_DIR="$root/$TALL" timeout "${TEST_TIMEOUT:-400}" python3 -m pytest -q -x tests/cuda \
        -k "not paired_tile and not pingpong and not fused_swiglu" > "$out/tests_tall.txt" 2>&1
      tail -3 "$out/tests_tall.txt" ;;
    kernels)
      BUILDS="$(basename "$ROLES")+--tile-m,256 $(basename "$TALL")+--tile-m,256 $(basename "$DEFAULT")" SHAPES="$SHAPES" \
        REPS="${REPS:-1 2}" STEPS=3 bash benchmarks/cuda_op_build_ab.sh 2>&1 | grep -v profile ;;
    loop)
      # shellcheck disable=SC2086
      HPMOE_BUILD_DIR="$root/$TALL" python3 benchmarks/cuda_sustained_step.py --tile-m 256 --shapes $SHAPES \
        --seconds "${LOOP_SECONDS:-4}" > "$out/loop_tall.txt" 2>&1
      # shellcheck disable=SC2086
      HPMOE_BUILD_DIR="$root/$DEFAULT" python3 benchmarks/cuda_sustained_step.py --shapes $SHAPES \
        --seconds "${LOOP_SECONDS:-4}" > "$out/loop_default.txt" 2>&1
      tail -n 8 "$out/loop_tall.txt" "$out/loop_default.txt" ;;
    *) echo "cuda_tall_op.sh: unknown part $part (digest tests kernels loop)" >&2; exit 2 ;;
  esac
done
