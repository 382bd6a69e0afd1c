"""Argos Translate packages built here from real artefacts (nothing downloaded), as Argos
Translate's packagers build them: a CTranslate2 model written by CTranslate2's own converters
(int8), the tokenizer, metadata.json and a README, zipped as one folder.

Three pairs, two sharing English, so that de -> fr can pivot through en:

* ``prenorm`` de -> en: a random pre-norm Transformer in OpenNMT-py's checkpoint layout
  (OpenNMT-py's names, options and vocabulary: ``<unk> <blank> <s> </s>`` first), converted by
  ``ctranslate2.converters.OpenNMTPyConverter``; one sentencepiece model, one shared
  vocabulary; a blank spaCy pipeline as its sentence splitter (as aiayn's export carries).
* ``marian`` en -> fr: a random transformers ``MarianMTModel`` (post-norm, OPUS-MT's vocabulary
  layout), converted by ``ctranslate2.converters.TransformersConverter``, with
  ``add_source_eos`` set as Argos's Marian packages need; no sentence splitter.
* ``bpe`` en -> es: another OpenNMT-py model, its text cut by Moses and subword-nmt codes
  (``bpe.model``), with separate source and target vocabularies written as ``.txt`` files,
  as CTranslate2 2.x wrote them into the first Argos packages.

The models are random and tiny (d_model 16): they test reading, not translating well. Text
for training the tokenizers is the shipped ding corpus (German and English); the French and
Spanish sides are German text standing in. ``build_*`` functions write into a folder once and
reuse it; ``argos_view`` asks Argos Translate itself (in a child process, its settings read
from the environment there) what a packages directory holds.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.interop.hf_fixtures import ding_lines, marian_model, sentencepiece_model

PAIRS = {"prenorm": ("de", "en"), "marian": ("en", "fr"), "bpe": ("en", "es")}
NAMES = {"de": "German", "en": "English", "fr": "French", "es": "Spanish"}
TEXT = {
    "de": "de",
    "en": "en",
    "fr": "de",
    "es": "de",
}  # the corpus side a language's text comes from
ONMT_SPECIALS = ["<unk>", "<blank>", "<s>", "</s>"]  # how OpenNMT-py's vocabularies start


def package_name(source: str, target: str) -> str:
    return f"translate-{source}_{target}-1_0"


def metadata(source: str, target: str, **extra) -> dict:
    """metadata.json as Argos Translate's packages write it."""
    return {
        "package_version": "1.0",
        "argos_version": "1.0",
        "from_code": source,
        "from_name": NAMES[source],
        "to_code": target,
        "to_name": NAMES[target],
        "links": [],
        "type": "translate",
        **extra,
    }


def pack(folder: Path, out: Path) -> Path:
    """Zip ``folder`` (one top folder, its name kept) into the .argosmodel ``out`` (written
    whole or not at all)."""
    partial = out.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(folder.rglob("*")):
            z.write(path, path.relative_to(folder.parent).as_posix())
    partial.rename(out)
    return out


# -- models ----------------------------------------------------------------------------------


def opennmt_py_model(
    out: Path,
    src_vocab: list[str],
    tgt_vocab: list[str],
    *,
    d_model: int = 16,
    heads: int = 2,
    layers: int = 2,
    d_ff: int = 32,
    max_len: int = 256,
    seed: int = 0,
) -> Path:
    """A random pre-norm Transformer saved in OpenNMT-py's checkpoint layout, converted to the
    CTranslate2 model ``out`` (int8) by CTranslate2's OpenNMT-py converter."""
    import torch
    from ctranslate2.converters import OpenNMTPyConverter

    g = torch.Generator().manual_seed(seed)

    def rand(*shape: int, scale: float = 0.3):
        return torch.randn(*shape, generator=g) * scale

    state = {}

    def linear(name: str, n_out: int, n_in: int) -> None:
        state[f"{name}.weight"] = rand(n_out, n_in)
        state[f"{name}.bias"] = rand(n_out, scale=0.1)

    def norm(name: str) -> None:
        state[f"{name}.weight"] = 1 + rand(d_model, scale=0.1)
        state[f"{name}.bias"] = rand(d_model, scale=0.1)

    def attention(scope: str) -> None:
        for part in ("linear_query", "linear_keys", "linear_values", "final_linear"):
            linear(f"{scope}.{part}", d_model, d_model)

    def feed_forward(scope: str) -> None:
        norm(f"{scope}.layer_norm")
        linear(f"{scope}.w_1", d_ff, d_model)
        linear(f"{scope}.w_2", d_model, d_ff)

    # OpenNMT-py's PositionalEncoding: sines at even dimensions, cosines at odd ones
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # (L, 1)
    rate = torch.exp(torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(position * rate), torch.cos(position * rate)
    for side, vocab in (("encoder", src_vocab), ("decoder", tgt_vocab)):
        state[f"{side}.embeddings.make_embedding.emb_luts.0.weight"] = rand(len(vocab), d_model)
        state[f"{side}.embeddings.make_embedding.pe.pe"] = pe.unsqueeze(1)  # (L, 1, D)
        norm(f"{side}.layer_norm")
    for i in range(layers):
        scope = f"encoder.transformer.{i}"
        attention(f"{scope}.self_attn")
        norm(f"{scope}.layer_norm")
        feed_forward(f"{scope}.feed_forward")
        scope = f"decoder.transformer_layers.{i}"
        attention(f"{scope}.self_attn")
        attention(f"{scope}.context_attn")
        norm(f"{scope}.layer_norm_1")
        norm(f"{scope}.layer_norm_2")
        feed_forward(f"{scope}.feed_forward")
    opt = argparse.Namespace(
        encoder_type="transformer",
        decoder_type="transformer",
        enc_layers=layers,
        dec_layers=layers,
        heads=heads,
        position_encoding=True,
        max_relative_positions=0,
        pos_ffn_activation_fn="relu",
    )
    checkpoint = {
        "opt": opt,
        "vocab": {"src": list(src_vocab), "tgt": list(tgt_vocab)},
        "model": state,
        "generator": {"weight": rand(len(tgt_vocab), d_model), "bias": rand(len(tgt_vocab))},
    }
    pt = out.with_suffix(".pt")
    torch.save(checkpoint, pt)
    converter = OpenNMTPyConverter(str(pt), unsafe_deserialization=True)  # a file made here
    converter.convert(str(out), quantization="int8", force=True)
    pt.unlink()
    return out


def joint_sentencepiece(languages: tuple[str, str], vocab_size: int = 120) -> bytes:
    lines = ding_lines(TEXT[languages[0]], 200) + ding_lines(TEXT[languages[1]], 200)
    return sentencepiece_model(lines, vocab_size)


def sentencepiece_pieces(proto: bytes) -> list[str]:
    """The pieces of a sentencepiece model, its control and unknown pieces left out."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor()
    sp.load_from_serialized_proto(proto)
    return [
        sp.id_to_piece(i)
        for i in range(sp.get_piece_size())
        if not (sp.is_control(i) or sp.is_unknown(i))
    ]


def marian_ct2_model(out: Path, work: Path, proto: bytes, source: str, target: str) -> Path:
    """A random MarianMTModel with OPUS-MT's vocabulary layout over the sentencepiece model
    ``proto`` (its source and target model), converted to the CTranslate2 model ``out``
    (int8) by CTranslate2's transformers converter; ``add_source_eos`` set, as Argos's
    Marian packages need (its pieces come without ``</s>``)."""
    from ctranslate2.converters import TransformersConverter

    hf = work / "marian-hf"
    hf.mkdir(parents=True, exist_ok=True)
    (hf / "source.spm").write_bytes(proto)
    (hf / "target.spm").write_bytes(proto)
    pieces = ["</s>", "<unk>", *sentencepiece_pieces(proto), "<pad>"]
    (hf / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}))
    (hf / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "MarianTokenizer", "source_lang": source, "target_lang": target
    }))  # fmt: skip
    marian_model(
        hf,
        len(pieces),
        d_model=16,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        max_position_embeddings=256,
    )  # fmt: skip  (Argos decodes up to 256 tokens)
    TransformersConverter(str(hf)).convert(str(out), quantization="int8", force=True)
    config = json.loads((out / "config.json").read_text())
    config["add_source_eos"] = True
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return out


def moses_lines(lines: list[str], lang: str) -> list[str]:
    """``lines`` normalised and tokenized by Moses, as Argos Translate applies it."""
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    normalizer, tokenizer = MosesPunctNormalizer(lang), MosesTokenizer(lang)
    return [" ".join(tokenizer.tokenize(normalizer.normalize(line))) for line in lines]


def bpe_codes(texts: list[str], merges: int = 200) -> str:
    """subword-nmt merge operations learned on Moses-tokenized ``texts``."""
    from subword_nmt.learn_bpe import learn_bpe

    out = io.StringIO()
    learn_bpe(io.StringIO("\n".join(texts) + "\n"), out, merges, min_frequency=2)
    return out.getvalue()


def bpe_vocabulary(codes: str, texts: list[str]) -> list[str]:
    """OpenNMT-py's vocabulary of the BPE pieces of ``texts`` (Moses-tokenized), most
    frequent first."""
    from collections import Counter

    from subword_nmt.apply_bpe import BPE

    bpe = BPE(io.StringIO(codes))
    counts = Counter(p for text in texts for p in bpe.segment_tokens(text.split(" ")) if p)
    return ONMT_SPECIALS + [p for p, _ in counts.most_common() if p not in ONMT_SPECIALS]


def _json_to_txt(model_dir: Path) -> None:
    """A vocabulary file per side as CTranslate2 2.x wrote them: one token a line."""
    for path in sorted(model_dir.glob("*_vocabulary.json")):
        tokens = json.loads(path.read_text(encoding="utf-8"))
        path.with_suffix(".txt").write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
        path.unlink()


# -- packages --------------------------------------------------------------------------------


def _folder(work: Path, source: str, target: str, **extra) -> Path:
    shutil.rmtree(work, ignore_errors=True)  # what a build that failed left
    folder = work / package_name(source, target)
    folder.mkdir(parents=True)
    (folder / "metadata.json").write_text(json.dumps(metadata(source, target, **extra), indent=4))
    (folder / "README.md").write_text(
        f"# {NAMES[source]} -> {NAMES[target]}\n\nA random test model.\n"
    )
    return folder


def build_prenorm_package(root: Path) -> Path:
    """de -> en, OpenNMT-py layout, sentencepiece, spaCy splitter: the .argosmodel path."""
    out = root / "prenorm.argosmodel"
    if out.is_file():
        return out
    source, target = PAIRS["prenorm"]
    work = root / "prenorm-work"
    folder = _folder(work, source, target)
    proto = joint_sentencepiece((source, target))
    vocab = ONMT_SPECIALS + [p for p in sentencepiece_pieces(proto) if p not in ONMT_SPECIALS]
    opennmt_py_model(folder / "model", vocab, vocab, seed=1)
    (folder / "sentencepiece.model").write_bytes(proto)
    import spacy

    spacy.blank(source).to_disk(folder / "spacy")
    return pack(folder, out)


def build_marian_package(root: Path) -> Path:
    """en -> fr, Marian converted by CTranslate2, sentencepiece, no splitter."""
    out = root / "marian.argosmodel"
    if out.is_file():
        return out
    source, target = PAIRS["marian"]
    work = root / "marian-work"
    folder = _folder(work, source, target)
    proto = joint_sentencepiece((source, target))
    marian_ct2_model(folder / "model", work, proto, source, target)
    (folder / "sentencepiece.model").write_bytes(proto)
    return pack(folder, out)


def build_bpe_package(root: Path) -> Path:
    """en -> es, OpenNMT-py layout, Moses + subword-nmt, separate .txt vocabularies."""
    out = root / "bpe.argosmodel"
    if out.is_file():
        return out
    source, target = PAIRS["bpe"]
    work = root / "bpe-work"
    folder = _folder(work, source, target)
    src_text = moses_lines(ding_lines(TEXT[source], 300), source)
    tgt_text = moses_lines(ding_lines(TEXT[target], 300), target)
    codes = bpe_codes(src_text + tgt_text)
    model = opennmt_py_model(
        folder / "model", bpe_vocabulary(codes, src_text), bpe_vocabulary(codes, tgt_text), seed=2
    )
    _json_to_txt(model)
    (folder / "bpe.model").write_text(codes, encoding="utf-8")
    return pack(folder, out)


BUILDERS = {
    "prenorm": build_prenorm_package,
    "marian": build_marian_package,
    "bpe": build_bpe_package,
}


# -- Argos Translate itself --------------------------------------------------------------------

ARGOS_VIEW = """
import json, sys
from pathlib import Path
from argostranslate import package, translate
for path in json.loads(sys.argv[1]):
    package.install_from_path(Path(path))
packages = []
for p in package.get_installed_packages():
    packages.append({
        "folder": p.package_path.name, "from_code": p.from_code, "to_code": p.to_code,
        "from_name": p.from_name, "to_name": p.to_name, "package_version": p.package_version,
        "argos_version": p.argos_version, "target_prefix": p.target_prefix, "type": p.type,
        "tokenizer": type(getattr(p, "tokenizer", None)).__name__,
        "splitter": p.packaged_sbd_path.name if p.packaged_sbd_path else None,
    })
def direct(t):  # a package's own translation (cached), not a pivot or the identity
    return type(getattr(t, "underlying", t)).__name__ == "PackageTranslation"
languages = [
    {"code": lang.code, "name": lang.name,
     "to": sorted({t.to_lang.code for t in lang.translations_from if t.to_lang.code != lang.code}),
     "direct": sorted({t.to_lang.code for t in lang.translations_from if direct(t)})}
    for lang in translate.get_installed_languages()
]
class OneSentence:  # each text is one sentence: Argos's splitters would download a model
    def split_sentences(self, text):
        return [text]
import ctranslate2
translations = {}
for key, texts in json.loads(sys.argv[2]).items():
    source, target = key.split("-")
    [pkg] = [p for p in package.get_installed_packages() if (p.from_code, p.to_code) == (source, target)]
    translator = ctranslate2.Translator(str(pkg.package_path / "model"), device="cpu",
                                        compute_type=sys.argv[3], intra_threads=1)
    translations[key] = [
        translate.apply_packaged_translation(pkg, t, translator, OneSentence(), 1)[0].value
        for t in texts
    ]
print(json.dumps({"packages": packages, "languages": languages, "translations": translations}))
"""


def argos_env(home: Path, packages: Path) -> dict[str, str]:
    """The environment of an Argos Translate whose settings, caches and packages live under
    ``home`` (``packages``: ARGOS_PACKAGES_DIR); it never reads the user's."""
    return {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "ARGOS_PACKAGES_DIR": str(packages),
        "ARGOS_DEVICE_TYPE": "cpu",
    }


def argos_view(
    home: Path,
    packages: Path,
    install: list[Path] = (),
    translate: dict[str, list[str]] | None = None,
    compute_type: str = "float32",
) -> dict:
    """What Argos Translate sees in the packages directory ``packages`` after installing
    ``install`` with its own ``package.install_from_path``: each package's metadata, tokenizer
    class and packaged splitter ("packages"), and each language with the languages it reaches
    ("to", pivots included) and those a package of its own reaches ("direct").

    ``translate``: texts by pair ("de-en"), each translated as one sentence by Argos
    Translate's ``apply_packaged_translation`` (its tokenizer, beam 4, length penalty 0.2,
    target prefix, replace_unknowns) over CTranslate2 in ``compute_type``; the texts come
    back in "translations" by pair."""
    argv = [json.dumps([str(p) for p in install]), json.dumps(translate or {}), compute_type]
    result = subprocess.run(
        [sys.executable, "-c", ARGOS_VIEW, *argv],
        env=argos_env(home, packages),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


# -- pytest fixtures (tests/interop/conftest.py makes them available there; elsewhere, import
# them into the test module); each package is built once a session, in one folder -----------


def _built(tmp_path_factory, kind: str) -> Path:
    for module in ("ctranslate2", "sentencepiece", "sacremoses", "subword_nmt"):
        pytest.importorskip(module, reason=f"building an Argos package needs {module}")
    if kind == "marian":
        pytest.importorskip(
            "transformers", reason="the Marian package is converted from transformers"
        )
    if kind == "prenorm":
        pytest.importorskip("spacy", reason="the de -> en package carries a spaCy pipeline")
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
