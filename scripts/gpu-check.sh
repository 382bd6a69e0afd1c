#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one go (a GPU machine is often lent for minutes):
#   tests  the gpu-marked tests
#   bench  bench/gpu.py (its sections and options after the parts)
#   suite  README's test suite (all of tests/, slow ones excluded as there) with this machine's
#          torch, across the cores
#   nccl   a one-process torchrun training run (NCCL) on a small model, then its resume
# Runs aiayn from src/ with the machine's own Python and torch (no set-up, no network):
#   bash scripts/gpu-check.sh OUT_DIR [tests,bench,suite,nccl] [bench sections] [bench options]
# Wheels in .whl/ (for a machine without the server's dependencies, fetched where pip works:
# docs/gpus.md) are installed into /tmp/site first. The bench's loop and profile sections and
# the nccl part train from a prepared run directory (runs/gpu-run and its corpus
# runs/gpu-corpus: docs/gpus.md). Logs and the bench record go to OUT_DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?an output directory}
parts=${2:-tests,bench,suite,nccl}
sections=${3:-step,decode,profile}
mkdir -p "$out"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
{
    python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers",
transformers.__version__, torch.cuda.get_device_name())' 2>&1
    nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.max.sm --format=csv 2>&1
    lscpu | grep -E "Model name|^CPU\(s\)" 2>&1
} | tee "$out/bench.log"
status=0
if [[ $parts == *tests* ]]; then
    timeout 240 python3 -m pytest -q -p no:randomly -p no:cacheprovider -m gpu tests 2>&1 |
        tee "$out/gpu-tests.log" | tail -15 || status=1
fi
if [[ $parts == *bench* ]]; then
    timeout "${BENCH_SECONDS:-420}" python3 bench/gpu.py --sections "$sections" --copy-to "$out" "${@:4}" 2>&1 |
        tee -a "$out/bench.log" | tail -80 || status=1
fi
if [[ $parts == *suite* ]]; then
    workers=$(($(nproc) > 16 ? 16 : $(nproc)))
    timeout "${SUITE_SECONDS:-300}" python3 -m pytest -q -p no:randomly -p no:cacheprovider \
        -n "$workers" tests 2>&1 | tee "$out/suite.log" | tail -40 || status=1
fi
if [[ $parts == *nccl* ]]; then
    run=/tmp/aiayn-nccl
    rm -rf "$run"
    train=(-m torch.distributed.run --standalone --nproc_per_node 1 -m aiayn.cli train
        configs/base-wmt.toml --out "$run" --quiet --set 'data.corpus="runs/gpu-corpus"'
        --set 'data.src_lang="de"' --set 'data.tgt_lang="en"' --set 'model.preset="small"'
        --set train.checkpoint_every=20 --set train.average_last=0 --set train.max_tokens=8000)
    {
        echo "== train 40 steps"
        NCCL_DEBUG=INFO timeout 90 python3 "${train[@]}" --set train.max_steps=40
        echo "== resume to 60 steps"
        NCCL_DEBUG=INFO timeout 90 python3 "${train[@]}" --set train.max_steps=60
        echo "== metrics"
        grep -E '"event"|valid_loss' "$run/metrics.jsonl"
    } >"$out/nccl.log" 2>&1 || status=1
    grep -c "NCCL INFO" "$out/nccl.log" | sed 's/^/NCCL INFO lines: /'
    grep -E '"event": "(resume|finish)"' "$out/nccl.log" | cut -c1-200
fi
exit $status
