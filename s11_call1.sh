#!/bin/bash
set -u
export PYTHONPATH=$PWD/scheduler:$PWD/tests:$PWD/tests/runtime HPMOE_BUILD_DIR=$PWD/build HPMOE_COMMIT=494502e
O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv > $O/gpu.txt
timeout 300 python3 -m pytest -q -x tests/cuda/test_torch_wgrad_accumulation.py tests/cuda/test_torch_moeffn.py > $O/tests.log 2>&1; echo "tests rc $?" >> $O/tests.log
tail -3 $O/tests.log
for extra in "" "--fuse-wgrad-accumulation" "--grad-buffer main_grad" "--grad-buffer main_grad --fuse-wgrad-accumulation"; do
  tag=$(echo "x$extra" | tr -d ' -')
  timeout 200 python3 benchmarks/cuda_user_step.py --shapes qwen3-235b-a22b:4096 deepseek-v3:8192 qwen1.5-moe-a2.7b:4096 --routing random --repeat 5 $extra --json-out $O/$tag.json > $O/$tag.log 2>&1
  echo "$tag rc $?"; grep "fwd+bwd" $O/$tag.log | cut -c1-260
done
cd $OUT && tar czf r.tgz r && rm -rf r
