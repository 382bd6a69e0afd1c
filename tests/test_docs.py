"""The documentation is checked: links resolve, every command block of README.md and docs/ runs
(scripts/check_docs.py), and docs/performance.md is what bench/report.py makes of the records."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


def load_script(name: str, path: Path):
    """A script as a module, imported once under ``name``."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while it executes
        spec.loader.exec_module(module)
    return sys.modules[name]


check_docs = load_script("aiayn_docs_check", REPO_ROOT / "scripts" / "check_docs.py")
report = load_script("aiayn_bench_report", REPO_ROOT / "bench" / "report.py")


def run_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "check_docs.py"), *args],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


# links and check comments


def test_every_link_resolves_and_every_block_says_how_it_is_checked():
    problems = [e for page in check_docs.pages() for e in check_docs.link_errors(page)]
    problems += [
        e
        for page in check_docs.pages()
        for block in check_docs.blocks(page)
        for e in check_docs.directive_errors(block)
    ]
    assert not problems, "\n".join(problems)


def test_a_broken_link_or_anchor_is_caught(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## A section\n")
    page.write_text(
        "# Page\n\n[fine](other.md#a-section) [here](#page) [web](https://example.org/x)\n"
        "[gone](missing.md) [no anchor](other.md#no-such-section)\n"
        "```bash\n[inside code](not-a-link.md)\n```\n"
    )
    errors = check_docs.link_errors(page)
    assert len(errors) == 2, errors
    assert "no file" in errors[0] and "missing.md" in errors[0]
    assert "#no-such-section" in errors[1]


def test_a_block_not_run_must_say_why(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- not run: needs a GPU -->\n```bash\nnvidia-smi\n```\n\n"
        "<!-- not run -->\n```bash\naiayn train\n```\n\n"
        "<!-- check: sometimes -->\n```python\nprint(1)\n```\n"
    )
    found = check_docs.blocks(page)
    assert [b.kind() for b in found] == ["not run", "not run", "sometimes"]
    errors = [e for b in found for e in check_docs.directive_errors(b)]
    assert len(errors) == 2 and "needs a reason" in errors[0] and "unknown check" in errors[1]


def test_anchors_follow_github():
    assert check_docs.slug("torch.compile of a feed-forward block") == (
        "torchcompile-of-a-feed-forward-block"
    )
    assert check_docs.slug("Kept changes (A/B runs)") == "kept-changes-ab-runs"
    assert check_docs.slug("The `aiayn serve` page") == "the-aiayn-serve-page"


# how commands are read and run


def test_commands_join_continuations_and_quotes_and_drop_comments():
    code = (
        "# a comment line\n"
        "aiayn train configs/x.toml \\\n    --out runs/x   # trains\n"
        'curl -d \'{"a": 1,\n  "b": "# not a comment"}\' localhost:8000/x\n'
    )
    assert check_docs.commands(code) == [
        "aiayn train configs/x.toml      --out runs/x",
        'curl -d \'{"a": 1,\n  "b": "# not a comment"}\' localhost:8000/x',
    ]


def test_train_gets_a_tiny_model_and_the_port_a_free_one():
    command = check_docs.substitute("aiayn prepare x && aiayn train c.toml --out r", 4321)
    first, second = command.split("&&")
    assert "--set" not in first and second.split()[:4] == ["aiayn", "train", "c.toml", "--out"]
    assert "train.max_steps=2" in second and "--quiet" in second
    assert check_docs.substitute("curl -s localhost:8000/health", 4321) == (
        "curl --fail-with-body --max-time 120 -s localhost:4321/health"
    )


def test_only_plain_aiayn_commands_run_in_process():
    plan = check_docs.in_process_plan('echo "Ein Satz." | aiayn translate m --beam 4 > out.txt')
    assert plan == [("Ein Satz.\n", ["translate", "m", "--beam", "4"], None, "out.txt")]
    assert check_docs.in_process_plan("aiayn a && aiayn b < in.txt") == [
        (None, ["a"], None, None),
        (None, ["b"], "in.txt", None),
    ]
    for other in ["aiayn x || echo $?", "python bench/x.py", "zcat f | head -3 > g"]:
        assert check_docs.in_process_plan(other) == []


def test_a_failing_command_fails_its_page(tmp_path):
    page = tmp_path / "broken.md"
    page.write_text("# Broken\n\n```bash\naiayn translate models/no-such-model < /dev/null\n```\n")
    done = run_check(str(page))
    assert done.returncode == 1
    assert f"FAIL {page}:3" in done.stdout and "no-such-model" in done.stdout


def pages_with_blocks(kind: str) -> list[str]:
    return [
        str(page.relative_to(REPO_ROOT))
        for page in check_docs.pages()
        if any(
            b.kind() == kind for b in check_docs.blocks(page) if b.language in {"bash", "python"}
        )
    ]


def test_every_command_block_of_the_docs_runs():
    """Every page's blocks, in one process (one start of torch), in a scratch directory."""
    pages = sorted(set(pages_with_blocks("run") + pages_with_blocks("last")))
    done = run_check(*pages)
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-5000:]
    assert "FAIL" not in done.stdout


@pytest.mark.slow
def test_every_command_block_runs_with_the_slow_ones():
    done = run_check("--slow", *pages_with_blocks("slow"))
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-5000:]


# the generated performance page


def test_performance_page_is_what_the_records_give():
    assert report.PAGE.read_text(encoding="utf-8") == report.render(), (
        "docs/performance.md is out of date with bench/results: run python bench/report.py"
    )


def test_interop_quotes_the_latest_package_fine_tune_record():
    """docs/interop.md's table of the package fine-tune is the latest record's, as
    docs/performance.md shows it (bench/report_sections/finetune_argos.py makes both)."""
    section = report.finetune_argos
    record = report.load(report.RESULTS, "finetune_argos")[-1]
    page = (REPO_ROOT / "docs" / "interop.md").read_text(encoding="utf-8")
    assert section.gain_table(record) in page, "docs/interop.md: quote gain_table(record)"
    assert " ".join(section.summary(record).split()) in " ".join(page.split())


def test_a_record_added_by_hand_makes_the_page_stale(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(report.RESULTS, results)
    latest = report.load(results, "decode_speed")[-1]
    added = json.loads(json.dumps(latest))
    added["time"] = "2099-01-01T00:00:00"
    added["command"] = "python bench/decode_speed.py models/ding-de-en --threads 1"
    added["commit"] = "0123abc"
    run = next(iter(added["by_threads"].values()))
    replaced = f"| greedy, KV cache | {run['results']['greedy, KV cache']['tokens_per_s']:,.0f} |"
    run["results"]["greedy, KV cache"]["tokens_per_s"] = 123456.0
    with open(results / "decode_speed.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(added) + "\n")
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "report.py"), "--check", "--results", str(results)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1 and "out of date" in done.stderr
    page = report.render(results)
    assert "123,456" in page and "`0123abc`" in page and "2099-01-01" in page
    assert replaced in report.render()  # the figure it replaced
    assert replaced not in page
    assert page.count("## Decoding speed") == 1  # the new record replaced the old as current
