#!/usr/bin/env bash
# On a lent GPU machine: the training loop (cuda_sustained_step.py) at some shapes, once per set of MoEFFN
# options, each set in its own process and run against the PyTorch path (at the power cap a schedule is judged
# by its own run's ratio: the board's clock drifts between runs). Logs and JSON under $OUT (or out/loop_options),
# also in loop_options.tgz.
#   SHAPES="mixtral-8x22b:4096 mixtral-8x7b:4096" SETS="default;--expert-aligned on;--fuse-swiglu on" \
#     SECONDS_PER_BLOCK=3 ROUNDS=1 PAIRS=4 SET_TIMEOUT=200 benchmarks/cuda_loop_options.sh
# "default" is MoEFFN's own schedule; any other set is cuda_sustained_step.py's flags. Name the commit with
# HPMOE_COMMIT=<hash> from the checkout that sent the tree.
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" loop_options
shapes="${SHAPES:-mixtral-8x22b:4096 mixtral-8x7b:4096}"
IFS=';' read -r -a sets <<< "${SETS:-default}"
echo "commit ${HPMOE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}; shapes: $shapes"
i=0
for set in "${sets[@]}"; do
  i=$((i + 1))
  flags="$set"
  [ "$set" = default ] && flags=""
  start=$SECONDS
  # shellcheck disable=SC2086  # a set is a list of flags
  timeout "${SET_TIMEOUT:-300}" python3 benchmarks/cuda_sustained_step.py --shapes $shapes \
    --seconds "${SECONDS_PER_BLOCK:-3}" --rounds "${ROUNDS:-1}" --pairs "${PAIRS:-4}" $flags \
    --json-out "$out/set$i.json" > "$out/set$i.log" 2>&1
  rc=$?
  echo "== set $i [$set]: rc $rc, $((SECONDS - start)) s"
  if [ $rc = 0 ]; then sed -n '/^| shape/,$p' "$out/set$i.log"; else tail -3 "$out/set$i.log"; fi
done
(cd "$out" && tar czf loop_options.tgz ./set*.log ./set*.json 2>/dev/null)  # the device returns few files a call
