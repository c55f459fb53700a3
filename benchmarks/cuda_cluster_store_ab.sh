#!/usr/bin/env bash
# On a lent GPU machine: the weight-gradient tile's stores in the cluster worker (cw: its default since session
# 33, the store loop as a call of its own, HPMOE_WGRAD_STORE_OUT_OF_LINE; cwc: by the copy engine,
# HPMOE_WGRAD_STORE_BY_COPIES, session 32's choice; cw8: the inlined loop, which spilled, session 31) and in the
# default build (def; defc by copies; defo the loop as a call), with profile builds cwp and defp.
# Builds in parallel here (op_host/cuda/build_lib.sh; a build/NAME/op_host/cuda/libhpmoe_cuda.so carried is
# used as it is), then: digests of each build against def (bitwise), fwd+bwd kernels alternating build by build
# (cuda_op_build_ab.sh), the profile builds' tile phases ($PROFILE_BUILDS), and with LOOP=1 the loop back to back at
# the power cap (cuda_sustained_step.py) of $LOOP_BUILDS. Needs build/op_host/cpu carried. Logs come back as
# $OUT/logs.tar.gz, the libraries of $KEEP as $OUT/lib_NAME.so (to carry to the next call).
#   SHAPES="qwen3-235b-a22b:4096 mixtral-8x22b:4096" benchmarks/cuda_cluster_store_ab.sh
#   BUILDS_MADE="def cw" AB_BUILDS=none LOOP=1 benchmarks/cuda_cluster_store_ab.sh   (libraries carried)
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" cluster_store_ab
SHAPES="${SHAPES:-qwen3-235b-a22b:4096 mixtral-8x22b:4096 mixtral-8x7b:4096 deepseek-v3:8192}"
nvidia-smi --query-gpu=name,serial,clocks.max.sm,power.limit --format=csv,noheader
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
declare -A FLAGS=([def]="" [defc]="-DHPMOE_WGRAD_STORE_BY_COPIES=1" [defo]="-DHPMOE_WGRAD_STORE_OUT_OF_LINE=1"
                  [defp]="-DHPMOE_EXPERIMENT_PROFILE=1" [cw]="-DHPMOE_CLUSTER_WORKER=1"
                  [cwc]="-DHPMOE_CLUSTER_WORKER=1 -DHPMOE_WGRAD_STORE_BY_COPIES=1"
                  [cw8]="-DHPMOE_CLUSTER_WORKER=1 -DHPMOE_WGRAD_STORE_OUT_OF_LINE=0"
                  [cwp]="-DHPMOE_CLUSTER_WORKER=1 -DHPMOE_EXPERIMENT_PROFILE=1")
BUILDS_MADE="${BUILDS_MADE:-def cw cwp defp}"
start=$SECONDS
for b in $BUILDS_MADE; do
  mkdir -p "build/$b/op_host/cpu"; cp build/op_host/cpu/libhpmoe_cpu.so "build/$b/op_host/cpu/"
  [ -f "build/$b/op_host/cuda/libhpmoe_cuda.so" ] && continue  # carried
  NVCC_EXTRA="${FLAGS[$b]}" timeout 420 ./op_host/cuda/build_lib.sh "build/$b/op_host/cuda" > "$out/build_$b.log" 2>&1 &
done
wait
echo "builds: $((SECONDS - start)) s"
for b in $BUILDS_MADE; do
  [ -f "build/$b/op_host/cuda/libhpmoe_cuda.so" ] || { echo "build $b FAILED"; tail -5 "$out/build_$b.log"; }
done
for b in ${DIGEST_BUILDS:-def cw}; do
  HPMOE_BUILD_DIR="build/$b" timeout 120 python3 benchmarks/cuda_build_digest.py ${DIGEST_SHAPES:-qwen3-235b-a22b:4096 mixtral-8x7b:4096} \
    > "$out/digest_$b.txt" 2>&1 || { echo "digest $b FAILED"; tail -3 "$out/digest_$b.txt"; continue; }
  [ "$b" = def ] && continue
  cmp -s <(awk '{print $1, $2, $3}' "$out/digest_def.txt") <(awk '{print $1, $2, $3}' "$out/digest_$b.txt") \
    && echo "digests: $b == def ($(wc -l < "$out/digest_def.txt") lines)" || echo "digests: $b DIFFERS from def"
done
if [ "${AB_BUILDS:-}" != none ]; then
  BUILDS="${AB_BUILDS:-def cw}" SHAPES="$SHAPES" REPS="${REPS:-1}" timeout "${AB_TIMEOUT:-240}" \
    bash benchmarks/cuda_op_build_ab.sh 2>&1 | grep -v "profile" | tee "$out/ab.txt"
fi
for p in ${PROFILE_BUILDS:-defp cwp}; do
  [ -f build/$p/op_host/cuda/libhpmoe_cuda.so ] || continue
  BUILDS=$p SHAPES="${PROFILE_SHAPES:-qwen3-235b-a22b:4096}" REPS=1 timeout 60 bash benchmarks/cuda_op_build_ab.sh \
    > "$out/profile_$p.txt" 2>&1
  grep -E "WEIGHT_GRAD|GMM_TRANS_B" "$out/profile_$p.txt" | cut -c1-200
done
for b in ${LOOP_BUILDS:-def cw}; do
  [ "${LOOP:-0}" = 1 ] || break
  echo "=== loop, build $b"
  HPMOE_BUILD_DIR="build/$b" timeout "${LOOP_TIMEOUT:-150}" python3 benchmarks/cuda_sustained_step.py \
    --shapes ${LOOP_SHAPES:-$SHAPES} --seconds 3 --rounds 1 --pairs 4 > "$out/loop_$b.txt" 2>&1
  grep -E "^\|" "$out/loop_$b.txt" | tail -n 6
done
echo "total: $((SECONDS - start)) s"
# At most 8 files come back from a call: the logs as one archive, and the libraries of $KEEP (to carry next call).
tar -C "$out" -czf /tmp/cluster_store_ab_logs.tar.gz . && find "$out" -type f -delete && mv /tmp/cluster_store_ab_logs.tar.gz "$out/logs.tar.gz"
for b in ${KEEP:-def cw}; do cp "build/$b/op_host/cuda/libhpmoe_cuda.so" "$out/lib_$b.so" 2>/dev/null; done
