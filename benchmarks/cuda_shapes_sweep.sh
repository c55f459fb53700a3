#!/usr/bin/env bash
# On a lent GPU machine: the user's step (cuda_user_step.py) at every model's expert shape, one process per
# shape with its own time limit, so that a shape that fails or runs long costs only its row; then one table
# and one JSON of them all (user_step_table.py). Logs and JSON under $OUT (or out/shapes_sweep), also in
# shapes_sweep.tgz.
#   benchmarks/cuda_shapes_sweep.sh [MODEL:TOKENS ...]     (default: issue 16's five shapes, then the others at 4096)
#   EXTRA="--fuse-swiglu" REPEAT=3 SHAPE_TIMEOUT=120 benchmarks/cuda_shapes_sweep.sh
# Name the commit with HPMOE_COMMIT=<hash> from the checkout that sent the tree: the device machine's copy
# may report an older HEAD (seen on the lent H200, 2026-11-25).
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" shapes_sweep
shapes="${*:-deepseek-v3:8192 qwen3-30b-a3b:8192 mixtral-8x7b:4096 deepseek-v3:1024 deepseek-v3:4096 \
mixtral-8x22b:4096 dbrx:4096 qwen3-235b-a22b:4096 deepseek-v2-lite:4096 qwen1.5-moe-a2.7b:4096 olmoe-1b-7b:4096 \
gpt-oss-20b:4096}"
export HPMOE_COMMIT="${HPMOE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
done_json=()
for shape in $shapes; do
  name="${shape/:/_}"
  start=$SECONDS
  timeout "${SHAPE_TIMEOUT:-120}" python3 benchmarks/cuda_user_step.py --shapes "$shape" --routing random \
    --repeat "${REPEAT:-3}" ${EXTRA:-} --json-out "$out/$name.json" > "$out/$name.log" 2>&1
  rc=$?
  echo "$shape: rc $rc, $((SECONDS - start)) s"
  [ $rc = 0 ] && done_json+=("$out/$name.json") || tail -3 "$out/$name.log"
done
[ ${#done_json[@]} -gt 0 ] && python3 benchmarks/user_step_table.py "${done_json[@]}" --json-out "$out/sweep.json" \
  | tee "$out/sweep.txt"
# One archive of every log and JSON: the device tool brings back only a few files a call.
(cd "$out" && tar czf shapes_sweep.tgz ./*.log ./*.json sweep.txt 2>/dev/null)
