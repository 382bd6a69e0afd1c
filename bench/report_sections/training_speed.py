"""Training speed: aiayn against `torch.nn.Transformer` and `MarianMTModel` of the same sizes
(bench/train_speed.py), with model FLOPs utilisation, the latest record per presets and threads."""

from __future__ import annotations

from pathlib import Path

from .common import latest_by, load, num, pct, provenance, table

TITLE = "Training speed"
INTRO = (
    "The same encoder-decoder sizes, batches, loss (label smoothing 0.1), optimizer (Adam "
    "0.9/0.98) and threads for aiayn, `torch.nn.Transformer` with the paper's embeddings "
    "and output layer, and Hugging Face `MarianMTModel`, timed alternately in one process. "
    "Model FLOPs are counted by `torch.utils.flop_counter`."
)


def render(results: Path) -> str:
    records = load(results, "train_speed")
    key = lambda r: (tuple(x["preset"] for x in r["results"]), r["machine"].get("torch_threads"))  # noqa: E731
    parts = []
    for record in latest_by(records, key):
        for result in record["results"]:
            aiayn = result["rows"]["aiayn"]
            rows = [
                [
                    {
                        "aiayn": "aiayn",
                        "torch": "`torch.nn.Transformer`",
                        "marian": "`MarianMTModel`",
                    }.get(name, name),
                    num(row["tokens_per_s"]),
                    num(row["step_s"], 2),
                    pct(row.get("mfu")),
                    num(row.get("peak_memory_mb")),
                ]
                for name, row in result["rows"].items()
            ]
            ratios = (
                f"aiayn against `torch.nn.Transformer`: {aiayn['speedup_vs_torch']:.2f}x; "
                f"against `MarianMTModel`: {aiayn['speedup_vs_marian']:.2f}x (target tokens/s)."
            )
            parts.append(
                f"`{result['preset']}` preset, {record['machine'].get('torch_threads', '?')} "
                f"threads, {result['batches']} batches of the Ding training "
                f"split ({num(result['target_tokens'])} target tokens), best of "
                f"{record.get('repeats', '?')}; model FLOPs utilisation against the best fp32 "
                f"matmul rate measured in the same run ({num(record['peak_matmul_flops'] / 1e9)} "
                "GFLOP/s):\n\n"
                + provenance(record, "bench/train_speed.py")
                + "\n\n"
                + table(
                    ["model", "target tokens/s", "s per step", "MFU", "peak memory (MB)"],
                    rows,
                    {1, 2, 3, 4},
                )
                + "\n\n"
                + ratios
            )
    return "\n\n".join(parts)
