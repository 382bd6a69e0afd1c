"""Write docs/performance.md from the benchmark records in bench/results/*.jsonl.

    python bench/report.py                 # rewrite docs/performance.md
    python bench/report.py --check         # exit 1 if the page differs from the records

Every table shows the current record of one comparison (the latest for its settings: model,
threads, preset, ...) and names its command, date, CPU and commit; older records stay in the
results files as history. A record written before a field was recorded (the command, the
commit, the CPU's vector units) shows "not recorded" there. Standard library only, so the
test that compares the page with the records runs in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "performance.md"

Record = dict


def load(results: Path, name: str) -> list[Record]:
    """The records of ``results/NAME.jsonl``, oldest first (an absent file: none)."""
    path = results / f"{name}.jsonl"
    if not path.is_file():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{number}: not a JSON record ({e.msg})") from None
    return sorted(records, key=lambda r: r.get("time", ""))


def latest(results: Path, name: str) -> Record | None:
    """The newest record of ``results/NAME.jsonl`` (None: there is none)."""
    records = load(results, name)
    return records[-1] if records else None


def latest_by(records: Iterable[Record], key: Callable[[Record], object]) -> list[Record]:
    """The latest record for each value of ``key``, in the order those values first appear."""
    current: dict[object, Record] = {}
    for record in records:
        current[key(record)] = record  # records are oldest first
    return list(current.values())


# formatting


def num(value, digits: int = 0) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def pct(value) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def table(header: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> str:
    align = ["---:" if i in right else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def provenance(record: Record, script: str) -> str:
    """Command, date, CPU and commit of ``record`` (what was not recorded, said so)."""
    if record.get("command"):
        command = f"`{record['command']}`"
    else:
        command = f"`python {script} ...` (arguments not recorded)"
    machine = record.get("machine", {})
    flags = machine.get("cpu_flags")
    if flags is None:
        flags = "not recorded"
    else:
        flags = ", ".join(flags) or "none of AVX2, AVX-512, AMX"
    name = machine.get("cpu", "not recorded")
    if machine.get("cpu_model"):
        name += f" {machine['cpu_model']}"
    if machine.get("cpu_caches"):
        name += f", caches {machine['cpu_caches']}"
    cpu = (
        f"{name} (vector units: {flags}), "
        f"{machine.get('cores', '?')} cores, torch {machine.get('torch', '?')}"
    )
    commit = f"`{record['commit']}`" if record.get("commit") else "not recorded"
    date = record.get("time", "not recorded").replace("T", " ")
    lines = [f"- command: {command}", f"- date: {date}", f"- CPU: {cpu}", f"- commit: {commit}"]
    if record.get("allocator"):
        settings = ", ".join(f"{k} {v}" for k, v in record["allocator"]["glibc"].items())
        lines.append(f"- allocator: glibc with {settings} (`bench/common.py` steady_allocator)")
    if record.get("fp32_engine") == "onednn" and "train" not in script:
        lines.append(
            "- float32 products: oneDNN, prepacked (`aiayn.model.layout`; before, and with "
            "`AIAYN_FP32_ENGINE=mkl`, MKL)"
        )
    if record.get("note"):
        lines.append(f"- note: {record['note']}")
    return "\n".join(lines)


# sections: each takes the results directory and returns markdown (empty: no records)


def decoding_speed(results: Path) -> str:
    records = [r for r in load(results, "decode_speed") if "by_threads" in r]
    current: dict[tuple, Record] = {}  # (model, threads) -> its latest record
    for record in records:
        for threads in record["by_threads"]:
            current[(record["model_dir"], threads)] = record
    parts = []
    for (model_dir, threads), record in sorted(current.items()):
        run = record["by_threads"][threads]
        rows = [
            [
                name,
                num(row.get("tokens_per_s")),
                num(row.get("tokens_per_cpu_s")),
                num(row.get("bleu"), 2),
                str(row["same_as_aiayn_greedy"]) if "same_as_aiayn_greedy" in row else "",
            ]
            for name, row in run["results"].items()
        ]
        cpu_ratios = run.get("cpu_time_ratios", {})
        ratios = [
            [name, f"{value:.2f}x", f"{cpu_ratios[name]:.2f}x" if name in cpu_ratios else "n/a"]
            for name, value in run["ratios"].items()
        ]
        versions = ", ".join(f"{k} {v}" for k, v in record.get("versions", {}).items())
        parts.append(
            f"`{model_dir}`, {record['sentences']} test sentences in batches of "
            f"{record['batch']}, {threads} thread(s), median of {record.get('repeats', '?')}"
            f" ({versions}):\n\n"
            + provenance(record, "bench/decode_speed.py")
            + "\n\n"
            + table(
                ["decoder", "tokens/s", "tokens per CPU s", "BLEU", "same as aiayn greedy"],
                rows,
                {1, 2, 3, 4},
            )
            + "\n\n"
            + table(["aiayn against its peer", "speed ratio", "CPU-time ratio"], ratios, {1, 2})
        )
    return "\n\n".join(parts)


def training_speed(results: Path) -> str:
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


def gpu_runs(results: Path) -> str:
    """bench/gpu.py's records: the latest per GPU."""
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


def data_scale(results: Path) -> str:
    """The latest record of each corpus size, and how each figure grows with it."""
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


def serving_load(results: Path) -> str:
    parts = []
    records = [r for r in load(results, "serve_load") if r.get("compare") != "engines"]
    for record in latest_by(records, lambda r: r["model_dir"]):
        rows = [
            [
                row["server"],
                str(row["clients"]),
                num(row["sentences_per_s"], 1),
                f"{row['p50_s']:.2f} s",
                f"{row['p95_s']:.2f} s",
                f"{row['p99_s']:.2f} s",
                str(row["errors"]),
                str(row.get("rejected_503", 0)),
            ]
            for row in record["rows"]
        ]
        speedups = [
            f"{key.split('_')[2]} clients: {value:.2f}x"
            for key, value in record.items()
            if key.startswith("speedup_at_")
        ]
        parts.append(
            f"`{record['model_dir']}`, {record['request']}, {record['requests_per_client']} "
            f"requests per client, {record['server_threads']} server thread(s):\n\n"
            + provenance(record, "bench/serve_load.py")
            + "\n\n"
            + table(
                ["server", "clients", "sentences/s", "p50", "p95", "p99", "errors", "503"],
                rows,
                {1, 2, 3, 4, 5, 6, 7},
            )
            + (
                "\n\nBatched against unbatched throughput: " + "; ".join(speedups) + "."
                if speedups
                else ""
            )
        )
    return "\n\n".join(parts)


def serving_engines(results: Path) -> str:
    """``serve_load.py --engines``: serve --engine ctranslate2 against CTranslate2 called
    directly and serve --engine torch."""
    parts = []
    records = [r for r in load(results, "serve_load") if r.get("compare") == "engines"]
    records = [r for r in records if not r.get("serve_args")]  # the defaults' runs, not A/Bs
    key = lambda r: (r["model_dir"], r["server_threads"], r.get("request"))  # noqa: E731
    for record in latest_by(records, key):
        rows = []
        for row in record["rows"]:
            if "clients" in row:
                latency = [f"{row[k]:.2f} s" for k in ("p50_s", "p95_s", "p99_s")]
                clients, errors = str(row["clients"]), str(row["errors"])
            else:  # CTranslate2 alone: batches of the server's --max-batch, no HTTP
                latency, clients, errors = ["", "", ""], "", ""
            cpu = [
                num(row[k], 2) if row.get(k) is not None else ""
                for k in ("server_cpu_ms_per_sentence", "client_cpu_ms_per_sentence")
            ]
            if "cpu_ms_per_sentence" in row:
                cpu[0] = num(row["cpu_ms_per_sentence"], 2)
            sentences_per_s = num(row["sentences_per_s"], 1)
            batch = num(row["mean_batch_texts"], 1) if row.get("mean_batch_texts") else ""
            if "for_clients" in row:  # CTranslate2 alone at the batch size served to N clients
                batch, clients = str(row["batch"]), f"({row['for_clients']})"
            rows.append([row["server"], clients, sentences_per_s, *latency, *cpu, batch, errors])
        direct = num(record["direct_ctranslate2_sentences_per_s"], 1)
        direct_cpu = num(record["direct_ctranslate2_cpu_ms_per_sentence"], 2)
        phrases = [  # (key prefix, what its ratio says; {n}: clients)
            ("serve_ct2_over_serve_torch_at_", "serve --engine ctranslate2 / serve --engine "
             "torch at {n} clients"),
            ("serve_ct2_over_direct_at_", "serve --engine ctranslate2 at {n} clients / "
             f"CTranslate2 directly ({direct} sentences/s, the mean of its runs)"),
            ("serve_ct2_over_direct_same_batch_at_", "serve --engine ctranslate2 at {n} clients "
             "/ CTranslate2 directly in batches of the size served"),
            ("direct_at_served_batch_over_direct_at_", "CTranslate2 directly in batches of the "
             "size served at {n} clients / in batches of 64"),
            ("serve_ct2_over_direct_by_cpu_at_", f"by CPU time, CTranslate2 directly "
             f"({direct_cpu} ms per sentence) / serve --engine ctranslate2 at {{n}} clients"),
        ]  # fmt: skip
        ratios = [
            f"{text.format(n=key.split('_')[-2])}: {value:.2f}x"
            for prefix, text in phrases
            for key, value in record.items()
            if key.startswith(prefix) and value is not None
        ]
        loads = record.get("load_average_1_5_15_min")
        if loads:
            ratios.append(
                "load average (1, 5, 15 min) "
                + " before, ".join(", ".join(num(x, 2) for x in loads[k]) for k in loads)
                + " after"
            )
        parts.append(
            f"`{record['model_dir']}`, {record['request']}, {record['requests_per_client']} "
            f"requests per client, {record['server_threads']} server thread(s):\n\n"
            + provenance(record, "bench/serve_load.py")
            + "\n\n"
            + table(
                [
                    "engine",
                    "clients",
                    "sentences/s",
                    "p50",
                    "p95",
                    "p99",
                    "CPU ms/sentence (server or direct)",
                    "client CPU ms/sentence",
                    "texts per batch",
                    "errors",
                ],
                rows,
                {1, 2, 3, 4, 5, 6, 7, 8, 9},
            )
            + "\n\n"
            + "; ".join(ratios)
            + "."
        )
    return "\n\n".join(parts)


def ct2_beam(results: Path) -> str:
    """``ct2_beam.py``: beam search through the ctranslate2 engine."""
    parts = []
    for record in latest_by(load(results, "ct2_beam"), lambda r: (r["model_dir"], r["beam"])):
        inner, cli = record["in_process"], record["cli_seconds"]
        seconds = inner["seconds"]
        rows = [
            ["torch engine (`search`, exact beam search)", num(seconds["torch"], 2)],
            ["ctranslate2 engine (`CTranslate2Engine.search`)", num(seconds["ctranslate2"], 2)],
            ["CTranslate2 directly (`translate_batch`, its defaults)", num(seconds["direct"], 2)],
        ]
        cli_rows = [[f"`aiayn translate --engine {k}`", num(v, 2)] for k, v in cli.items()]
        parts.append(
            f"`{record['model_dir']}`, beam {record['beam']}, length penalty 0.6, "
            f"{record['sentences']} test sentences in {inner['batches']} batches:\n\n"
            + provenance(record, "bench/ct2_beam.py")
            + "\n\n"
            + table(["decoder, same batches, one process", "seconds"], rows, {1})
            + "\n\n"
            + f"The ctranslate2 engine: {inner['ct2_engine_over_torch_speed']:.2f}x the torch "
            f"engine's speed, {inner['ct2_engine_time_over_direct']:.2f}x CTranslate2's own "
            f"time; its best hypothesis is the torch engine's on {inner['same_best_as_torch']} "
            f"of {record['sentences']} sentences ({pct(inner['same_best_share'])})"
            + (
                f" at patience {inner['patience']:g}; by patience: "
                + "; ".join(
                    f"{k}: {v['same_best_as_torch']} the same, {num(v['seconds'], 2)} s"
                    for k, v in inner["by_patience"].items()
                )
                if "by_patience" in inner
                else ""
            )
            + ".\n\n"
            + f"The command line on the first {record['cli_sentences']} sentences, each a "
            "process of its own (start-up, loading and the cache's check included):\n\n"
            + table(["command (--beam " + str(record["beam"]) + ")", "seconds"], cli_rows, {1})
        )
    return "\n\n".join(parts)


def prefix_cost(results: Path) -> str:
    """``prefix.py``: what a target prefix costs."""
    parts = []
    for record in latest_by(load(results, "prefix"), lambda r: (r["model_dir"], r["beam"])):
        sec, rate = record["seconds"], record["new_tokens_per_s"]
        rows = [
            ["translate, no prefix", num(sec["translate"], 2), num(rate["translate"])],
            ["the prefixes' teacher-forced pass alone", num(sec["prefix_pass"], 2), ""],
            [
                "translate with the prefixes",
                num(sec["translate_with_prefix"], 2),
                num(rate["translate_with_prefix"]),
            ],
        ]
        parts.append(
            f"`{record['model_dir']}`, beam {record['beam']}, {record['sentences']} test "
            f"sentences, the first half of each reference as its prefix "
            f"({record['prefix_tokens']} tokens in all):\n\n"
            + provenance(record, "bench/prefix.py")
            + "\n\n"
            + table(["run", "seconds", "new tokens/s (prefix not counted)"], rows, {1, 2})
            + "\n\n"
            + "Translating with the prefixes took "
            f"{record['with_prefix_over_pass_plus_rest']:.2f}x the prefixes' pass plus the "
            "search of the tokens after them at the plain translation's rate."
        )
    return "\n\n".join(parts)


def train_precision(results: Path) -> str:
    """``train_precision.py``: the main job's training at float32 and bf16, per series."""
    records = load(results, "train_precision")
    parts = []
    for series in dict.fromkeys(r["series"] for r in records):
        runs = [r for r in records if r["series"] == series]
        rows = [
            [r["row"]["precision"], str(r["row"]["run"]), num(r["row"]["steps"]),
             num(r["row"]["tokens_per_s"]), num(r["row"]["valid_loss"], 3),
             num(r["row"]["bleu"], 2), num(r["row"]["chrf"], 2)]
            for r in runs
        ]  # fmt: skip
        by = {}
        for r in runs:
            by.setdefault(r["row"]["precision"], []).append(r["row"])
        means = [
            f"{p}: {num(sum(x['steps'] for x in xs) / len(xs))} steps, chrF "
            f"{num(sum(x['chrf'] for x in xs) / len(xs), 2)} (mean of {len(xs)})"
            for p, xs in by.items()
        ]
        parts.append(
            f"`{runs[0]['config']}`{' with ' + ', '.join(runs[0]['sets']) if runs[0]['sets'] else ''}"
            f", test split greedy:\n\n"
            + provenance(runs[-1], "bench/train_precision.py")
            + "\n\n"
            + table(
                ["precision", "run", "steps", "tokens/s", "valid loss", "BLEU", "chrF"],
                rows,
                {1, 2, 3, 4, 5, 6},
            )
            + "\n\n"
            + "; ".join(means)
            + "."
        )
    return "\n\n".join(parts)


def fp32_kernels(results: Path) -> str:
    """``experiments/fp32_kernels.py``: MKL against prepacked oneDNN, by shape and rows."""
    parts = []
    for record in latest_by(load(results, "fp32_kernels"), lambda r: r["machine"].get("cpu")):
        rows = [
            [f"{r['shape']} ({r['k']} x {r['n']})", str(r["rows"]), num(r["mkl_gflops"], 1),
             num(r["onednn_gflops"], 1), f"{r['onednn_speedup']:.2f}x"]
            for r in record["rows"]
        ]  # fmt: skip
        parts.append(
            f"`{record['model']}`'s shapes, {record['threads']} thread(s), median of "
            f"{record['repeats']}:\n\n"
            + provenance(record, "bench/experiments/fp32_kernels.py")
            + "\n\n"
            + table(
                ["product", "rows", "MKL GFLOP/s", "oneDNN GFLOP/s", "oneDNN / MKL"],
                rows,
                {1, 2, 3, 4},
            )  # fmt: skip
        )
    return "\n\n".join(parts)


def attention_kernels(results: Path) -> str:
    """``experiments/attention_kernels.py``: one step's attention over the cache, hot and cold."""
    parts = []
    for record in latest_by(
        load(results, "attention_kernels"), lambda r: (r["machine"].get("cpu_model"), r["model"])
    ):
        rows = [
            [f"{r['rows']} x {r['length']}", r["kernel"], num(r["hot_us"], 0), num(r["cold_us"], 0),
             num(r["cold_gb_s"], 1)]
            for r in record["rows"]
        ]  # fmt: skip
        parts.append(
            f"`{record['model']}`'s heads ({record['heads']} of {record['d_head']}), "
            f"{record['threads']} thread(s), median of {record['repeats']}:\n\n"
            + provenance(record, "bench/experiments/attention_kernels.py")
            + "\n\n"
            + table(
                [
                    "sentences x cached positions",
                    "formulation",
                    "hot us",
                    "cold us",
                    "cold GB/s of keys and values",
                ],
                rows,
                {2, 3, 4},
            )  # fmt: skip
        )
    return "\n\n".join(parts)


def eager_floor(results: Path) -> str:
    """``experiments/eager_floor.py``: eager mode's floor in throughput-mode decoding."""
    parts = []
    for record in latest_by(
        load(results, "eager_floor"), lambda r: (r["machine"].get("cpu_model"), r["model_dir"])
    ):
        rows = [
            [name, num(r["run_cpu_ms"], 0), str(r["steps"]), num(r["mean_rows_per_step"], 1),
             num(r["floor_ms"], 0), f"{100 * r['floor_share']:.1f}%",
             f"{r['most_without_the_floor']:.2f}x"]
            for name, r in record["runs"].items()
        ]  # fmt: skip
        floor = ", ".join(f"{n}: {ms:.2f}" for n, ms in record["floor_cpu_ms_per_step"].items())
        parts.append(
            f"`{record['model_dir']}`, median of {record['repeats']} runs; the d_model 16 "
            f"step, CPU ms at each row count: {floor}.\n\n"
            + provenance(record, "bench/experiments/eager_floor.py")
            + "\n\n"
            + table(
                [
                    "decoder",
                    "run CPU ms",
                    "steps",
                    "rows per step",
                    "floor ms",
                    "floor share",
                    "at most, without the floor",
                ],
                rows,
                {1, 2, 3, 4, 5, 6},
            )  # fmt: skip
        )
    return "\n\n".join(parts)


def hosts(results: Path) -> str:
    """Every machine the records were measured on, with how many records and when."""
    seen: dict[tuple, dict] = {}
    for path in sorted(results.glob("*.jsonl")):
        for record in load(results, path.stem):
            machine = record.get("machine", {})
            flags = machine.get("cpu_flags")
            key = (
                " ".join(
                    filter(None, [machine.get("cpu", "not recorded"), machine.get("cpu_model")])
                ),
                "not recorded" if flags is None else ", ".join(flags) or "none",
                machine.get("cores", "?"),
            )
            entry = seen.setdefault(key, {"records": 0, "files": set(), "dates": []})
            entry["records"] += 1
            entry["files"].add(path.stem)
            entry["dates"].append(record.get("time", "")[:10])
    rows = [
        [cpu, flags, str(cores), str(e["records"]), min(filter(None, e["dates"]), default="?"),
         max(e["dates"]) or "?", ", ".join(sorted(e["files"]))]
        for (cpu, flags, cores), e in seen.items()
    ]  # fmt: skip
    return table(
        ["CPU", "vector units", "cores", "records", "first", "last", "comparisons"], rows, {2, 3}
    )


def ensemble(results: Path) -> str:
    """``ensemble.py``: an ensemble against its members alone."""
    parts = []
    for record in latest_by(load(results, "ensemble"), lambda r: tuple(r["models"])):
        rows = [
            [r["model"], str(r["beam"]), num(r["bleu"], 2), num(r["chrf"], 2), num(r["seconds"], 1)]
            for r in record["rows"]
        ]
        parts.append(
            f"{', '.join(f'`{m}`' for m in record['models'])} on `{record['corpus']}`'s test "
            f"split ({record['sentences']} sentences):\n\n"
            + provenance(record, "bench/ensemble.py")
            + "\n\n"
            + table(["model", "beam", "BLEU", "chrF", "seconds"], rows, {1, 2, 3, 4})
        )
    return "\n\n".join(parts)


def interop(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "interop"), lambda r: "interop"):
        rows = []
        marian = record.get("marian")
        if marian:
            n = marian["sentences"]
            rows.append(
                [
                    f"shipped model exported: teacher-forced log-probabilities vs transformers, {n} test sentences",
                    f"max difference {marian['max_abs_logprob_diff_transformers']:.1e} "
                    f"(values down to -{marian['max_abs_logprob']:.1f})",
                ]
            )
            same = f"transformers {marian['transformers_beam1_same']}/{n} and {marian['transformers_beam4_same']}/{n}"
            if "ctranslate2_beam1_same" in marian:
                same += (
                    f"; CTranslate2 {marian.get('ctranslate2', '')} "
                    f"{marian['ctranslate2_beam1_same']}/{n} and {marian['ctranslate2_beam4_same']}/{n}"
                )
            rows.append(
                ["the same: greedy / beam-4 translations equal to aiayn's (length penalty 0)", same]
            )
            speed = marian.get("sentences_per_s", {})
            if speed:
                rows.append(
                    [
                        "sentences/s on those sentences, greedy / beam 4",
                        f"aiayn {num(speed.get('aiayn_beam1'))} / {num(speed.get('aiayn_beam4'))}, "
                        f"CTranslate2 {num(speed.get('ct2_beam1'))} / {num(speed.get('ct2_beam4'))}",
                    ]
                )
        minilm = record.get("minilm")
        if minilm:
            rows.append(
                [
                    f"all-MiniLM-L6-v2 imported: mean-pooled embeddings vs transformers' BertModel, {minilm['texts']} texts",
                    f"token ids {minilm['same_token_ids']}/{minilm['texts']} equal, "
                    f"max difference {minilm['max_abs_embedding_diff']:.1e}",
                ]
            )
        parts.append(
            provenance(record, "bench/interop.py") + "\n\n" + table(["check", "result"], rows)
        )
    return "\n\n".join(parts)


def sentiment(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "sentiment"), lambda r: r.get("split", "test")):
        split = record.get("split", "test")
        examples = record.get("examples", record.get("test_examples"))
        rows = [[name, pct(value)] for name, value in record["accuracy"].items()]
        parts.append(
            f"{split} split, {examples} snippets:\n\n"
            + provenance(record, "bench/sentiment.py")
            + "\n\n"
            + table(["classifier", "accuracy"], rows, {1})
        )
    return "\n\n".join(parts)


def step_cost(results: Path) -> str:
    parts = []
    records = load(results, "step_cost")
    for record in latest_by(records, lambda r: tuple(next(iter(r["cpu_ms_per_step"].values())))):
        columns = list(next(iter(record["cpu_ms_per_step"].values())))
        rows = [
            [name] + [num(costs.get(c), 2) for c in columns]
            for name, costs in record["cpu_ms_per_step"].items()
        ]
        spread = record.get("aiayn_over_ct2_rounds", {})
        ratios = [
            [f"aiayn / CTranslate2, {kind}"]
            + [
                f"{values[c]:.2f}x"
                + (
                    f" ({min(spread[kind][c]):.2f}-{max(spread[kind][c]):.2f})"
                    if len(spread.get(kind, {}).get(c, [])) > 1
                    else ""
                )
                for c in columns
            ]
            for kind, values in record.get("aiayn_over_ct2", {}).items()
        ]
        rounds = record.get("rounds", 1)
        median = f"median of {record.get('repeats', '?')}"
        if rounds > 1:
            median = (
                f"each decoder's median of {rounds} rounds run in turn (each the {median}); "
                "ratios: median of the rounds' ratios (lowest-highest)"
            )
        parts.append(
            f"`{record['model_dir']}`, greedy, CPU ms per step between the 10th and the 50th, "
            f"{median}:\n\n"
            + provenance(record, "bench/experiments/step_cost.py")
            + "\n\n"
            + table(
                ["CPU ms per step, sentences in the batch"] + columns,
                rows + ratios,
                set(range(1, len(columns) + 1)),
            )
        )
    return "\n\n".join(parts)


def heap_memory(results: Path) -> str:
    """The latest run of bench/experiments/heap_memory.py: one row per variant."""
    records = load(results, "heap_memory")
    if not records:
        return ""
    last = records[-1]
    batch = [r for r in records if (r.get("command"), r.get("time", "")[:13]) == (
        last.get("command"), last.get("time", "")[:13])]  # fmt: skip
    base = next((r for r in batch if not r["env"] and not r["overrides"]), None)
    base_s = statistics.mean(x["step_s"] for x in base["runs"]) if base else None
    rows = []
    for r in batch:
        rss = [x["peak_rss_mb"] for x in r["runs"]]
        step = [x["step_s"] for x in r["runs"]]
        setting = ", ".join(
            [f"`{k}={v}`" for k, v in r["env"].items()] + [f"`{o}`" for o in r["overrides"]]
        )
        rows.append(
            [
                r["variant"],
                setting or "(none)",
                " / ".join(num(x) for x in rss),
                " / ".join(num(x, 2) for x in step),
                f"{statistics.mean(step) / base_s:.2f}x" if base_s else "n/a",
            ]
        )
    precision = next((x.get("precision") for x in last["runs"] if x.get("precision")), "?")
    return (
        # training: the float32 engine of inference does not apply
        provenance(
            {k: v for k, v in last.items() if k != "fp32_engine"},
            "bench/experiments/heap_memory.py",
        )
        + f"\n\nThe base model on the {num(last['pairs'])}-pair store, batches of 4,000 tokens, "
        f"activation checkpointing on, {precision}, {last['steps']} steps per run; each figure "
        "one run, the variants in turn:\n\n"
        + table(
            ["heap policy", "setting", "peak RSS MB", "s per step", "step time vs default"],
            rows,
            {2, 3, 4},
        )
    )


def bf16_decode(results: Path) -> str:
    r = latest(results, "bf16_decode")
    if r is None:
        return ""
    rows = [
        [name, num(x["tokens_per_cpu_s"]), f"{x['speed_vs_aiayn_float32']:.2f}x", num(x["bleu"], 2)]
        for name, x in r["results"].items()
    ]
    return (
        provenance(r, "bench/experiments/bf16_decode.py")
        + f"\n\n`{r['model_dir']}`, {num(r['sentences'])} test sentences, greedy, "
        f"{r['threads']} thread(s), median of {r['repeats']}"
        + (
            f" (CTranslate2's CPU compute types here: {', '.join(types)}; no bfloat16)"
            if (types := r.get("ctranslate2_cpu_compute_types")) and "bfloat16" not in types
            else ""
        )
        + ":\n\n"
        + table(["decoder", "tokens per CPU s", "vs aiayn float32", "BLEU"], rows, {1, 2, 3})
    )


def bf16_attention(results: Path) -> str:
    r = latest(results, "bf16_attention")
    if r is None:
        return ""
    rows = [
        [name, num(r["tokens_per_s"][name]), f"{r['speedup_over_float32'][name]:.2f}x"]
        for name in r["tokens_per_s"]
    ]
    return (
        provenance(r, "bench/experiments/bf16_attention.py")
        + f"\n\n`{r['preset']}` model, {r['batches']} Ding batches a timing, {r['threads']} "
        f"threads, median of {r['rounds']} rounds:\n\n"
        + table(["training step", "target tokens/s", "vs float32"], rows, {1, 2})
    )


def profile(results: Path) -> str:
    parts = []
    records = [r for r in load(results, "profile_decode") if "cpu_ms_per_1000_tokens" in r]
    for record in latest_by(records, lambda r: (r["model_dir"], r["beam"], r.get("int8", False))):
        rows = [[name, num(value)] for name, value in record["cpu_ms_per_1000_tokens"].items()]
        share = record.get("int8_gemm_share") if record.get("int8") else record.get("gemm_share")
        rows.append(["share of aiayn's operator time in matrix products", pct(share)])
        gflops = record.get("gemm_gflops") or {}
        for where, value in gflops.items():
            rows.append([f"matrix products, GFLOP/s {where}", num(value, 1)])
        top = ", ".join(f"{op} {pct(v)}" for op, v in list(record["top_ops"].items())[:5])
        kind = "int8" if record.get("int8") else "float32"
        search = "greedy" if record["beam"] == 1 else f"beam {record['beam']}"
        parts.append(
            f"`{record['model_dir']}`, {search}, {kind}, {record['sentences']} sentences in "
            f"batches of {record['batch']}, {record['threads']} thread(s):\n\n"
            + provenance(record, "bench/experiments/profile_decode.py")
            + "\n\n"
            + table(["CPU ms per 1,000 generated tokens", "value"], rows, {1})
            + f"\n\nThe costliest operators (share of aiayn's operator time): {top}."
        )
    return "\n\n".join(parts)


def int8_batch(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "int8_batch"), lambda r: r["model_dir"]):
        n = record["sentences"]
        rows = [[name, f"{count} of {n}"] for name, count in record["differ"].items()]
        parts.append(
            f"`{record['model_dir']}`, greedy, the first {n} test sentences as one batch and one "
            "by one:\n\n"
            + provenance(record, "bench/experiments/int8_batch.py")
            + "\n\n"
            + table(["decoder", "sentences that differ alone"], rows, {1})
        )
    return "\n\n".join(parts)


def compile_block(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "compile_block"), lambda r: r["rows"]):
        rows = [
            ["eager", f"{record['eager_us']:.0f} us"],
            ["torch.compile (max-autotune, frozen weights)", f"{record['compiled_us']:.0f} us"],
            ["speed-up", f"{record['speedup']:.2f}x"],
            ["compile time", f"{record['compile_s']:.0f} s"],
            ["largest difference, scaled", f"{record['max_scaled_diff']:.1e}"],
        ]
        parts.append(
            f"One feed-forward block of the shipped model, {record['rows']} rows, CPU time:\n\n"
            + provenance(record, "bench/experiments/compile_block.py")
            + "\n\n"
            + table(["", "value"], rows, {1})
        )
    return "\n\n".join(parts)


def _ratios_by_shape(results: Path, name: str, field: str, intro, script: str) -> str:
    """The latest record of ``name`` per row list: a table of ``record[field]`` (ratio by weight
    shape, then rows), under ``intro(record)``."""
    parts = []
    for record in latest_by(load(results, name), lambda r: tuple(r["rows"])):
        rows = [
            [shape, *(f"{by_rows[str(n)]:.2f}x" for n in record["rows"])]
            for shape, by_rows in record[field].items()
        ]
        parts.append(
            intro(record)
            + "\n\n"
            + provenance(record, script)
            + "\n\n"
            + table(
                ["weight", *(f"{n} rows" for n in record["rows"])],
                rows,
                set(range(1, len(record["rows"]) + 1)),
            )
        )
    return "\n\n".join(parts)


def linear_layout(results: Path) -> str:
    return _ratios_by_shape(
        results,
        "linear_layout",
        "column_major_speedup",
        lambda record: (
            "Column-major weight against row-major, speed-up of `F.linear` by weight "
            "shape (out x in) and rows multiplied, CPU time:"
        ),
        "bench/experiments/linear_layout.py",
    )


def int8_kernels(results: Path) -> str:
    return _ratios_by_shape(
        results,
        "int8_kernels",
        "fbgemm_over_onednn",
        lambda record: (
            "fbgemm's time over oneDNN's for one dynamic int8 product, by weight shape "
            "(out x in) and rows (above 1: oneDNN faster; AMX int8 on this CPU: "
            f"{record['amx_int8']}; aiayn takes oneDNN from {record['onednn_from']} output "
            "entries), CPU time:"
        ),
        "bench/experiments/int8_kernels.py",
    )


def ab_runs(results: Path) -> str:
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
            "label-smoothed loss without an (n, V) mask",
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


SECTIONS = [
    (
        "Decoding speed",
        "aiayn against CTranslate2 (the C++ engine LibreTranslate runs on) and Hugging Face "
        "`MarianMTModel.generate`, all holding the same weights (CTranslate2's from `aiayn "
        "export --format hf` and the stock `ct2-transformers-converter`), every decoder timed "
        "in turn in one process on the same sentences; each sentence may run to its source "
        "length + 50; generated tokens counted per sentence up to and including its first "
        "eos; BLEU of each decoder's own output on those sentences. \"all at once, by "
        'tokens" is throughput mode (the sentences sorted by length into batches of up to '
        "2,500 source tokens).",
        decoding_speed,
    ),
    (
        "Training speed",
        "The same encoder-decoder sizes, batches, loss (label smoothing 0.1), optimizer (Adam "
        "0.9/0.98) and threads for aiayn, `torch.nn.Transformer` with the paper's embeddings "
        "and output layer, and Hugging Face `MarianMTModel`, timed alternately in one process. "
        "Model FLOPs are counted by `torch.utils.flop_counter`.",
        training_speed,
    ),
    (
        "On a GPU",
        "`bench/gpu.py`: the paper's base model (a 37,000-token vocabulary) trained and the "
        "shipped model decoding on one GPU, against Hugging Face `MarianMTModel` and "
        "`torch.nn.Transformer` of the same sizes, timed in turn in one process on the same "
        "inputs; each with fused Adam and the same label-smoothed loss; model FLOPs "
        "utilisation against the bf16 product rate measured in the same run. How to train "
        "and decode on a GPU: [gpus.md](gpus.md).",
        gpu_runs,
    ),
    (
        "Data path at scale",
        "`bench/scale.py`: corpora of N pairs at WMT14 English-German's sentence lengths, "
        "each through the tokenizer's training, the token store's encoding (`aiayn train "
        "--prepare-only`) and the first training steps of the base model, each in its own "
        "process.",
        data_scale,
    ),
    (
        "Serving load",
        "`aiayn serve` on 127.0.0.1 with dynamic batching (the defaults) and with "
        "`--max-batch 1` (unbatched), N concurrent clients each posting single test "
        "sentences one after another.",
        serving_load,
    ),
    (
        "Serving engines",
        "`aiayn serve --engine ctranslate2` against `--engine torch` (both with dynamic "
        "batching, N concurrent clients each posting single test sentences one after another, "
        "greedy or with the beam each table names) and against CTranslate2's `Translator.translate_batch` called directly on the "
        "same sentences in batches of 64 (the server's `--max-batch`), without HTTP; the "
        "direct runs come before and between the servers' and are averaged, because the "
        "machine's load drifts. Rows named \"the server's batch\" (newer records) call "
        "CTranslate2 directly in batches as large as the server formed on average for the "
        "client count in brackets: what that batch size costs CTranslate2 itself.",
        serving_engines,
    ),
    (
        "Beam search through the CTranslate2 engine",
        "`bench/ct2_beam.py`: the same batches through the torch engine's exact beam search, "
        "the ctranslate2 engine and CTranslate2's `translate_batch` on the same converted "
        "model and threads, timed in turn in one process (median of the repeats); then "
        "`aiayn translate` with each engine.",
        ct2_beam,
    ),
    (
        "Target prefixes",
        "`bench/prefix.py`: `Translator.translate` with and without target prefixes, and the "
        "prefixes' one teacher-forced pass alone, timed in turn in one process.",
        prefix_cost,
    ),
    (
        "Training precision",
        "`bench/train_precision.py`: the main job's training for its minutes at float32 and at "
        "bf16 autocast, alternated, each run then translating the test split greedily "
        "(sacreBLEU).",
        train_precision,
    ),
    (
        "Ensembles",
        "`bench/ensemble.py`: translators trained alike but for their seed, each alone and "
        "as an ensemble (`aiayn.load([A, B])`, per-step probabilities averaged), scored by "
        "sacreBLEU (BLEU, chrF).",
        ensemble,
    ),
    (
        "Interoperability on real weights",
        "The shipped model exported with `aiayn export --format hf`, against transformers and "
        "CTranslate2; all-MiniLM-L6-v2 imported with `aiayn import` (with `--minilm`).",
        interop,
    ),
    (
        "Sentiment accuracy",
        "aiayn's classifiers against TF-IDF (1-2 grams) + logistic regression and the "
        "majority class on the Rotten Tomatoes split.",
        sentiment,
    ),
]

EXPERIMENTS = [
    (
        "Cost of one decoding step",
        "The CPU time of one greedy step against the number of sentences decoded together "
        "(one sentence repeated), for aiayn and CTranslate2 on the same weights; the d_model "
        "16 row runs the same architecture with almost no arithmetic, so its step is the cost "
        'of issuing the operators in eager mode. Where recorded, the "attention skipped" rows '
        "run the step with each attention product over the cache replaced by its queries: the "
        "step's time less theirs is what attention costs inside the step; the \"attention "
        'alone" row times the same calls back to back, their operands hot in the caches.',
        step_cost,
    ),
    (
        "Where decoding time goes",
        "torch.profiler over a whole greedy run for aiayn, CPU time for CTranslate2 on the "
        "same batches; matrix products inside decoding against the same shapes timed alone.",
        profile,
    ),
    (
        "int8 batch dependence",
        "fbgemm's dynamic int8 product quantizes its whole input with one scale, so an int8 "
        "row's rounding depends on the other rows of its batch.",
        int8_batch,
    ),
    (
        "torch.compile of a feed-forward block",
        "Whether `torch.compile` pays for a decoder step on the CPU.",
        compile_block,
    ),
    (
        "Linear weight layout",
        "Whether a column-major weight (`aiayn.model.layout`, as a model directory loads on a "
        "CPU) multiplies faster than `nn.Linear`'s row-major one.",
        linear_layout,
    ),
    (
        "Float32 products: MKL and oneDNN",
        "Which float32 product is faster by shape and rows: PyTorch's default (MKL, the "
        "weight column-major as a model directory loads it) or oneDNN with the weight "
        "prepacked (`aiayn.model.layout.PackedLinear`, the default on AMD CPUs with AVX-512).",
        fp32_kernels,
    ),
    (
        "Attention over the KV cache",
        "One greedy step's attention (one query per sentence) over its cached keys and values: "
        "`scaled_dot_product_attention` as aiayn runs it, the same products by `torch.bmm` on "
        "head-major keys and values, and by element-wise products, against one plain read "
        "of the same keys and values; hot (back to back) and cold (after reading 256 MB).",
        attention_kernels,
    ),
    (
        "Eager mode's floor in throughput mode",
        "How much of throughput-mode greedy decoding (`bench/decode_speed.py`'s) is the "
        "framework's floor: the step of the same architecture at d_model 16, summed over the "
        "real run's steps at their row counts. Removing it all would make the run at most "
        "the last column faster; any step still made of PyTorch operators keeps part of it.",
        eager_floor,
    ),
    (
        "int8 products: fbgemm and oneDNN",
        "Which of PyTorch's two dynamic int8 products is faster by shape and rows; "
        "`aiayn.model.quantize` uses oneDNN for large outputs where the CPU has AMX.",
        int8_kernels,
    ),
    (
        "Heap memory in training",
        "A training process's peak resident memory and step time under glibc's heap policies: "
        "its default, `train.trim_heap_every` (`malloc_trim` from a thread, "
        "`aiayn.train.heap`) and a 4 MB mmap threshold (every larger tensor a mapping of its "
        "own).",
        heap_memory,
    ),
    (
        "bfloat16 decoding",
        "What oneDNN's bf16 products give to greedy decoding on a CPU with bf16 units, "
        'against CTranslate2\'s `compute_type="bfloat16"`, and what they cost in BLEU.',
        bf16_decode,
    ),
    (
        "bfloat16 training: where attention runs",
        "Training-step speed at float32 and at bf16 CPU autocast with attention in bf16 "
        "(autocast's own rule) or in float32 on the bf16 projections (what aiayn does).",
        bf16_attention,
    ),
    (
        "Kept changes (A/B runs)",
        "Changes to decoding and training kept because an A/B run showed they paid.",
        ab_runs,
    ),
]

HEADER = """# Performance

<!-- Generated by `python bench/report.py` from bench/results/*.jsonl; do not edit by hand.
A test fails when this page differs from what the records give. -->

Each table is the latest record of one comparison; every record (the history) stays in
`bench/results/`. The scripts are listed in [bench/README.md](../bench/README.md). Timings on a
machine shared with other work move by up to 25% between runs; the ratios of peers timed in
turn in one process are the figures to compare.
"""


def render(results: Path = RESULTS) -> str:
    out = [HEADER]
    machines = hosts(results)
    if machines.count("\n") > 1:
        out.append(
            "## Hosts measured\n\nEvery machine a record below was measured on (the CPU as "
            "`/proc/cpuinfo` names it, the vector units PyTorch's kernels choose by); each "
            "table names its own.\n\n" + machines + "\n"
        )
    for title, intro, section in SECTIONS:
        body = section(results)
        if body:
            out.append(f"## {title}\n\n{intro}\n\n{body}\n")
    experiments = [(t, i, s(results)) for t, i, s in EXPERIMENTS]
    if any(body for _, _, body in experiments):
        out.append(
            "## Experiments\n\nOne-off measurements behind decisions in the code, by the "
            "scripts in `bench/experiments/` (see [decoding.md](decoding.md) for what was "
            "tried and not kept).\n"
        )
        for title, intro, body in experiments:
            if body:
                out.append(f"### {title}\n\n{intro}\n\n{body}\n")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the records' directory")
    parser.add_argument("--page", type=Path, default=PAGE, help="the page to write or check")
    args = parser.parse_args()
    text = render(args.results)
    if args.check:
        current = args.page.read_text(encoding="utf-8") if args.page.is_file() else ""
        if current != text:
            print(
                f"{args.page} is out of date with the records in {args.results}: "
                "run python bench/report.py",
                file=sys.stderr,
            )
            return 1
        return 0
    args.page.write_text(text, encoding="utf-8")
    print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
