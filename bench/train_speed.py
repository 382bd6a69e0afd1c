"""Training-step throughput against peers, model FLOPs utilisation and peak memory.

    python bench/train_speed.py [--presets small base] [--repeats 5] [--threads 2]

The same encoder-decoder sizes, batches, loss (label smoothing 0.1), optimizer (Adam 0.9/0.98)
and thread count for three implementations, timed alternately in one process:

- aiayn: ``build_model`` of the preset;
- torch: ``torch.nn.Transformer`` with the same embeddings (tied, scaled by sqrt(d_model)),
  sinusoidal positional encoding, dropout and tied output projection;
- marian: Hugging Face ``MarianMTModel`` with the same sizes (post-LN, ReLU, sinusoidal
  positions, scaled and shared embeddings), random weights.

Batches are token batches of the Ding training split grouped by length (``--max-tokens``).
Model FLOPs of a training step (forward + backward) are counted with
``torch.utils.flop_counter`` while attention runs its math kernel (so its matmuls are seen);
the machine's peak is the best fp32 matmul rate measured in the same run. Peak memory is the
growth of the resident set (Linux VmHWM) of a fresh process that builds one model and
trains it for two steps.
Prints a table and appends a record to bench/results/train_speed.jsonl.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).parent))
from aiayn.config import DataConfig, ModelConfig  # noqa: E402
from aiayn.data.parallel import encode_split, train_tokenizer  # noqa: E402
from aiayn.data.tokenizer import PAD  # noqa: E402
from aiayn.model import build_model  # noqa: E402
from aiayn.train.objectives import label_smoothed_nll, seq2seq_loss  # noqa: E402
from common import machine, write_result  # noqa: E402
from peers import Marian, TorchTransformer  # noqa: E402

VOCAB = {"small": 4000, "base": 37000}
MAX_TOKENS = {"small": 2048, "base": 4096}


PEERS = {"aiayn": build_model, "torch": TorchTransformer, "marian": Marian}


def ding_batches(max_tokens: int, n: int) -> list:
    """``n`` length-grouped token batches of the Ding training split (4k shared BPE)."""
    data = DataConfig(corpus="data/ding-de-en", vocab_size=4000, max_len=96)
    split = encode_split(data, train_tokenizer(data), "train", filter_long=True)
    return list(split.batches(max_tokens, seed=1, epoch=0)[:n])  # collated once


def loss_of(model, batch):
    """Label-smoothed loss as each library is used: aiayn's training loss (logits only at
    real targets); the peers' full logits, padding dropped in the loss."""
    if isinstance(model, (TorchTransformer, Marian)):
        return label_smoothed_nll(model(batch.src, batch.tgt_in), batch.tgt_out, 0.1, PAD)
    return seq2seq_loss(model, batch, 0.1, PAD)


def step_fn(model, batches):
    """One optimizer step per batch, as in training; returns the target tokens seen."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    tokens = sum(b.n_tokens for b in batches)

    def run():
        for b in batches:
            loss, _, n = loss_of(model, b)
            (loss / n).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return tokens

    return run


def train_flops(model, batch) -> int:
    """Matmul FLOPs of one forward + backward pass (attention through its math kernel)."""
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        loss, _, n = loss_of(model, batch)
        (loss / n).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def peak_matmul_flops(repeats: int = 10) -> float:
    """The best fp32 matmul rate over a few square sizes (FLOP/s)."""
    best = 0.0
    for n in (512, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - t)
        best = max(best, 2 * n**3 / statistics.median(times))
    return best


def memory_of(name: str, preset: str, threads: int, batches: int) -> float:
    """Peak resident-set growth (MB) of a fresh process training ``name`` for two steps."""
    cmd = [sys.executable, __file__, "--memory-child", name, "--presets", preset]
    cmd += ["--threads", str(threads), "--batches", str(batches)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_mb"]


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def memory_child(name: str, preset: str, n_batches: int) -> None:
    config = ModelConfig.preset(preset, vocab_size=VOCAB[preset])
    batches = ding_batches(MAX_TOKENS[preset], n_batches)
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    before = _status_kb("VmRSS")
    step_fn(PEERS[name](config).train(), batches[:2])()
    print(json.dumps({"peak_mb": (_status_kb("VmHWM") - before) / 1024}))


def bench_preset(preset: str, args, peak: float) -> dict:
    config = ModelConfig.preset(preset, vocab_size=VOCAB[preset])
    batches = ding_batches(MAX_TOKENS[preset], args.batches)
    models, runs, times, flops = {}, {}, {}, {}
    for name, build in PEERS.items():
        torch.manual_seed(0)
        models[name] = build(config).train()
        flops[name] = (
            train_flops(models[name], batches[0])
            * sum(b.n_tokens for b in batches)
            / max(batches[0].n_tokens, 1)
        )
        runs[name] = step_fn(models[name], batches)
        runs[name]()  # warm-up
        times[name] = []
    for _ in range(args.repeats):  # alternate, so drift hits every model alike
        for name, run in runs.items():
            t = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t)
    tokens = sum(b.n_tokens for b in batches)
    rows = {}
    for name in PEERS:
        seconds = statistics.median(times[name])
        rows[name] = {
            "parameters": sum(p.numel() for p in models[name].parameters() if p.requires_grad),
            "tokens_per_s": tokens / seconds,
            "step_s": seconds / len(batches),
            "train_flops_per_step": flops[name] / len(batches),
            "mfu": flops[name] / seconds / peak,
        }
        if not args.no_memory:
            rows[name]["peak_memory_mb"] = memory_of(name, preset, args.threads, args.batches)
    for name in ("torch", "marian"):
        rows["aiayn"][f"speedup_vs_{name}"] = (
            rows["aiayn"]["tokens_per_s"] / rows[name]["tokens_per_s"]
        )
    return {"preset": preset, "batches": len(batches), "target_tokens": tokens, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--presets", nargs="+", default=["small", "base"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, default=4, help="training steps per timing")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.memory_child:
        memory_child(args.memory_child, args.presets[0], args.batches)
        return
    peak = peak_matmul_flops()
    print(f"{machine()['cpu']}, {args.threads} threads: peak fp32 matmul {peak / 1e9:.1f} GFLOP/s")
    results = [bench_preset(p, args, peak) for p in args.presets]
    print(f"\n{'preset':8} {'model':8} {'params':>11} {'tgt tok/s':>10} {'MFU':>6} {'mem MB':>8}")
    for res in results:
        for name, row in res["rows"].items():
            mem = row.get("peak_memory_mb", float("nan"))
            print(
                f"{res['preset']:8} {name:8} {row['parameters']:>11,} "
                f"{row['tokens_per_s']:>10.0f} {row['mfu']:>6.1%} {mem:>8.0f}"
            )
        ours = res["rows"]["aiayn"]
        print(
            f"{'':8} aiayn vs torch.nn.Transformer {ours['speedup_vs_torch']:.2f}x, "
            f"vs MarianMTModel {ours['speedup_vs_marian']:.2f}x"
        )
    path = write_result(
        "train_speed",
        {"peak_matmul_flops": peak, "repeats": args.repeats, "results": results},
    )
    print(f"\nappended to {path}")


if __name__ == "__main__":
    main()
