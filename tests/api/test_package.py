"""``aiayn.load`` of an Argos Translate package or a CTranslate2 model: a ``PackageTranslator``
that decodes with CTranslate2 on the package's own model, and with aiayn's import of it (made
once, kept in a checked cache, loaded on first need) for what only aiayn's model does.

That the CTranslate2 side answers as Argos Translate does is checked against Argos Translate
itself in tests/serve/test_argos_serve.py; here, which engine answers what, the cache, the
sentence splitter, and the command line."""

from __future__ import annotations

import io
import math
import shutil
import warnings
from pathlib import Path

import pytest

import aiayn
from aiayn.api import load_for
from aiayn.api.package import PackageTranslator
from aiayn.cli import main
from aiayn.errors import OptionError, UserError
from aiayn.interop.argos_package import read_package
from aiayn.interop.foreign import ARCHIVE, CTRANSLATE2, PACKAGE, foreign_kind

pytest.importorskip("ctranslate2", reason="a package decodes with CTranslate2")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GERMAN = ["Die Tonqualität ist miserabel.", "Weihnachten steht vor der Tür."]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("package-cache")


@pytest.fixture(scope="module")
def de_en(prenorm_package, cache) -> PackageTranslator:
    """The de -> en archive (it carries a spaCy sentence splitter), loaded once."""
    return aiayn.load(prenorm_package, cache_dir=cache)


def test_what_a_path_holds(argos_packages, tmp_path, model_dirs):
    installed = read_package(argos_packages["marian"], tmp_path)
    assert foreign_kind(argos_packages["marian"]) == ARCHIVE
    assert foreign_kind(installed.path) == PACKAGE
    assert foreign_kind(installed.model_dir) == CTRANSLATE2
    assert foreign_kind(model_dirs["translator"]) is None  # aiayn's own
    assert foreign_kind(tmp_path / "absent") is None


def test_plain_requests_decode_with_ctranslate2_and_terms_with_the_import(prenorm_package, cache):
    de_en = aiayn.load(prenorm_package, cache_dir=cache)  # its own: nothing imported yet
    assert isinstance(de_en, PackageTranslator) and de_en.languages == ("de", "en")
    assert de_en.engine == "ctranslate2" and de_en.quantization == "int8"
    plain = de_en.translate(GERMAN)
    assert [t.text for t in plain] == [t.text for t in de_en.translate(GERMAN, beam=4)]
    assert all(not math.isnan(t.score) and math.isnan(t.log_prob) for t in plain)
    two = de_en.translate(GERMAN, nbest=2)  # Argos Translate's beam: max(2, 4)
    assert [len(t.hypotheses) for t in two] == [2, 2]
    started = de_en.translate(GERMAN, prefix=["Hello there", ""])
    assert started[0].text.startswith("Hello there")
    assert de_en.translate(GERMAN[:1], beam=1)[0].text  # greedy, CTranslate2's
    assert not de_en.is_imported  # none of these needed aiayn's model
    # a text with a term goes to the import (constrained beam search), the other stays
    mixed = de_en.translate(GERMAN, glossary={"Tonqualität": "the sound"})
    assert de_en.is_imported
    assert "the sound" in mixed[0].text
    assert mixed[1].text == plain[1].text
    assert not mixed[0].unmet
    assert len(list((cache / "argos" / "imports").glob("[!.]*"))) == 1


def test_score_attention_sampling_and_alignments_run_the_import(de_en):
    imported = de_en.imported
    assert imported.config.family == "encoder-decoder"
    assert de_en.score(GERMAN, ["Good.", "Yes."]) == imported.score(GERMAN, ["Good.", "Yes."])
    assert de_en.attention(GERMAN[0]).cross  # every layer's weights
    sampled = de_en.translate(GERMAN, sampling=aiayn.Sampling(seed=3), nbest=2)
    again = imported.translate(GERMAN, sampling=aiayn.Sampling(seed=3), nbest=2, lenpen=0.2)
    assert [h.text for t in sampled for h in t.hypotheses] == [
        h.text for t in again for h in t.hypotheses
    ]
    aligned = de_en.translate(GERMAN, alignment=True)
    assert all(t.alignment is not None for t in aligned)


def test_the_package_splitter_cuts_sentences(de_en, marian_package, cache):
    assert de_en.split_sentences("Das ist gut. Wie geht es dir?") == [
        "Das ist gut.",
        "Wie geht es dir?",
    ]
    assert aiayn.load(marian_package, cache_dir=cache).split_sentences is None  # aiayn's


def test_packages_carrying_the_same_splitter_share_it(de_en, tmp_path):
    """A pipeline is loaded once for every package whose splitter files are the same (spaCy's
    takes 0.1-0.3 s), and only while a package uses it."""
    import gc
    import weakref

    from aiayn.interop.argos_splitter import package_splitter

    copy = shutil.copytree(de_en.foreign.package.path, tmp_path / "copy")
    assert package_splitter(read_package(copy)) is de_en.split_sentences
    meta = copy / "spacy" / "meta.json"
    meta.write_text(meta.read_text() + "\n")  # other bytes, the same pipeline
    other = package_splitter(read_package(copy))
    assert other is not de_en.split_sentences
    text = "Das ist gut. Wie geht es dir? Gut."
    assert other(text) == de_en.split_sentences(text)
    released = weakref.ref(other)
    del other
    gc.collect()
    assert released() is None  # no package uses it: not kept


def test_the_cache_is_checked_and_made_again_when_damaged(prenorm_package, cache, de_en):
    assert de_en.imported.path.is_dir()  # made (once) before
    again = aiayn.load(prenorm_package, cache_dir=cache)
    imported = again.foreign.imported(cache)
    assert imported == de_en.foreign.imported(cache)  # kept, not imported again
    weights = imported / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="damaged"):
        assert again.foreign.imported(cache) == imported
    assert weights.read_bytes() != bytes(data)  # imported anew
    extracted = again.foreign.model_dir / "model.bin"
    whole = extracted.read_bytes()
    extracted.write_bytes(whole[:-1])
    with pytest.warns(UserWarning, match="damaged"):
        fresh = aiayn.load(prenorm_package, cache_dir=cache)
    assert (fresh.foreign.model_dir / "model.bin").read_bytes() == whole  # extracted anew


def test_engines_and_options_a_package_takes(prenorm_package, cache):
    torch_only = aiayn.load(prenorm_package, cache_dir=cache, engine="torch")
    assert type(torch_only) is aiayn.Translator and torch_only.languages == ("de", "en")
    with pytest.raises(OptionError, match="quantize"):
        aiayn.load(prenorm_package, cache_dir=cache, quantize="int8")
    with pytest.raises(UserError, match="generate needs a decoder-only"):
        load_for("generate", prenorm_package, cache_dir=cache)


def test_a_ctranslate2_directory_needs_its_sentencepiece_model(argos_packages, tmp_path):
    package = read_package(argos_packages["marian"], tmp_path / "installed")
    bare = tmp_path / "bare"
    shutil.copytree(package.model_dir, bare)
    with pytest.raises(UserError, match="sentencepiece"):
        aiayn.load(bare, cache_dir=tmp_path / "cache")
    shutil.copy(package.path / "sentencepiece.model", bare)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tr = aiayn.load(bare, cache_dir=tmp_path / "cache")
    as_package = aiayn.load(package.path, cache_dir=tmp_path / "cache")
    assert tr.languages is None  # nothing in it says
    assert (
        tr.translate(["Good morning."])[0].text == as_package.translate(["Good morning."])[0].text
    )


def test_translate_and_evaluate_on_the_command_line(
    de_en, prenorm_package, cache, monkeypatch, capsys, tmp_path
):
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(cache))
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(GERMAN) + "\n"))
    assert main(["translate", str(prenorm_package)]) == 0
    assert capsys.readouterr().out.splitlines() == [t.text for t in de_en.translate(GERMAN)]
    monkeypatch.chdir(tmp_path)
    corpus = Path(__file__).parents[2] / "data" / "ding-de-en"
    argv = ["evaluate", str(prenorm_package), "--corpus", str(corpus), "--limit", "3"]
    assert main([*argv, "--samples", "0"]) == 0
    hypotheses = (tmp_path / "prenorm.test.hyp.txt").read_text().splitlines()
    assert len(hypotheses) == 3
