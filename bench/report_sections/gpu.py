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


def render(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "gpu"), lambda r: r.get("gpu")):
        head = (
            provenance(record, "bench/gpu.py")
            + f"\n- GPU: {record['gpu']}, torch {record['torch']}, bf16 products measured at "
            f"{num(record['bf16_matmul_tflops'])} TFLOP/s"
        )
        body = [head]
        step = record.get("step", {})
        if "models" in step:
            rows = [
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
            compiled = step["models"].get("aiayn compiled", {})
            body.append(
                f"The base model's bf16 training step on {len(step['batches'])} batches of "
                f"{num(min(step['target_tokens']))}-{num(max(step['target_tokens']))} target "
                "tokens (one per sentence length), median of the rounds:\n\n"
                + table(
                    [
                        "model",
                        "target tokens/s",
                        "s per step",
                        "MFU",
                        "peak GB above weights",
                        "100k steps (h)",
                    ],
                    rows,
                    {1, 2, 3, 4, 5},
                )  # fmt: skip
                + f"\n\naiayn eager against `MarianMTModel`: {record['eager_vs_marian']:.2f}x; "
                f"compiled: {record['compiled_vs_marian']:.2f}x (target tokens/s). The first "
                f"compiled step took {num(compiled.get('first_step_s'), 1)} s; "
                f"{compiled.get('graphs_after_rounds', '?')} graphs were compiled for the "
                f"{len(step['batches'])} shapes."
            )
        decode = record.get("decode", {})
        if "decoders" in decode:
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
            body.append(
                f"The shipped model on its test split ({decode['sentences']} sentences, batches "
                f"of {decode['batch']}):\n\n"
                + table(
                    ["decoder", "sentences/s", "BLEU", "chrF", "same as aiayn float32"],
                    rows,
                    {1, 2, 3, 4},
                )
                + f"\n\nGreedy against `MarianMTModel.generate`: "
                f"{decode['greedy_vs_marian']:.2f}x; beam 4: {decode['beam4_vs_marian']:.2f}x."
            )
        loop = record.get("loop", {})
        if "eager" in loop:
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
            body.append(
                "`aiayn train configs/base-wmt.toml` on a prepared run (a corpus at WMT14's "
                "lengths), each run for the same training time:\n\n"
                + table(
                    [
                        "run",
                        "steps",
                        "target tokens/s",
                        "of the isolated step",
                        "data wait",
                        "valid loss",
                    ],
                    rows,
                    {1, 2, 3, 4, 5},
                )  # fmt: skip
            )
        parts.append("\n\n".join(body))
    return "\n\n".join(parts)
