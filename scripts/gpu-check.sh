#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one go (a GPU machine is often lent for minutes):
# the gpu-marked tests, bench/gpu.py, and the suite's model / infer / train / data tests.
# Runs aiayn from src/ with the machine's own Python and torch (no set-up, no network):
#   bash scripts/gpu-check.sh OUT_DIR [tests,bench,suite] [bench sections] [bench options]
# The bench needs a prepared run directory for its loop section (runs/gpu-run: see
# docs/gpus.md). Logs and the bench record go to OUT_DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?an output directory}
parts=${2:-tests,bench,suite}
sections=${3:-step,decode,loop}
mkdir -p "$out"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers",
transformers.__version__, torch.cuda.get_device_name())' 2>&1 | tee "$out/machine.txt"
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.max.sm --format=csv \
    >>"$out/machine.txt" 2>&1
status=0
if [[ $parts == *tests* ]]; then
    timeout 300 python3 -m pytest -q -p no:randomly -p no:cacheprovider -m gpu tests 2>&1 |
        tee "$out/gpu-tests.log" | tail -15 || status=1
fi
if [[ $parts == *bench* ]]; then
    timeout 560 python3 bench/gpu.py --sections "$sections" --copy-to "$out" "${@:4}" 2>&1 |
        tee "$out/bench.log" | tail -60 || status=1
fi
if [[ $parts == *suite* ]]; then
    timeout 400 python3 -m pytest -q -p no:randomly -p no:cacheprovider -n 8 \
        tests/model tests/infer tests/train tests/data tests/test_algorithms.py 2>&1 |
        tee "$out/suite.log" | tail -25 || status=1
fi
exit $status
