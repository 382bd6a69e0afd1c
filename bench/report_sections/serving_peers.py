"""Serving against LibreTranslate: `serve_load.py --peers`, `aiayn serve` with its default
flags against LibreTranslate (tuned and stock) serving aiayn's own Argos export, and the
served engine in process at the batch sizes the server formed; the latest record per model,
set of `aiayn serve` flags, load generator and CPU."""

from __future__ import annotations

from pathlib import Path

from .common import latest_by, load, num, provenance, table

TITLE = "Serving against LibreTranslate"
INTRO = (
    "`python bench/serve_load.py --peers`: `aiayn serve MODEL` with its default flags "
    "(`--engine auto`: CTranslate2 for greedy and beam search, `--decoders` 2 on two cores "
    "or more; in records of commits before `4611f12` the torch model for beam search, one "
    "decoder) and "
    "LibreTranslate 1.9.6 serving `aiayn export MODEL --format argos` "
    "(`scripts/libretranslate_peer.sh`: its own venv, offline), tuned "
    "(`ARGOS_INTRA_THREADS=1`) and stock, each server alone, one after another in one run, "
    "the same client, sentences and loads on LibreTranslate's `/translate`; the beam is "
    "`aiayn serve --beam` and LibreTranslate's `ARGOS_BEAM_SIZE`. In process: "
    "`aiayn.load(MODEL).translate` with the server's threads and decoders (as many batches "
    "at once) on the same sentences in batches of the sizes the server formed (its "
    "`/metrics` batch histogram); served / in process is the floor's ratio. The load "
    "generator is named with each record: wrk (one C thread, a keep-alive connection a client, "
    "for a time a load) where installed, else a Python thread a client (`http.client`, a "
    "number of sentences a load; records that name none). On a 2-core machine shared with "
    "other work the figures move with its load (recorded below each table)."
)


def _ratios(record: dict) -> str:
    keys = [k for k in record if k.startswith(("vs_libretranslate", "p50_1_client", "served_vs"))]
    return "; ".join(f"`{k}` {record[k]:.2f}" for k in keys)


def render(results: Path) -> str:
    parts = []
    records = [r for r in load(results, "serve_load") if r.get("compare") == "peers"]

    def key(record: dict) -> tuple:
        tool = record.get("client", "python").split(":")[0]  # python, or wrk and its version
        cpu = record.get("machine", {}).get("cpu")  # the bars name an AMD and an Intel host
        return record["model_dir"], record.get("serve_args"), tool, cpu

    for record in latest_by(records, key):
        rows = [
            [
                row["server"],
                "greedy" if row["beam"] == 1 else f"beam {row['beam']}",
                str(row["clients"]),
                str(row["sentences_per_request"]),
                num(row["sentences_per_s"], 1),
                f"{row['p50_s'] * 1000:.0f} ms",
                f"{row['p95_s'] * 1000:.0f} ms",
                str(row["errors"] + row["lost"]),
                num(row["server_cpu_ms_per_sentence"], 2)
                if row.get("server_cpu_ms_per_sentence") is not None
                else "-",
                num(row["mean_batch_texts"], 1) if row.get("mean_batch_texts") else "-",
            ]
            for row in record["rows"]
        ]
        floors = [
            [
                f"{f['engine']} ({'greedy' if f['beam'] == 1 else 'beam ' + str(f['beam'])})",
                f"{f.get('decoders', 1)} x {f.get('threads', f.get('torch_threads', '?'))}",
                str(f["for_clients"]),
                num(f["sentences_per_s"], 1),
                ", ".join(f"{k}x{v}" for k, v in f["batch_sizes"].items()),
            ]
            for f in record.get("in_process", [])
        ]
        load_avg = record.get("load_average_1_5_15_min", {})
        if record.get("seconds_per_load"):
            size = f"{num(record['seconds_per_load'], 0)} s a load"
        else:
            size = f"about {record.get('sentences_per_load', '?')} sentences a load"
        client = record.get("client", "python: a thread a client, http.client")
        parts.append(
            f"`{record['model_dir']}`, `aiayn serve` flags: {record['serve_args']}; "
            f"{record['request']}; {record['peers']}; "
            f"load generator {client}; "
            f"{record.get('repeats', 1)} round(s) per beam, {size}; load average "
            f"(1, 5, 15 min) {load_avg.get('before')} before, {load_avg.get('after')} after:\n\n"
            + provenance(record, "bench/serve_load.py")
            + "\n\n"
            + table(
                [
                    "server",
                    "search",
                    "clients",
                    "sentences/request",
                    "sentences/s",
                    "p50",
                    "p95",
                    "errors",
                    "server CPU ms/sentence",
                    "mean batch",
                ],
                rows,
                {2, 3, 4, 5, 6, 7, 8, 9},
            )  # fmt: skip
            + (
                "\n\nIn process, at the server's batch sizes:\n\n"
                + table(
                    [
                        "engine",
                        "decoders x threads",
                        "for clients",
                        "sentences/s",
                        "batches (size x count)",
                    ],
                    floors,
                    {1, 2, 3},
                )  # fmt: skip
                if floors
                else ""
            )
            + (f"\n\nRatios: {_ratios(record)}." if _ratios(record) else "")
        )
    return "\n\n".join(parts)
