"""What the report's sections share: reading the records, the number formats, markdown tables
and the provenance lines (command, date, CPU, commit) under each table's heading."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"

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


def cores(machine: dict) -> str:
    """The machine's cores, "2 of 16" where the run could use only some of them (pinned)."""
    total, usable = machine.get("cores", "?"), machine.get("cores_usable")
    return f"{usable} of {total}" if usable is not None and usable != total else str(total)


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
        f"{name} (vector units: {flags}), {cores(machine)} cores, torch {machine.get('torch', '?')}"
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


def ratios_by_shape(results: Path, name: str, field: str, intro, script: str) -> str:
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
