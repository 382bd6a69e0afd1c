"""On a GPU: bench/gpu.py's training step, decoding and training loop against their peers,
the latest record for each GPU."""

from __future__ import annotations

from pathlib import Path

from .common import latest_by, load, num, pct, provenance, table

TITLE = "On a GPU"
INTRO = (
    "`bench/gpu.py`: the paper's base model (a 37,000-token vocabulary) trained and the "
    "shipped model decoding on one GPU, against Hugging Face `MarianMTModel` and "
    "`torch.nn.Transformer` of the same sizes, timed in turn in one process on the same "
    "inputs; each with fused Adam and the same label-smoothed loss; model FLOPs "
    "utilisation against the bf16 product rate measured in the same run. How to train "
    "and decode on a GPU: [gpus.md](gpus.md)."
)


def latest_with(records: list, key: str):
    """The latest of ``records`` (oldest first) that holds ``key``, or None."""
    return next((r for r in reversed(records) if key in r), None)


def render(results: Path) -> str:
    parts = []
    records = load(results, "gpu")
    for gpu in [r.get("gpu") for r in latest_by(records, lambda r: r.get("gpu"))]:
        mine = [r for r in records if r.get("gpu") == gpu]
        body = [f"**{gpu}**"]
        record = latest_with(mine, "compiled_vs_marian")
        if record is not None:
            body.append(step_part(record))
        levers = [r for r in mine if "step" in r and "note" in r]
        if levers:
            body.append(levers_part(levers))
        record = latest_with(mine, "attention")
        if record is not None:
            body.append(attention_part(record))
        record = latest_with(mine, "decode")
        if record is not None and "decoders" in record["decode"]:
            body.append(decode_part(record))
        record = latest_with(mine, "profile")
        if record is not None and "loop_step_s" in record["profile"]:
            body.append(profile_part(record))
        record = latest_with(mine, "loop")
        if record is not None and "eager" in record["loop"]:
            body.append(loop_part(record))
        parts.append("\n\n".join(body))
    return "\n\n".join(parts)


def head(record) -> str:
    return (
        provenance(record, "bench/gpu.py")
        + f"\n- GPU: {record['gpu']}, torch {record['torch']}, bf16 products measured at "
        f"{num(record['bf16_matmul_tflops'])} TFLOP/s"
    )


def step_rows(step) -> list:
    return [
        [
            name,
            num(m.get("tokens_per_s")),
            num(m.get("step_s"), 3),
            pct(m.get("mfu")),
            num(m.get("peak_gb_above_weights"), 1),
            num(m.get("paper_100k_steps_h"), 2),
        ]
        for name, m in step["models"].items()
        if "step_s" in m
    ]


STEP_HEADER = [
    "model",
    "target tokens/s",
    "s per step",
    "MFU",
    "peak GB above weights",
    "100k steps (h)",
]


def step_part(record) -> str:
    step = record["step"]
    compiled = step["models"].get("aiayn compiled", {})
    return (
        head(record)
        + f"\n\nThe base model's bf16 training step on {len(step['batches'])} batches of "
        f"{num(min(step['target_tokens']))}-{num(max(step['target_tokens']))} target "
        "tokens (one per sentence length), median of the rounds:\n\n"
        + table(STEP_HEADER, step_rows(step), {1, 2, 3, 4, 5})
        + f"\n\naiayn eager against `MarianMTModel`: {record['eager_vs_marian']:.2f}x; "
        f"compiled: {record['compiled_vs_marian']:.2f}x (target tokens/s). The first "
        f"compiled step took {num(compiled.get('first_step_s'), 1)} s; "
        f"{compiled.get('graphs_after_rounds', '?')} graphs were compiled for the "
        f"{len(step['batches'])} shapes."
    )


def levers_part(records) -> str:
    """Each run that compared a lever with the code before it, in one process."""
    out = ["What each lever gave (each table one process, its rows on the same batches):"]
    for record in records:
        text = f"- {record['time'][:16]}, commit {record.get('commit')}: {record['note']}"
        profile = record["step"]["models"].get("aiayn compiled", {}).get("profile")
        if profile:
            shares = ", ".join(f"{k} {pct(v)}" for k, v in profile["share"].items())
            text += (
                f". GPU time of the compiled step: {num(profile['gpu_s_per_step'] * 1e3, 1)} ms"
                f" ({shares})"
            )
        out.append(text + "\n\n" + table(STEP_HEADER, step_rows(record["step"]), {1, 2, 3, 4, 5}))
    return "\n\n".join(out)


def attention_part(record) -> str:
    kinds = ("padding mask", "causal")
    kernels = ("cudnn", "flash", "efficient", "math")
    rows = []
    for kernel in kernels:
        row = [kernel]
        for kind in kinds:
            entry = record["attention"].get(f"{kind}, {kernel}", {})
            row.append(num(entry["ms"], 2) if "ms" in entry else "refused")
        rows.append(row)
    return (
        f"Attention alone ({record['time'][:16]}), bf16 forward and backward at the step's "
        "shapes, 8 heads of 64, ms summed over the shapes:\n\n"
        + table(["kernel", "key-padding mask", "causal (the kernel's)"], rows, {1, 2})
    )


def decode_part(record) -> str:
    decode = record["decode"]
    rows = [
        [
            name,
            num(d["sentences_per_s"]),
            num(d["bleu"], 2),
            num(d["chrf"], 2),
            num(d.get("same_as_aiayn_fp32")) if "same_as_aiayn_fp32" in d else "",
        ]
        for name, d in decode["decoders"].items()
    ]
    return (
        f"The shipped model on its test split ({decode['sentences']} sentences, batches "
        f"of {decode['batch']}; {record['time'][:16]}, commit {record.get('commit')}):\n\n"
        + table(
            ["decoder", "sentences/s", "BLEU", "chrF", "same as aiayn float32"],
            rows,
            {1, 2, 3, 4},
        )
        + f"\n\nGreedy against `MarianMTModel.generate`: "
        f"{decode['greedy_vs_marian']:.2f}x; beam 4: {decode['beam4_vs_marian']:.2f}x."
    )


def profile_part(record) -> str:
    profile = record["profile"]
    loop, alone = profile["loop_step_s"], profile["isolated_step_s_same_batches"]
    return (
        f"The real loop's steps ({record['time'][:16]}, eager, {profile['loop_steps']} steps of "
        f"`aiayn train configs/base-wmt.toml` in the bench's process): "
        f"{num(loop, 3)} s a step in the loop, against {num(alone, 3)} s for the isolated step "
        f"and {num(profile['trainer_step_s_same_batches'], 3)} s for the trainer's own step "
        f"on the same batches outside the loop ({alone / loop:.2f}x); losses in one piece "
        f"({profile['multi_chunk_steps']} steps chunked)."
    )


def loop_part(record) -> str:
    loop = record["loop"]
    rows = [
        [
            kind,
            num(run.get("steps")),
            num(run.get("tokens_per_s")),
            f"{run['vs_isolated_step']:.2f}x" if "vs_isolated_step" in run else "",
            pct(run.get("data_wait_share")),
            num(run.get("valid_loss"), 2),
        ]
        for kind, run in loop.items()
        if "tokens_per_s" in run
    ]
    return (
        f"`aiayn train configs/base-wmt.toml` on a prepared run ({record['time'][:16]}; a "
        "corpus at WMT14's lengths), each run for the same training time:\n\n"
        + table(
            ["run", "steps", "target tokens/s", "of the isolated step", "data wait", "valid loss"],
            rows,
            {1, 2, 3, 4, 5},
        )
    )
