"""Tests for the corpus registry: the corpus table of docs/corpora.md and the bundled copies
agree with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiayn.cli import main
from aiayn.data.corpora.registry import CORPORA

REPO_ROOT = Path(__file__).resolve().parents[3]
CORPUS_PAGE = REPO_ROOT / "docs" / "corpora.md"
TABLE_HEADER = "| corpus | family | task | source | license |"


def docs_corpus_table() -> list[list[str]]:
    """The cells of each row of the docs' corpus table (the one under TABLE_HEADER)."""
    lines = CORPUS_PAGE.read_text(encoding="utf-8").splitlines()
    assert lines.count(TABLE_HEADER) == 1, f"{CORPUS_PAGE} needs one table headed {TABLE_HEADER}"
    rows = []
    for line in lines[lines.index(TABLE_HEADER) + 2 :]:  # skip the |---| line
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_docs_table_lists_exactly_the_registry():
    rows = docs_corpus_table()
    names = [row[0].strip("`") for row in rows]
    assert sorted(names) == sorted(CORPORA), (
        "docs/corpora.md's corpus table and the registry differ"
    )
    assert len(names) == len(set(names))
    for name, family, task, source, license_ in rows:
        corpus = CORPORA[name.strip("`")]
        assert (family, task, source, license_) == (
            corpus.family,
            corpus.task,
            corpus.description,
            corpus.license,
        ), f"docs/corpora.md's row for {name} differs from the registry"


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_bundled_copy_holds_the_registered_files(name):
    corpus = CORPORA[name]
    assert corpus.name == name
    folder = REPO_ROOT / "data" / name
    missing = [f for f in (*corpus.files, "stats.json") if not (folder / f).is_file()]
    assert missing == []


def test_prepare_offers_every_registered_corpus_and_checks_its_files(tmp_path, capsys):
    for name, corpus in CORPORA.items():
        out = tmp_path / name
        out.mkdir()
        (out / "stats.json").write_text("{}")
        for file in corpus.files[:-1]:  # the last registered file is missing
            (out / file).write_bytes(b"")
        assert main(["prepare", name, "--out", str(out)]) == 2
        assert f"missing {corpus.files[-1]}; use --rebuild" in capsys.readouterr().err
