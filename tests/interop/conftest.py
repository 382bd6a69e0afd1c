"""Session fixtures of tests/interop: Argos Translate packages built once (argos_fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest


def _built(tmp_path_factory, kind: str) -> Path:
    for module in ("ctranslate2", "sentencepiece", "sacremoses", "subword_nmt"):
        pytest.importorskip(module, reason=f"building an Argos package needs {module}")
    if kind == "marian":
        pytest.importorskip(
            "transformers", reason="the Marian package is converted from transformers"
        )
    if kind == "prenorm":
        pytest.importorskip("spacy", reason="the de -> en package carries a spaCy pipeline")
    from tests.interop.argos_fixtures import BUILDERS

    root = tmp_path_factory.getbasetemp() / "argos-packages"
    root.mkdir(exist_ok=True)
    return BUILDERS[kind](root)


@pytest.fixture(scope="session")
def prenorm_package(tmp_path_factory) -> Path:
    """de -> en .argosmodel: OpenNMT-py layout (pre-norm), sentencepiece, spaCy splitter."""
    return _built(tmp_path_factory, "prenorm")


@pytest.fixture(scope="session")
def marian_package(tmp_path_factory) -> Path:
    """en -> fr .argosmodel: a Marian model converted by CTranslate2, sentencepiece."""
    return _built(tmp_path_factory, "marian")


@pytest.fixture(scope="session")
def bpe_package(tmp_path_factory) -> Path:
    """en -> es .argosmodel: OpenNMT-py layout, Moses + subword-nmt, .txt vocabularies."""
    return _built(tmp_path_factory, "bpe")


@pytest.fixture(scope="session")
def argos_packages(prenorm_package, marian_package, bpe_package) -> dict[str, Path]:
    """The three packages by kind ("prenorm", "marian", "bpe"): de -> en, en -> fr, en -> es."""
    return {"prenorm": prenorm_package, "marian": marian_package, "bpe": bpe_package}
