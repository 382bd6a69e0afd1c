"""Every machine the records were measured on (CPU, vector units, cores), with how many
records of which comparisons it holds and when they were taken."""

from __future__ import annotations

from pathlib import Path

from .common import cores, load, table

TITLE = "Hosts measured"
INTRO = (
    "Every machine a record below was measured on (the CPU as `/proc/cpuinfo` names it, the "
    "vector units PyTorch's kernels choose by); each table names its own."
)


def render(results: Path) -> str:
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
                cores(machine),
            )
            entry = seen.setdefault(key, {"records": 0, "files": set(), "dates": []})
            entry["records"] += 1
            entry["files"].add(path.stem)
            entry["dates"].append(record.get("time", "")[:10])
    rows = [
        [cpu, flags, count, str(e["records"]), min(filter(None, e["dates"]), default="?"),
         max(e["dates"]) or "?", ", ".join(sorted(e["files"]))]
        for (cpu, flags, count), e in seen.items()
    ]  # fmt: skip
    if not rows:
        return ""
    return table(
        ["CPU", "vector units", "cores", "records", "first", "last", "comparisons"], rows, {2, 3}
    )
