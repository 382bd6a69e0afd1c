"""``aiayn translate --glossary / --keep-placeholders / --keep``: terms in every line that has
them, bad glossaries refused before the model loads, and CTranslate2 asked for terms."""

import io
import json
import re

import pytest

from aiayn.cli import main
from tests.serve.conftest import model_dirs  # noqa: F401  (tiny model directories)

LINES = "Die Schraube ist locker.\nDas Haus ist alt.\nDatei %s gelöscht, {name}.\n"


def translate(model, monkeypatch, capsys, *flags, text=LINES):
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code = main(["translate", str(model), "--max-len-offset", "30", *flags])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


@pytest.mark.parametrize("kind", ["json", "tsv"])
def test_glossary_and_placeholders(model_dirs, tmp_path, monkeypatch, capsys, kind):  # noqa: F811
    path = tmp_path / f"g.{kind}"
    if kind == "json":
        path.write_text(json.dumps({"de_en": {"schraube": "bolt", "Mutter": "nut"}}))
    else:
        path.write_text("de\ten\nschraube\tbolt\nMutter\tnut\n")
    flags = ["--glossary", str(path), "--keep-placeholders", "--keep", r"\bHaus\b"]
    code, out, _ = translate(model_dirs["translator"], monkeypatch, capsys, *flags)
    assert code == 0 and len(out) == 3
    assert "bolt" in out[0] and "nut" not in out[0]
    assert "Haus" in out[1]
    assert "%s" in out[2] and "{name}" in out[2]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"de_en": {"Schraube": ""}}', r'g\.json: "de_en" -> "Schraube": a term must be'),
        ('{"fr_en": {"vis": "bolt"}}', r"g\.json: no terms for de_en .* it has: fr_en"),
    ],
)
def test_a_bad_glossary_is_one_line_naming_it(
    model_dirs,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
    content,
    message,
):
    path = tmp_path / "g.json"
    path.write_text(content)
    code, out, err = translate(
        model_dirs["translator"], monkeypatch, capsys, "--glossary", str(path)
    )
    assert code != 0 and out == []
    assert "Traceback" not in err
    assert re.search(message, err), err


def test_a_bad_keep_expression_is_named(model_dirs, monkeypatch, capsys):  # noqa: F811
    code, _, err = translate(model_dirs["translator"], monkeypatch, capsys, "--keep", "(x")
    assert code != 0 and "'(x' is not a regular expression" in err


def test_serve_refuses_a_bad_glossary_before_loading(model_dirs, tmp_path, capsys):  # noqa: F811
    path = tmp_path / "g.tsv"
    path.write_text("Schraube\tbolt\n")
    code = main(["serve", str(model_dirs["translator"]), "--glossary", str(path), "--port", "0"])
    assert code != 0
    assert "g.tsv: line 1: the first line names the languages" in capsys.readouterr().err


def test_serve_help_names_the_keep_flags(capsys):
    """Their help holds "%s" and "%(name)s", which argparse formats: escaped, or --help fails."""
    assert main(["serve", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--keep-placeholders" in out and "%(name)s" in out


@pytest.mark.parametrize("flags", [["--keep-placeholders"], ["--glossary", "g.json"]])
def test_serve_with_ctranslate2_refuses_terms_before_loading(model_dirs, tmp_path, capsys, flags):  # noqa: F811
    """Every request holding a term would have been refused, each with advice for a client."""
    (tmp_path / "g.json").write_text('{"de_en": {"Schraube": "bolt"}}')
    flags = [str(tmp_path / f) if f.endswith(".json") else f for f in flags]
    args = ["serve", str(model_dirs["translator"]), "--engine", "ctranslate2", *flags]
    # an address no socket binds: a server that started anyway stops at once
    assert main([*args, "--host", "256.0.0.1", "--port", "0"]) != 0
    assert "CTranslate2 has no constrained search" in capsys.readouterr().err
