"""Argos Translate packages (``.argosmodel``) of aiayn's translation models, which Argos
Translate and LibreTranslate install as their own.

A package is a zip archive holding one directory with ``metadata.json`` (the language pair),
``model/`` (the CTranslate2 conversion, which appends eos to each source itself: Argos
Translate passes sentencepiece's pieces alone), ``sentencepiece.model`` and a README. Argos
Translate splits text into sentences before translating; its default splitter (MiniSBD)
downloads a model for the source language on first use, so the package also carries a spaCy
pipeline of the source language with no trained parts (``spacy/``), to which Argos adds
spaCy's rule-based sentencizer when ``ARGOS_CHUNK_TYPE=SPACY``: with that setting, nothing is
downloaded (spaCy must be installed when the package is built; without it the package is
written without ``spacy/``, and says so).

A model imported from an Argos Translate package or a CTranslate2 model, fine-tuned or not,
goes back in the layout it came in, with its own tokenizer (``sentencepiece.model`` or
``bpe.model``) and target prefix (``aiayn.interop.ctranslate2.exports``).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

from aiayn.errors import UserError
from aiayn.interop.ctranslate2 import exports
from aiayn.modeldir import ModelDir

LANGUAGE_NAMES = {
    "ar": "Arabic", "cs": "Czech", "de": "German", "en": "English", "es": "Spanish",
    "fr": "French", "it": "Italian", "ja": "Japanese", "nl": "Dutch", "pl": "Polish",
    "pt": "Portuguese", "ru": "Russian", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip
PACKAGE_VERSION = "1.0"
LANGUAGE_CODE = re.compile(r"[a-z]{2,3}")  # ISO 639 codes, and Argos's own (zt, pb)


def languages_of(
    model_dir: ModelDir | Path, source: str | None, target: str | None
) -> tuple[str, str]:
    """The language pair: given, or the one the model was trained on (run.json)."""
    directory = ModelDir.open(model_dir)
    data, model_dir = directory.run.get("data", {}), directory.path
    source = source or data.get("src_lang")
    target = target or data.get("tgt_lang")
    if not source or not target:
        raise UserError(
            f"{model_dir}: its run.json names no language pair; give the source and target "
            "language codes (e.g. --from de --to en)"
        )
    for option, code in (("--from", source), ("--to", target)):
        if not isinstance(code, str) or not LANGUAGE_CODE.fullmatch(code):
            raise UserError(
                f"{option} {code!r}: an Argos Translate language code is 2 or 3 lower-case "
                "letters, as Argos Translate and LibreTranslate name languages (e.g. de, en, "
                "pt, zt)"
            )
    return source, target


def _spacy_pipeline(language: str, out: Path) -> bool:
    """Write a blank spaCy pipeline of ``language`` (its tokenizer rules, no trained parts)
    to ``out``; False when spaCy is not installed."""
    try:
        import spacy
    except ImportError:
        return False
    try:
        nlp = spacy.blank(language)
    except (ImportError, KeyError, ValueError):  # a language spaCy has no rules for
        nlp = spacy.blank("xx")
    nlp.to_disk(out)
    return True


def export_argos(
    model_dir: ModelDir | Path,
    out: Path,
    source: str | None = None,
    target: str | None = None,
    quantization: str | None = None,
) -> dict:
    """Write the Argos Translate package ``out`` (a ``.argosmodel`` zip, replaced whole) of
    the encoder-decoder in ``model_dir``; ``source``/``target`` default to run.json's."""
    directory, out = ModelDir.open(model_dir), Path(out)
    model_dir = directory.path
    source, target = languages_of(directory, source, target)
    tokenizer = directory.tokenizer()
    files = exports.tokenizer_files(tokenizer)
    if len(files) != 1:
        raise UserError(
            f"{model_dir}: its source and target sentencepiece models differ; an Argos "
            "Translate package carries one sentencepiece.model"
        )
    name = f"translate-{source}_{target}-{PACKAGE_VERSION.replace('.', '_')}"
    with tempfile.TemporaryDirectory(prefix="aiayn-argos-") as tmp:
        root = Path(tmp) / name
        root.mkdir()
        record = exports.write_model(directory, root / "model", quantization)
        for file_name, data in files.items():
            (root / file_name).write_bytes(data)
        splitter = _spacy_pipeline(source, root / "spacy")
        metadata = {
            "package_version": PACKAGE_VERSION,
            "argos_version": "1.9.0",
            "from_code": source,
            "from_name": LANGUAGE_NAMES.get(source, source),
            "to_code": target,
            "to_name": LANGUAGE_NAMES.get(target, target),
            "type": "translate",
            "links": [],
        }
        prefix = getattr(tokenizer, "target_prefix", "")
        if prefix:  # an imported package's: the token every translation starts with
            metadata["target_prefix"] = prefix
        (root / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
        split = (
            "It carries a spaCy pipeline (spacy/): with ARGOS_CHUNK_TYPE=SPACY, Argos Translate "
            "splits sentences with spaCy's rule-based sentencizer (Argos Translate 1.11 still "
            "tries to download xx_sent_ud_sm as it starts; offline it goes on without it)."
            if splitter
            else "It carries no sentence splitter (spaCy was not installed when it was built): "
            "Argos Translate's default splitter downloads one on first use."
        )
        (root / "README.md").write_text(
            f"# {metadata['from_name']} -> {metadata['to_name']}\n\n"
            f"An aiayn Transformer (Vaswani et al. 2017) exported from {model_dir.name}, "
            f"converted by CTranslate2 {record['ctranslate2']}"
            f"{' (int8)' if quantization else ''}.\n\n{split}\n"
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tmp) / "package.zip"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
            for path in sorted(root.rglob("*")):
                z.write(path, path.relative_to(Path(tmp)).as_posix())
        shutil.move(partial, out)
    return {
        "format": "argos",
        "out": str(out),
        "package": name,
        "from": source,
        "to": target,
        "sentence_splitter": "spacy" if splitter else None,
        **record,
    }
