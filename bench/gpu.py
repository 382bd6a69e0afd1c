"""aiayn on a GPU against its peers: the base model's training step, decoding, the real loop.

    python bench/gpu.py                                   # every section
    python bench/gpu.py --sections step,decode --rounds 3
    python bench/gpu.py --sections loop --loop-run runs/gpu-run --loop-seconds 90

Sections, each timed in one process on the same inputs:

- ``step``: one bf16 training step of the paper's base model (N=6, d_model 512, 8 heads,
  d_ff 2048, a 37,000-token shared vocabulary) on the same ~25k-token batches (lengths drawn
  around WMT14's, several shapes) for aiayn eager, aiayn with ``train.compile``'s
  compilation (``aiayn.train.compiling``), aiayn with the CPU's chunked loss (what the loss
  cost before it followed the device's memory), Hugging Face ``MarianMTModel`` and
  ``torch.nn.Transformer`` of the same sizes (bench/peers.py), each with the same fused Adam
  and label-smoothed loss, in turn over --rounds rounds. Step time, target tokens/s, model
  FLOPs utilisation (the matmul FLOPs of a step, counted by ``torch.utils.flop_counter``,
  over the bf16 matmul rate measured in the same run), peak GPU memory above the weights,
  the first compiled step's seconds and the graphs compiled. The paper's 100k steps are
  projected from each step time.
- ``decode``: the shipped model (models/ding-de-en) on its test split in batches of 128,
  greedy and beam 4, against ``MarianMTModel.generate`` holding the same weights; aiayn
  also with bf16 weights: sentences/s and BLEU.
- ``loop``: ``aiayn train configs/base-wmt.toml`` for --loop-seconds on a prepared run
  directory (tokenizer and token stores in place: ``aiayn train --prepare-only``), eager and
  compiled: its tokens/s against the isolated step's, data-wait share, validation loss.

Appends one record to bench/results/gpu.jsonl (the GPU and torch named) with the ratios
``eager_vs_marian``, ``compiled_vs_marian``, ``mfu_compiled`` and ``beam4_vs_marian``;
--copy-to DIR also writes it there (a GPU machine whose working tree is thrown away).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).parent))
from aiayn.config import ModelConfig  # noqa: E402
from aiayn.data.batching import Batch, pad  # noqa: E402
from aiayn.data.tokenizer import BOS, EOS, PAD  # noqa: E402
from aiayn.model import attention as attention_module  # noqa: E402
from aiayn.model import build_model  # noqa: E402
from aiayn.train import compiling, objectives  # noqa: E402
from aiayn.train.objectives import label_smoothed_nll, seq2seq_loss  # noqa: E402
from common import ROOT, write_result  # noqa: E402
from peers import Marian, TorchTransformer  # noqa: E402

VOCAB = 37_000
MAX_TOKENS = 25_000
PAPER_STEPS = 100_000
# target lengths of the batches (padded positions): WMT14 En-De's BPE sentences average
# ~27-29 tokens; a length-grouped epoch holds every length, these few stand for it
LENGTHS = (17, 25, 31, 38, 48, 64)


# --smoke: a seconds-long run of every section on the CPU with the tiny preset, to check the
# script before spending a GPU's time on it
DEVICE, PRESET = "cuda", "base"


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def timer():
    """(start, stop) of a region: CUDA events on the GPU, the host clock elsewhere."""
    if DEVICE != "cuda":
        began = time.perf_counter()
        return None, lambda: time.perf_counter() - began
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()

    def stop() -> float:
        end.record()
        sync()
        return start.elapsed_time(end) / 1e3

    return start, stop


def bf16_matmul_rate(n: int = 8192, repeats: int = 10) -> float:
    """FLOP/s of an n x n x n bf16 product on random data (the median of ``repeats``)."""
    a = torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(repeats):
        _, stop = timer()
        a @ b
        times.append(stop())
    return 2 * n**3 / statistics.median(times)


def wmt_batches(seed: int = 0, multiple: int = 1) -> list[Batch]:
    """One ~``MAX_TOKENS``-token batch per length of ``LENGTHS``: sentences of that padded
    length and a little less (a length bucket), random regular ids, on the GPU; with
    ``multiple``, the same sentences padded to the next multiple of it."""
    g = torch.Generator().manual_seed(seed)
    batches = []
    for width in LENGTHS:
        rows = MAX_TOKENS // width
        src, tgt = [], []
        for _ in range(rows):
            s = int(torch.randint(max(width - 5, 2), width + 1, (1,), generator=g))
            t = int(torch.randint(max(width - 5, 2), width, (1,), generator=g))
            src.append(torch.randint(4, VOCAB, (s,), generator=g).tolist())
            tgt.append(torch.randint(4, VOCAB, (t,), generator=g).tolist())
        batch = Batch(
            src=pad_to(pad(src), multiple),
            tgt_in=pad_to(pad([[BOS] + y for y in tgt]), multiple),
            tgt_out=pad_to(pad([y + [EOS] for y in tgt]), multiple),
            index=list(range(rows)),
        )
        batches.append(batch.to(torch.device(DEVICE)))
    return batches


def pad_to(ids: torch.Tensor, multiple: int) -> torch.Tensor:
    """``ids`` (B, T) padded at the end to a width that is a multiple of ``multiple``."""
    extra = -ids.size(1) % multiple
    return torch.nn.functional.pad(ids, (0, extra), value=PAD) if extra else ids


def peer_loss(model, batch):
    """The peers' loss as their users write it: full logits, padding dropped in the loss."""
    return label_smoothed_nll(model(batch.src, batch.tgt_in), batch.tgt_out, 0.1, PAD)


def make_step(model, loss):
    """One training step (bf16 autocast, the summed loss over its tokens, fused Adam)."""
    opt = torch.optim.AdamW(
        model.parameters(), lr=1e-5, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.0,
        fused=DEVICE == "cuda",
    )  # fmt: skip

    def step(batch) -> None:
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            value, _, n = loss(model, batch)
        (value / n).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def timed_step(step, batch) -> float:
    _, stop = timer()
    step(batch)
    return stop()


def step_flops(model, loss, batch) -> int:
    """Matmul FLOPs of one forward + backward (attention through its math kernel)."""
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            value, _, n = loss(model, batch)
        (value / n).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def cpu_chunked_loss(model, batch):
    """aiayn's loss with the CPU's chunking (LOSS_CHUNK_LOGITS a chunk, each recomputed)."""
    rows = objectives.loss_chunk_rows
    objectives.loss_chunk_rows = lambda unembed, states: max(
        objectives.LOSS_CHUNK_LOGITS // unembed.out_features, 1
    )
    try:
        return seq2seq_loss(model, batch, 0.1, PAD)
    finally:
        objectives.loss_chunk_rows = rows


def step_section(args, peak: float) -> dict:
    config = ModelConfig.preset(PRESET, vocab_size=VOCAB)
    batches = wmt_batches()
    tokens = [b.n_tokens for b in batches]
    torch.manual_seed(0)
    compiled_nll = torch.compile(label_smoothed_nll, dynamic=True)

    def aiayn_loss(model, batch):
        return seq2seq_loss(model, batch, 0.1, PAD)

    def aiayn_compiled_loss(model, batch):
        return seq2seq_loss(model, batch, 0.1, PAD, nll_fn=compiled_nll)

    def mask_tensor(loss):
        """``loss`` with the decoder's causal mask as a (B, 1, T, T) tensor, as before the
        kernel's own causal mask (``padded_right``)."""

        def with_tensor_mask(model, batch):
            decode = model.decode
            model.decode = lambda *a, **kw: decode(*a, **{**kw, "padded_right": False})
            try:
                return loss(model, batch)
            finally:
                del model.decode

        return with_tensor_mask

    ALL_KERNELS = [  # noqa: N806
        SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
        SDPBackend.MATH,
    ]  # fmt: skip

    def cudnn_attention(loss):
        """``loss`` with PyTorch's own choice of attention kernel (cuDNN's first on Hopper)."""

        def with_cudnn(model, batch):
            chosen = attention_module.CUDA_HALF_BACKENDS
            attention_module.CUDA_HALF_BACKENDS = ALL_KERNELS  # torch's own pick
            try:
                return loss(model, batch)
            finally:
                attention_module.CUDA_HALF_BACKENDS = chosen

        return with_cudnn

    # name: (the model, its loss, compiled, the batches' width a multiple of)
    entries = {
        "aiayn eager": (lambda: build_model(config), aiayn_loss, False, 1),
        "aiayn eager, mask tensor": (lambda: build_model(config), mask_tensor(aiayn_loss),
                                     False, 1),
        "aiayn eager, cuDNN attention": (lambda: build_model(config), cudnn_attention(aiayn_loss),
                                         False, 1),
        "aiayn compiled": (lambda: build_model(config), aiayn_compiled_loss, True, 1),
        "aiayn compiled, cuDNN attention": (lambda: build_model(config),
                                            cudnn_attention(aiayn_compiled_loss), True, 1),
        "aiayn compiled, mask tensor": (lambda: build_model(config),
                                        mask_tensor(aiayn_compiled_loss), True, 1),
        "aiayn compiled, widths x8": (lambda: build_model(config), aiayn_compiled_loss, True, 8),
        "aiayn eager, CPU loss chunks": (lambda: build_model(config), cpu_chunked_loss, False, 1),
        "marian": (lambda: Marian(config), peer_loss, False, 1),
        "torch.nn.Transformer": (lambda: TorchTransformer(config), peer_loss, False, 1),
    }  # fmt: skip
    if args.step_models:
        wanted = args.step_models.split(";")
        unknown = set(wanted) - set(entries)
        if unknown:
            raise SystemExit(f"--step-models: unknown {sorted(unknown)}; known: {list(entries)}")
        entries = {name: entries[name] for name in wanted}
    widths = {m: wmt_batches(multiple=m) if m > 1 else batches for *_, m in entries.values()}
    models, steps, out = {}, {}, {}
    for name, (build, loss, compiled, multiple) in entries.items():
        try:
            model = build().to(DEVICE).train()
            before = memory_allocated()
            reset_peak()
            batches = widths[multiple]
            if compiled:
                graphs0 = compiling.compiled_graphs()
                compiling.compile_layers(model)
                step = make_step(model, loss)
                first = time.perf_counter()
                step(batches[0])
                sync()
                first = time.perf_counter() - first
                warm = time.perf_counter()
                for b in batches[1:]:  # the other shapes: automatic dynamic shapes recompile
                    step(b)
                sync()
                out[name] = {
                    "first_step_s": first,
                    "other_shapes_s": time.perf_counter() - warm,
                    "graphs_after_warmup": compiling.compiled_graphs() - graphs0,
                }
            else:
                step = make_step(model, loss)
                for b in batches:
                    step(b)
                sync()
                out[name] = {}
            out[name]["peak_gb_above_weights"] = (peak_allocated() - before) / 1e9
            models[name], steps[name] = model, step
            print(f"{name}: ready", flush=True)
        except Exception as error:  # a peer that fails is recorded, the others go on
            traceback.print_exc()
            out[name] = {"error": f"{type(error).__name__}: {error}"[:500]}
    batches = widths[1] if 1 in widths else wmt_batches()
    times = {name: [] for name in steps}
    for _ in range(args.rounds):  # in turn, so that drift hits every model alike
        for name, step in steps.items():
            mine = widths[entries[name][3]]
            times[name].append(sum(timed_step(step, b) for b in mine))
    for name, runs in times.items():
        seconds = statistics.median(runs) / len(batches)
        out[name].update(
            step_s=seconds,
            tokens_per_s=sum(tokens) / (seconds * len(batches)),
            paper_100k_steps_h=seconds * PAPER_STEPS / 3600,
        )
    if "aiayn compiled" in out and "graphs_after_warmup" in out["aiayn compiled"]:
        out["aiayn compiled"]["graphs_after_rounds"] = compiling.compiled_graphs()
    # the counted FLOPs of each model's steps (on the unpadded widths: the useful work), over
    # the measured rate; every aiayn row does the eager model's work
    aiayn_flops = None
    for name in ("aiayn eager", "aiayn compiled", "marian", "torch.nn.Transformer"):
        if name not in models or "step_s" not in out[name]:
            continue
        if name.startswith("aiayn") and aiayn_flops is not None:
            flops = aiayn_flops
        else:
            loss = aiayn_loss if name.startswith("aiayn") else entries[name][1]
            model = models[name]
            if name == "aiayn compiled":  # count on a plain copy: the compiled layers hide ops
                model = build_model(config).to(DEVICE).train()
            flops = sum(step_flops(model, loss, b) for b in batches) / len(batches)
            if name.startswith("aiayn"):
                aiayn_flops = flops
        for row in out:
            if row.startswith("aiayn") if name.startswith("aiayn") else row == name:
                if "step_s" in out[row]:
                    out[row]["flops_per_step"] = flops
                    out[row]["mfu"] = flops / out[row]["step_s"] / peak
    if args.profile_step and "aiayn compiled" in steps:
        out["aiayn compiled"]["profile"] = profile_step(steps["aiayn compiled"], batches, args)
    record = {
        "batches": [[b.src.size(0), b.src.size(1), b.tgt_out.size(1)] for b in batches],
        "target_tokens": tokens,
        "models": out,
    }
    marian = out.get("marian", {}).get("tokens_per_s")
    if marian:
        for key, name in (
            ("eager_vs_marian", "aiayn eager"),
            ("compiled_vs_marian", "aiayn compiled"),
        ):
            if "tokens_per_s" in out.get(name, {}):
                record[key] = out[name]["tokens_per_s"] / marian
    if "mfu" in out.get("aiayn compiled", {}):
        record["mfu_compiled"] = out["aiayn compiled"]["mfu"]
    del models, steps
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    return record


# kernel names by kind, for the profile's share of GPU time (cuBLAS / CUTLASS matrix products,
# the fused attention kernels, Inductor's Triton kernels, the rest)
KERNEL_KINDS = (
    ("attention", ("flash", "fmha", "attention", "sdpa", "compute_dot_do_o")),
    ("matmul", ("gemm", "cutlass", "xmma", "nvjet", "cublas")),
    ("triton", ("triton",)),
    ("optimizer", ("adam",)),
)


def profile_step(step, batches, args) -> dict:
    """torch.profiler over one step per batch: GPU time by kernel kind (matrix products,
    attention, Inductor's fused kernels, the optimizer, the rest), the table written beside the
    record with --copy-to."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if DEVICE == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler:
        for b in batches:
            step(b)
        sync()
    events = profiler.key_averages()
    kinds: dict[str, float] = {}
    for e in events:
        us = getattr(e, "self_device_time_total", 0) or getattr(e, "self_cuda_time_total", 0)
        if not us or e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        name = e.key.lower()
        kind = next((k for k, words in KERNEL_KINDS if any(w in name for w in words)), "other")
        kinds[kind] = kinds.get(kind, 0.0) + us / 1e6
    total = sum(kinds.values())
    if args.copy_to:
        sort = "self_cuda_time_total" if DEVICE == "cuda" else "self_cpu_time_total"
        Path(args.copy_to).mkdir(parents=True, exist_ok=True)
        table = events.table(sort_by=sort, row_limit=40)
        (Path(args.copy_to) / "profile-step.txt").write_text(table)
    return {
        "gpu_s_per_step": total / len(batches),
        "share": {k: v / total for k, v in sorted(kinds.items())} if total else {},
    }


def attention_section(args) -> dict:
    """Each attention kernel (cuDNN, flash, memory-efficient, math) on its own, forward and
    backward in bf16, at the step section's batch shapes (8 heads of 64): self-attention with
    a key-padding mask (the encoder's, and cross-attention's) and with the causal mask left to
    the kernel (the decoder's). Milliseconds summed over the shapes; a kernel that refuses the
    inputs is named with its reason."""
    heads, d_head = 8, 64
    backends = {
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "math": SDPBackend.MATH,
    }
    g = torch.Generator().manual_seed(0)
    shapes = []
    for width in LENGTHS:
        rows = MAX_TOKENS // width
        lengths = torch.randint(max(width - 5, 2), width + 1, (rows,), generator=g)
        real = torch.arange(width)[None, :] < lengths[:, None]  # (B, S)
        shapes.append((rows, width, real[:, None, None, :].to(DEVICE)))  # (B, 1, 1, S)
    out = {}
    for kind in ("padding mask", "causal"):
        for name, backend in backends.items():
            total = 0.0
            try:
                for rows, width, mask in shapes:
                    q, k, v = (
                        torch.randn(rows, heads, width, d_head, device=DEVICE,
                                    dtype=torch.bfloat16, requires_grad=True)
                        for _ in range(3)
                    )  # fmt: skip
                    kw = {"attn_mask": mask} if kind == "padding mask" else {"is_causal": True}
                    grad = torch.randn_like(q)

                    def run(q=q, k=k, v=v, kw=kw, grad=grad, backend=backend):
                        with sdpa_kernel([backend]):
                            torch.nn.functional.scaled_dot_product_attention(
                                q, k, v, **kw
                            ).backward(grad)

                    for _ in range(3):
                        run()
                    times = []
                    for _ in range(args.rounds * 5):
                        _, stop = timer()
                        run()
                        times.append(stop())
                    total += statistics.median(times)
                out[f"{kind}, {name}"] = {"ms": total * 1e3}
            except RuntimeError as error:  # this kernel does not take these inputs
                out[f"{kind}, {name}"] = {"error": str(error).splitlines()[0][:200]}
    return out


def memory_allocated() -> int:
    return torch.cuda.memory_allocated() if DEVICE == "cuda" else 0


def reset_peak() -> None:
    if DEVICE == "cuda":
        torch.cuda.reset_peak_memory_stats()


def peak_allocated() -> int:
    return torch.cuda.max_memory_allocated() if DEVICE == "cuda" else 0


def decode_section(args) -> dict:
    from aiayn.config import DataConfig
    from aiayn.data.parallel import load_texts
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.evaluate import bleu_chrf
    from aiayn.infer.beam import beam_decode
    from aiayn.infer.greedy import greedy_decode
    from aiayn.modeldir import load_model_dir
    from decode_speed import marian_generate, token_lists
    from peers import marian_from

    directory = ROOT / "models" / "ding-de-en"
    model = load_model_dir(directory, device=DEVICE)
    tokenizer = Tokenizer.load(directory)
    corpus = json.loads((directory / "run.json").read_text())["data"]["corpus"]
    pairs = load_texts(DataConfig(corpus=corpus), "test")[: args.sentences]
    ids = [x + [EOS] for x in tokenizer.encode([s for s, _ in pairs])]
    size = args.decode_batch
    batches = [pad(ids[i : i + size]) for i in range(0, len(ids), size)]
    references = [t for _, t in pairs]
    peer = marian_from(model).to(DEVICE).eval()
    half = build_model(model.config).to(torch.bfloat16)
    half.load_state_dict(model.state_dict())
    half = half.to(DEVICE).eval()
    batches = [b.to(DEVICE) for b in batches]
    rows = {
        "greedy, aiayn": lambda s: greedy_decode(model, s),
        "greedy, aiayn bf16": lambda s: greedy_decode(half, s),
        "greedy, marian": lambda s: marian_generate(peer, s, 1),
        "beam 4, aiayn": lambda s: beam_decode(model, s, beam=4, alpha=0.6),
        "beam 4, aiayn bf16": lambda s: beam_decode(half, s, beam=4, alpha=0.6),
        "beam 4, marian": lambda s: marian_generate(peer, s, 4),
    }
    for fn in rows.values():  # warm-up: kernels, cuBLAS handles
        fn(batches[0][:8])
    sync()
    seconds = {name: [] for name in rows}
    outputs = {}
    for _ in range(args.rounds):
        for name, fn in rows.items():
            start = time.perf_counter()
            outs = [fn(src) for src in batches]
            sync()
            seconds[name].append(time.perf_counter() - start)
            outputs[name] = [ids for out in outs for ids in token_lists(_to_cpu(out))]
    n = sum(b.size(0) for b in batches)
    out = {}
    for name in rows:
        scores = bleu_chrf(tokenizer.decode(outputs[name]), references)
        out[name] = {
            "sentences_per_s": n / statistics.median(seconds[name]),
            "bleu": scores["bleu"],
            "chrf": scores["chrf"],
        }
    for kind in ("greedy", "beam 4"):
        base = outputs[f"{kind}, aiayn"]
        for other in (f"{kind}, aiayn bf16", f"{kind}, marian"):
            out[other]["same_as_aiayn_fp32"] = sum(
                a == b for a, b in zip(outputs[other], base, strict=True)
            )
    return {
        "sentences": n,
        "batch": args.decode_batch,
        "decoders": out,
        "greedy_vs_marian": out["greedy, aiayn"]["sentences_per_s"]
        / out["greedy, marian"]["sentences_per_s"],
        "beam4_vs_marian": out["beam 4, aiayn"]["sentences_per_s"]
        / out["beam 4, marian"]["sentences_per_s"],
    }


def _to_cpu(out):
    return out.cpu() if torch.is_tensor(out) else out


def loop_run(args, name: str, extra: list[str]) -> dict:
    """``aiayn train`` for --loop-seconds of training on a copy of the prepared run."""
    run = Path(args.work) / name
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(args.loop_run, run)
    # a compiled run's first step (its compilation) counts in its training time
    seconds = args.loop_seconds + (args.compile_allowance if "compile" in name else 0)
    settings = {
        "train.max_minutes": str(seconds / 60),
        "train.log_every": "20",
        "train.checkpoint_every": "100000",
        "train.average_last": "0",
        **({"model.preset": '"tiny"', "train.max_tokens": "500"} if DEVICE == "cpu" else {}),
        **dict(s.split("=", 1) for s in extra),
    }
    cmd = [sys.executable, "-m", "aiayn.cli", "train", str(ROOT / "configs" / "base-wmt.toml")]
    cmd += ["--out", str(run), "--quiet"]
    corpus = json.loads((Path(args.loop_run) / "run.json").read_text())["data"]
    for key in ("corpus", "src_lang", "tgt_lang"):
        cmd += ["--set", f'data.{key}="{corpus[key]}"']
    for key, value in settings.items():
        cmd += ["--set", f"{key}={value}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    free_gb = None
    if DEVICE == "cuda":  # this process's cached memory would shrink the run's loss chunks
        torch.cuda.empty_cache()
        free_gb = torch.cuda.mem_get_info()[0] / 1e9
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if not (run / "metrics.jsonl").is_file():
        return {"exit": done.returncode, "wall_s": wall, "stderr": done.stderr[-3000:]}
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    windows = [r for r in records if "tokens_per_s" in r]
    steady = windows[len(windows) // 3 :] or windows  # after the first steps' warm-up
    finish = next((r for r in records if r.get("event") == "finish"), {})
    compile_event = next((r for r in records if r.get("event") == "compile"), None)
    result = {
        "exit": done.returncode,
        "gpu_free_gb_at_start": free_gb,
        "wall_s": wall,
        "steps": finish.get("step"),
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in steady) if steady else None,
        "data_wait_share": statistics.median(r["data_wait_share"] for r in steady)
        if steady
        else None,
        "valid_loss": finish.get("valid_loss"),
        "compile": compile_event,
        "compiled_graphs_last": steady[-1].get("compiled_graphs") if steady else None,
    }
    if done.returncode:
        result["stderr"] = done.stderr[-2000:]
    return result


def loop_section(args, step: dict) -> dict:
    out = {"eager": loop_run(args, "loop-eager", [])}
    out["compiled"] = loop_run(args, "loop-compiled", ["train.compile=true"])
    models = step.get("models", {})
    for kind, name in (("eager", "aiayn eager"), ("compiled", "aiayn compiled")):
        isolated = models.get(name, {}).get("tokens_per_s")
        if isolated and out[kind].get("tokens_per_s"):
            out[kind]["vs_isolated_step"] = out[kind]["tokens_per_s"] / isolated
    return out


def profile_section(args) -> dict:
    """The real loop's steps in this process: each step's seconds, the loss's chunking, a
    profile of a few steps (written beside the record with --copy-to), and the isolated
    step (``make_step``) on the same run's own first batches, for comparison."""
    from aiayn.config import load_run_config
    from aiayn.train.loop import Trainer

    run = Path(args.work) / "profile"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(args.loop_run, run)
    corpus = json.loads((Path(args.loop_run) / "run.json").read_text())["data"]
    overrides = [f'data.{key}="{corpus[key]}"' for key in ("corpus", "src_lang", "tgt_lang")]
    overrides += ["train.max_steps=60", "train.log_every=20", "train.checkpoint_every=100000"]
    overrides += ["train.average_last=0"]
    if DEVICE == "cpu":
        overrides += ['model.preset="tiny"', "train.max_tokens=500"]
    trainer = Trainer(load_run_config(ROOT / "configs" / "base-wmt.toml", overrides), run,
                      progress=False)  # fmt: skip
    chunks, seconds = [], []
    rows_of = objectives.loss_chunk_rows

    def spy(unembed, states):
        rows = rows_of(unembed, states)
        chunks.append((states.size(0), rows))
        return rows

    activities = [torch.profiler.ProfilerActivity.CPU]
    if DEVICE == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    schedule = torch.profiler.schedule(wait=30, warmup=3, active=6, repeat=1)
    step = trainer.train_step
    with torch.profiler.profile(activities=activities, schedule=schedule) as profiler:

        def timed(group):
            began = time.perf_counter()
            result = step(group)
            seconds.append(time.perf_counter() - began)
            profiler.step()
            return result

        trainer.train_step = timed
        objectives.loss_chunk_rows = spy
        try:
            trainer.fit()
        finally:
            objectives.loss_chunk_rows = rows_of
    loop_seconds = list(seconds)  # the loop's steps (the calls below are timed apart)
    sort = "cuda_time_total" if DEVICE == "cuda" else "cpu_time_total"
    table = profiler.key_averages().table(sort_by=sort, row_limit=30)
    cpu_table = profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=20)
    if args.copy_to:
        Path(args.copy_to).mkdir(parents=True, exist_ok=True)
        (Path(args.copy_to) / "profile.txt").write_text(table + "\n\n" + cpu_table)
    allocator = {}
    if DEVICE == "cuda":  # the caching allocator's trips to the driver (each a possible sync)
        stats = torch.cuda.memory_stats()
        allocator = {
            k: stats.get(k)
            for k in ("num_alloc_retries", "num_device_alloc", "num_device_free",
                      "num_sync_all_streams", "reserved_bytes.all.peak")
        }  # fmt: skip
    batches = [b.to(torch.device(DEVICE)) for b in trainer.task.train_batches(0)[:6]]
    trainer.model.train()  # the trainer's own step on the same batches, no loop around it
    for b in batches:
        trainer.train_step([b])
    sync()
    trainer_times = []
    for _ in range(3):
        began = time.perf_counter()
        for b in batches:
            trainer.train_step([b])
        sync()
        trainer_times.append((time.perf_counter() - began) / len(batches))
    model = build_model(trainer.model_config).to(DEVICE).train()
    isolated = make_step(model, lambda m, b: seq2seq_loss(m, b, 0.1, PAD))
    for b in batches:
        isolated(b)
    times = [sum(timed_step(isolated, b) for b in batches) / len(batches) for _ in range(3)]
    steady = loop_seconds[10:] or loop_seconds
    return {
        "loop_step_s": statistics.median(steady),
        "loop_steps": len(loop_seconds),
        "isolated_step_s_same_batches": statistics.median(times),
        "trainer_step_s_same_batches": statistics.median(trainer_times),
        "allocator": allocator,
        "batch_shapes": [[b.src.size(0), b.src.size(1), b.tgt_out.size(1)] for b in batches],
        "loss_chunks": chunks[-5:],
        "multi_chunk_steps": sum(1 for n, rows in chunks if n > rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", default="step,decode,loop")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--decode-batch", type=int, default=128)
    parser.add_argument("--loop-run", default="runs/gpu-run", help="a prepared run directory")
    parser.add_argument("--loop-seconds", type=float, default=90.0)
    parser.add_argument("--compile-allowance", type=float, default=45.0,
                        help="seconds added to the compiled run's training time")  # fmt: skip
    parser.add_argument(
        "--step-models", default="", help="the step section's rows, separated by ; (default: all)"
    )
    parser.add_argument(
        "--profile-step",
        action="store_true",
        help="profile the compiled step (GPU time by kernel kind)",
    )
    parser.add_argument("--work", default="/tmp/aiayn-gpu-bench")
    parser.add_argument("--copy-to", help="also write the record into this directory")
    parser.add_argument("--smoke", action="store_true", help="the tiny preset on the CPU")
    args = parser.parse_args()
    global DEVICE, PRESET, VOCAB, MAX_TOKENS, LENGTHS
    if args.smoke:
        DEVICE, PRESET, VOCAB, MAX_TOKENS, LENGTHS = "cpu", "tiny", 500, 600, (9, 17)
        args.sentences, args.rounds, args.loop_seconds = 16, 1, 6
    elif not torch.cuda.is_available():
        sys.exit("bench/gpu.py needs a CUDA device (--smoke checks it on the CPU)")
    torch.backends.cuda.matmul.allow_tf32 = True
    sections = args.sections.split(",")
    peak = bf16_matmul_rate(512 if args.smoke else 8192)
    record: dict = {
        "gpu": torch.cuda.get_device_name() if DEVICE == "cuda" else None,
        "torch": torch.__version__,
        "bf16_matmul_tflops": peak / 1e12,
    }
    print(f"{record['gpu']}, torch {record['torch']}: bf16 {peak / 1e12:.0f} TFLOP/s", flush=True)
    for section in sections:
        began = time.perf_counter()
        try:
            if section == "step":
                record["step"] = step_section(args, peak)
                for key in ("eager_vs_marian", "compiled_vs_marian", "mfu_compiled"):
                    if key in record["step"]:
                        record[key] = record["step"][key]
            elif section == "attention":
                record["attention"] = attention_section(args)
            elif section == "decode":
                record["decode"] = decode_section(args)
                record["beam4_vs_marian"] = record["decode"]["beam4_vs_marian"]
                record["greedy_vs_marian"] = record["decode"]["greedy_vs_marian"]
            elif section == "profile":
                record["profile"] = profile_section(args)
            elif section == "loop":
                record["loop"] = loop_section(args, record.get("step", {}))
        except Exception as error:
            traceback.print_exc()
            record[section] = {"error": f"{type(error).__name__}: {error}"[:500]}
        print(f"{section}: {time.perf_counter() - began:.0f} s", flush=True)
        print(json.dumps(record.get(section), indent=1, default=str)[:6000], flush=True)
    if args.smoke:
        print("smoke run: no record written")
        return
    path = write_result("gpu", record)
    if args.copy_to:
        Path(args.copy_to).mkdir(parents=True, exist_ok=True)
        line = path.read_text().splitlines()[-1]
        (Path(args.copy_to) / "gpu.jsonl").write_text(line + "\n")
    summary = {k: record.get(k) for k in
               ("eager_vs_marian", "compiled_vs_marian", "mfu_compiled", "beam4_vs_marian",
                "greedy_vs_marian")}  # fmt: skip
    print(json.dumps(summary), flush=True)
    if any(isinstance(v, float) and math.isnan(v) for v in summary.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
