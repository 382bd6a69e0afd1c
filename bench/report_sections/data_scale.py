"""Data path at scale: bench/scale.py's time and memory of the tokenizer, the token store and
the first training steps by corpus size, and how each grows with it."""

from __future__ import annotations

from pathlib import Path

from .common import latest_by, load, num, pct, provenance, table

TITLE = "Data path at scale"
INTRO = (
    "`bench/scale.py`: corpora of N pairs at WMT14 English-German's sentence lengths, "
    "each through the tokenizer's training, the token store's encoding (`aiayn train "
    "--prepare-only`) and the first training steps of the base model, each in its own "
    "process."
)


def render(results: Path) -> str:
    every = load(results, "scale")
    records = latest_by(every, lambda r: (r["pairs"], r.get("config")))
    records = sorted((r for r in records if r["pairs"]), key=lambda r: r["pairs"])
    if not records:
        return ""
    base = next((r["baseline_train"] for r in reversed(every) if r.get("baseline_train")), None)
    rows = []
    for r in records:
        train, two = r["train_1"], r.get("train_2") or {}
        if not two:  # two processes were not run this time: the latest run that had them
            earlier = [x for x in every if x["pairs"] == r["pairs"] and x.get("train_2")]
            two = earlier[-1]["train_2"] if earlier else {}
        over = r.get("data_rss_mb")
        if over is None and base is not None:
            over = train["peak_rss_mb"] - base["peak_rss_mb"]
        rows.append(
            [
                num(r["pairs"]),
                num(r["tokenizer"]["wall_s"]),
                num(r["tokenizer"]["peak_rss_mb"]),
                num(r["encoding"]["wall_s"]),
                num(r["encoding"]["peak_rss_mb"]),
                f"{r['store']['bytes'] / 1e6:,.0f} ({r['store']['ratio']:.3f}x)",
                num(train["first_step_s"], 1)
                + (f" / {num(r['resume_1']['first_step_s'], 1)}" if "resume_1" in r else ""),
                num(train["peak_rss_mb"]),
                num(over),
                ", ".join(num(x) for x in two.get("rank_peak_rss_mb", [])) or "n/a",
                pct(train.get("data_wait_share")),
            ]
        )
    header = [
        "pairs",
        "tokenizer s",
        "tokenizer RSS MB",
        "encoding s",
        "encoding RSS MB",
        "store MB (x ids)",
        "to first step s (resumed)",
        "train RSS MB",
        "over baseline MB",
        "2 ranks: RSS MB each*",
        "data wait",
    ]
    extrapolated = 36_000_000  # WMT14 English-French
    if len(records) > 1 and records[-1]["pairs"] < extrapolated:
        a, b = records[-2], records[-1]

        def at(get) -> float:  # the line through the two largest measured sizes
            slope = (get(b) - get(a)) / (b["pairs"] - a["pairs"])
            return get(b) + slope * (extrapolated - b["pairs"])

        store_mb = at(lambda r: r["store"]["bytes"]) / 1e6
        rows.append(
            [
                f"{num(extrapolated)} (extrapolated)",
                num(at(lambda r: r["tokenizer"]["wall_s"])),
                num(at(lambda r: r["tokenizer"]["peak_rss_mb"])),
                num(at(lambda r: r["encoding"]["wall_s"])),
                num(at(lambda r: r["encoding"]["peak_rss_mb"])),
                f"{store_mb:,.0f}",
                "",
                "",
                "",
                "",
                "",
            ]
        )
    growth = ""
    if len(records) > 1:
        a, b = records[0], records[-1]
        scale = b["pairs"] / a["pairs"]

        def rate(get) -> str:
            return f"{get(b) / max(get(a), 1e-9):.2f}x"

        growth = (
            f"\n\nFrom {num(a['pairs'])} to {num(b['pairs'])} pairs ({scale:.0f}x): tokenizer "
            f"time {rate(lambda r: r['tokenizer']['wall_s'])}, encoding time "
            f"{rate(lambda r: r['encoding']['wall_s'])}, store size "
            f"{rate(lambda r: r['store']['bytes'])}, time to the first step "
            f"{rate(lambda r: r['train_1']['first_step_s'])}, training peak RSS "
            f"{rate(lambda r: r['train_1']['peak_rss_mb'])}."
        )
    note = (
        f' "Over baseline" is the training RSS less that of the same run on '
        f"{num(base.get('pairs', 20000))} pairs ({num(base['peak_rss_mb'])} MB): what the data "
        "adds as the corpus grows."
        if base
        else ""
    )
    runs = []  # each run of the script behind the rows, newest first
    for r in reversed(records):
        if (r.get("command"), r.get("commit")) not in [
            (x.get("command"), x.get("commit")) for x in runs
        ]:
            runs.append(r)
    return (
        "\n\n".join(
            f"Pairs {', '.join(num(x['pairs']) for x in records if (x.get('command'), x.get('commit')) == (r.get('command'), r.get('commit')))}:\n\n"
            + provenance(r, "bench/scale.py")
            for r in runs
        )
        + f"\n\nConfig `{records[-1].get('config')}`"
        + "".join(f", `{o}`" for o in records[-1].get("overrides", []))
        + f", batches of {num(records[-1].get('max_tokens'))} tokens; peak RSS from "
        + "`/usr/bin/time -v` "
        + "(each torchrun rank's from /proc)."
        + note
        + "\n\n"
        + table(header, rows, set(range(11)))
        + "\n\n\\* From the latest record of that size that ran two processes (all are in "
        "bench/results/scale.jsonl)."
        + growth
        + (
            " The 36M row (WMT14 English-French) continues the line through the two largest "
            "measured sizes for the data's own processes; it was not run. The training "
            "process keeps no per-example structure (its data memory is the batches in "
            "flight and the store pages read since the last release), so its RSS is not "
            "extrapolated: it moves by a few hundred MB between runs of the same job, with "
            "what glibc's heap keeps of freed activations (see the experiment \"Heap memory "
            'in training"), more than the data adds.'
            if len(records) > 1
            else ""
        )
    )
