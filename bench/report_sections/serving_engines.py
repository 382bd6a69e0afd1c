"""Serving engines: `serve_load.py --engines`, serve --engine ctranslate2 against CTranslate2
called directly and serve --engine torch."""

from __future__ import annotations

from pathlib import Path

from .common import latest_by, load, num, table
from .serving_load import heading

TITLE = "Serving engines"
INTRO = (
    "`aiayn serve --engine ctranslate2` against `--engine torch` (both with dynamic "
    "batching, N concurrent clients each posting single test sentences one after another, "
    "greedy or with the beam each table names) and against CTranslate2's `Translator.translate_batch` called directly on the "
    "same sentences in batches of 64 (the server's `--max-batch`), without HTTP; the "
    "direct runs come before and between the servers' and are averaged, because the "
    "machine's load drifts. Rows named \"the server's batch\" (newer records) call "
    "CTranslate2 directly in batches as large as the server formed on average for the "
    "client count in brackets: what that batch size costs CTranslate2 itself."
)


def render(results: Path) -> str:
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
            heading(record)
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
