"""The bad-input audit (cases.toml) as tests: every case must end ``ok``.

The default run holds the cases that need no training; the rest are marked slow
(``pytest -m slow tests/audit``). ``python scripts/audit.py`` runs the same cases and prints
the outcome counts by class.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.audit import harness
from tests.audit.harness import Case, Result, Workspace

CASES = harness.load_cases()


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("audit"), harness.audit_env(harness.ROOT / "src"))


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow else []) for c in CASES],
)
def test_case(case: Case, workspace: Workspace, tmp_path: Path) -> None:
    if case.mount and not harness.can_mount():
        pytest.skip("needs a private mount namespace (unshare -m), not allowed here")
    report = harness.run_case(workspace, case, tmp_path / "case")
    assert report.outcome == "ok", report.explain()


# --------------------------------------------------------------------------- the judge itself


def judged(tmp_path: Path, result: Result, protected=None, **fields) -> str:
    case = Case(id="x", cls=1, name="x", argv=("translate",), **fields)
    return harness.judge(Workspace(tmp_path, {}), case, tmp_path, result, protected or {})[0]


@pytest.mark.parametrize(
    "result, fields, outcome",
    [
        (Result(1, "", "Traceback (most recent call last):\n  boom"), {}, "traceback"),
        (Result(-11, "", ""), {}, "traceback"),
        (Result(0, "out", ""), {}, "silent wrong"),
        (Result(2, "", "error: bad file"), {"says": ("config.json",)}, "unclear"),
        (Result(2, "", "error: config.json: no n_heads"), {"says": ("N_HEADS",)}, "ok"),
        (Result(1, "", "error"), {"expect": "ok"}, "failed"),
        (Result(0, "", ""), {"expect": "warn", "says": ("long",)}, "silent wrong"),
        (Result(0, "", "warning: line 1 too long"), {"expect": "warn", "says": ("long",)}, "ok"),
        (Result(0, "", "", {"problem": "wrong"}), {"expect": "ok"}, "silent wrong"),
        (Result(0, "x", ""), {"expect": "ok", "check": {"fn": "lines", "n": 2}}, "silent wrong"),
    ],
)
def test_judge(tmp_path: Path, result: Result, fields: dict, outcome: str) -> None:
    assert judged(tmp_path, result, **fields) == outcome


def test_judge_sees_a_changed_protected_file(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.write_text("before")
    protected = {str(kept): harness.digest(kept)}
    assert judged(tmp_path, Result(2, "", "error: exists"), protected) == "ok"
    kept.write_text("after")
    assert judged(tmp_path, Result(2, "", "error: exists"), protected) == "data loss"


def test_case_table_refuses_unknown_keys(tmp_path: Path) -> None:
    bad = tmp_path / "cases.toml"
    bad.write_text("[[case]]\nid = 'a'\nclass = 1\nname = 'a'\nargv = ['x']\nexpects = 'ok'\n")
    with pytest.raises(ValueError, match="expects"):
        harness.load_cases(bad)
