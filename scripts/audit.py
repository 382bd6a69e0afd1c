"""Replay the bad-input audit (tests/audit/cases.toml) against the command line; count outcomes.

    python scripts/audit.py [--src SRC_DIR] [--only CLASS] [--name TEXT] [--fast]
                            [--verbose] [--json OUT.json] [--keep]

The same cases pytest runs (tests/audit/test_audit.py), here all of them in one go with a
summary by class and what each cost. ``--src`` puts another checkout's ``src`` first on
PYTHONPATH, to audit an older version with the same cases. Outcomes: traceback, silent wrong,
unclear, data loss, failed, ok (see tests/audit/harness.py); read-only and full-disk cases are
skipped where ``unshare -m`` is not allowed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.audit import harness  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(ROOT / "src"), help="the aiayn source tree to audit")
    parser.add_argument("--only", type=int, action="append", help="only these classes (1-9)")
    parser.add_argument("--name", help="only cases whose name or id contains this")
    parser.add_argument("--fast", action="store_true", help="only the cases not marked slow")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--json", help="write the per-case outcomes and costs here")
    parser.add_argument("--keep", action="store_true", help="keep the workspace")
    args = parser.parse_args()
    cases = [
        c
        for c in harness.load_cases()
        if not (args.only and c.cls not in args.only)
        and not (args.name and args.name not in c.name and args.name not in c.id)
        and not (args.fast and c.slow)
    ]
    mount = harness.can_mount()
    root = Path(tempfile.mkdtemp(prefix="aiayn-audit-"))
    ws = harness.Workspace(root, harness.audit_env(Path(args.src)))
    print(f"workspace {root} (auditing {args.src}; host {socket.gethostname()})", flush=True)
    start, cpu = time.perf_counter(), harness.cpu_now()
    counts: dict[str, int] = {}
    rows = []
    for c in cases:
        if c.mount and not mount:
            outcome, why, wall_s, cpu_s, last = "skipped", "no unshare -m", 0.0, 0.0, ""
        else:
            try:
                r = harness.run_case(ws, c, root / "cases" / c.id)
                outcome, why, wall_s, cpu_s = r.outcome, r.why, r.wall_s, r.cpu_s
                last = (r.result.stderr.strip().splitlines() or [""])[-1][:160]
                rc = r.result.returncode
            except Exception as e:  # the audit's own trouble: show it, keep going
                outcome, why, wall_s, cpu_s, last = (
                    "audit error",
                    f"{type(e).__name__}: {e}",
                    0,
                    0,
                    "",
                )
                rc = None
        counts[outcome] = counts.get(outcome, 0) + 1
        rows.append(
            {
                "id": c.id,
                "class": c.cls,
                "case": c.name,
                "slow": c.slow,
                "outcome": outcome,
                "why": why,
                "wall_s": round(wall_s, 2),
                "cpu_s": round(cpu_s, 2),
                "stderr_last": last,
            }
        )
        mark = "  " if outcome in ("ok", "skipped") else "!!"
        cost = f"{wall_s:.1f}s wall {cpu_s:.1f}s cpu"
        print(f"{mark} [{c.cls}] {c.name}: {outcome}{' (' + why + ')' if why else ''}  {cost}")
        if args.verbose or outcome not in ("ok", "skipped"):
            print(f"      rc={rc if outcome != 'skipped' else '-'} stderr: {last}", flush=True)
    total = sum(counts.values())
    wall, cpu = time.perf_counter() - start, harness.cpu_now() - cpu
    print(
        f"\n{total} cases in {wall:.0f}s wall, {cpu:.0f}s cpu (workspace included): "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    )
    by_class: dict[int, dict[str, int]] = {}
    for row in rows:
        by_class.setdefault(row["class"], {}).setdefault(row["outcome"], 0)
        by_class[row["class"]][row["outcome"]] += 1
    for cls in sorted(by_class):
        print(f"  class {cls}: " + ", ".join(f"{k} {v}" for k, v in sorted(by_class[cls].items())))
    for slow in (False, True):
        part = [r for r in rows if r["slow"] == slow]
        print(
            f"  {'slow' if slow else 'default'} set: {len(part)} cases, "
            f"{sum(r['wall_s'] for r in part):.0f}s wall, {sum(r['cpu_s'] for r in part):.0f}s cpu"
        )
    if args.json:
        record = {"counts": counts, "wall_s": round(wall), "cpu_s": round(cpu), "cases": rows}
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    bad = sum(v for k, v in counts.items() if k not in ("ok", "skipped"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
