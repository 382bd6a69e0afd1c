"""``export --format ctranslate2`` and ``--format argos``: what CTranslate2, Argos Translate
(and so LibreTranslate) read, checked with their own APIs on the shipped model."""

import gzip
import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from aiayn.errors import UserError
from aiayn.infer.translate import translate_best
from aiayn.modeldir import load_model_and_tokenizer
from tests.conftest import REPO_ROOT

ctranslate2 = pytest.importorskip("ctranslate2", reason="CTranslate2 is not installed")
pytest.importorskip("transformers", reason="CTranslate2's converter needs transformers")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

from aiayn.interop.argos import export_argos  # noqa: E402
from aiayn.interop.ctranslate2 import export_ctranslate2  # noqa: E402

MODEL = REPO_ROOT / "models" / "ding-de-en"


@pytest.fixture(scope="module")
def shipped(shipped_copy):
    directory = shipped_copy
    model, tokenizer = load_model_and_tokenizer(directory)
    lines = gzip.decompress((REPO_ROOT / "data/ding-de-en/test.de.gz").read_bytes())
    texts = lines.decode().splitlines()[:12]
    return directory, model, tokenizer, texts, translate_best(model, tokenizer, texts)


def test_ctranslate2_export_translates_from_sentencepiece_pieces_as_aiayn(shipped, tmp_path):
    import sentencepiece as spm

    directory, _, tokenizer, texts, want = shipped
    out = tmp_path / "ct2"
    (out / "stale").mkdir(parents=True)  # a previous export: with force, replaced whole
    (out / "config.json").write_text("{}")
    with pytest.raises(UserError, match="add --force"):
        export_ctranslate2(directory, out)
    summary = export_ctranslate2(directory, out, force=True)
    assert summary["format"] == "ctranslate2" and summary["quantization"] is None
    assert sorted(p.name for p in out.iterdir()) == [
        "aiayn.json", "config.json", "model.bin", "sentencepiece.model", "shared_vocabulary.json"
    ]  # fmt: skip
    assert json.loads((out / "config.json").read_text())["add_source_eos"] is True
    assert (out / "sentencepiece.model").read_bytes() == tokenizer.proto
    sp = spm.SentencePieceProcessor(model_file=str(out / "sentencepiece.model"))
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    results = translator.translate_batch(
        [sp.encode(t, out_type=str) for t in texts], beam_size=1, max_decoding_length=256
    )
    assert [sp.decode(r.hypotheses[0]) for r in results] == want


def test_argos_package_holds_what_argos_translate_reads(shipped, tmp_path):
    directory, _, tokenizer, _, _ = shipped
    out = tmp_path / "de_en.argosmodel"
    summary = export_argos(directory, out)
    assert (summary["from"], summary["to"]) == ("de", "en")  # from the model's run.json
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
        root = summary["package"]
        assert {n.split("/")[0] for n in names} == {root}  # one directory, extracted as is
        metadata = json.loads(z.read(f"{root}/metadata.json"))
        assert z.read(f"{root}/sentencepiece.model") == tokenizer.proto
        config = json.loads(z.read(f"{root}/model/config.json"))
    assert {f"{root}/model/model.bin", f"{root}/README.md"} <= set(names)
    assert config["add_source_eos"] is True  # argos passes sentencepiece pieces alone
    assert metadata["from_code"] == "de" and metadata["to_code"] == "en"
    assert metadata["type"] == "translate" and metadata["from_name"] == "German"
    has_spacy = any(n.startswith(f"{root}/spacy/") for n in names)
    try:
        import spacy  # noqa: F401

        assert has_spacy and summary["sentence_splitter"] == "spacy"
    except ImportError:
        assert not has_spacy and summary["sentence_splitter"] is None


def test_argos_export_needs_a_language_pair(shipped, tmp_path):
    directory = tmp_path / "model"
    shutil.copytree(shipped[0], directory)
    (directory / "run.json").unlink()
    with pytest.raises(UserError, match="names no language pair") as refused:
        export_argos(directory, tmp_path / "x.argosmodel")
    assert str(refused.value).startswith(f"{directory}: its run.json")  # the path, as given
    summary = export_argos(directory, tmp_path / "x.argosmodel", source="de", target="en")
    assert summary["package"] == "translate-de_en-1_0"


ARGOS_SCRIPT = """
import json, sys
from argostranslate import package, translate
package.install_from_path(sys.argv[1])
[pkg] = [p for p in package.get_installed_packages() if p.from_code == "de"]
texts = json.loads(sys.argv[2])
out = [translate.translate(t, "de", "en") for t in texts]
print(json.dumps({"package": pkg.package_path.name, "out": out}))
"""


@pytest.mark.slow  # starts Argos Translate (spaCy, stanza, ctranslate2) in a subprocess
def test_argos_translate_installs_the_package_and_translates_as_aiayn(shipped, tmp_path):
    pytest.importorskip("argostranslate", reason="argostranslate is not installed")
    spacy = pytest.importorskip("spacy", reason="spaCy is not installed")
    directory, model, tokenizer, texts, _ = shipped
    package_file = tmp_path / "de_en.argosmodel"
    export_argos(directory, package_file)
    home = tmp_path / "home"
    env = {
        **os.environ,
        "HOME": str(home),  # argos keeps its packages, settings and caches under these
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "ARGOS_CHUNK_TYPE": "SPACY",  # the package's own splitter: nothing to download
        "ARGOS_BEAM_SIZE": "1",  # greedy, as aiayn translate by default
        "ARGOS_COMPUTE_TYPE": "float32",
        "ARGOS_DEVICE_TYPE": "cpu",
    }
    two = f"{texts[0]} {texts[1]}"  # split into two sentences, translated, joined
    result = subprocess.run(
        [sys.executable, "-c", ARGOS_SCRIPT, str(package_file), json.dumps([*texts, two])],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    nlp = spacy.blank("de")  # argos: the package's pipeline with spaCy's sentencizer added
    nlp.add_pipe("sentencizer")
    want = []
    for text in [*texts, two]:  # each sentence translated alone, the translations joined
        sentences = [s.text for s in nlp(text).sents]
        want.append(" ".join(translate_best(model, tokenizer, sentences)))
    assert sum(len(list(nlp(t).sents)) > 1 for t in texts) >= 1  # some lines were split
    assert got["out"] == want
    assert (home / "data" / "argos-translate" / "packages" / got["package"] / "spacy").is_dir()
