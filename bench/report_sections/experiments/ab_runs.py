"""Kept changes: the A/B runs of decoding and training changes (ab_decode.py,
ab_train_loss.py), those kept and those measured and dropped."""

from __future__ import annotations

from pathlib import Path

from ..common import latest_by, load, table

TITLE = "Kept changes (A/B runs)"
INTRO = "Changes to decoding and training kept because an A/B run showed they paid."


def render(results: Path) -> str:
    decode = latest_by(
        load(results, "decode_ab"),
        lambda r: (r["before"], r["after"], r["mode"], r.get("int8", False), r.get("note")),
    )
    kept = [r for r in decode if r.get("kept", True)]
    rows = [
        [
            r.get("note", ""),
            _ab_measured_on(r),
            f"`{r['before']}` -> `{r['after']}`",
            _ab_ratio(r["ratio"]),
            r["time"].replace("T", " "),
        ]
        for r in kept
    ]
    train = latest_by(load(results, "train_loss_ab"), lambda r: (r["before"], r["preset"]))
    rows += [
        [
            r.get("note", "label-smoothed loss without an (n, V) mask"),  # the first such run
            f"training step, {r['preset']} preset",
            f"`{r['before']}` -> the change",
            f"{1 / r['median_ratio']:.2f}x",
            r["time"].replace("T", " "),
        ]
        for r in train
    ]
    if not rows:
        return ""
    dropped = [
        [
            r.get("note", ""),
            _ab_measured_on(r),
            f"`{r['before']}` -> `{r['after']}`",
            _ab_ratio(r["ratio"]),
            r["time"].replace("T", " "),
        ]
        for r in decode
        if not r.get("kept", True)
    ]
    machines = {r["machine"].get("cpu", "?") for r in decode + train}
    not_kept = ""
    if dropped:
        not_kept = (
            "\n\nMeasured the same way and not kept (the speed-up did not pay for the change):"
            "\n\n" + table(["change", "measured on", "versions", "speed-up", "date"], dropped, {3})
        )
    return (
        "Decoding: `python bench/experiments/ab_decode.py BEFORE AFTER --mode MODE` (each "
        "version in its own process, in turn, generated tokens per CPU second, median of the "
        "rounds; `--mode step`: CPU time of one greedy step, one speed-up per batch size); training: `python bench/experiments/ab_train_loss.py BEFORE` (median of the "
        "rounds, both losses timed alternately in one process). A speed-up above 1 means the "
        f"change made it faster. CPU: {', '.join(sorted(machines))}; the runs before "
        "2026-11-23 18:00 recorded neither their arguments nor the CPU's vector units.\n\n"
        + table(["change", "measured on", "versions", "speed-up", "date"], rows, {3})
        + not_kept
    )


def _ab_measured_on(record: dict) -> str:
    if record["mode"] == "step":  # --mode step: one greedy step at a few batch sizes
        return f"greedy step, {record['rows']} rows" + (", int8" if record.get("int8") else "")
    return record["mode"] + (", int8" if record.get("int8") else "")


def _ab_ratio(ratio: float | dict) -> str:
    """The speed-up, or one per batch size (rows) for a --mode step run."""
    if isinstance(ratio, dict):
        return ", ".join(f"{r:.2f}x" for r in ratio.values())
    return f"{ratio:.2f}x"
