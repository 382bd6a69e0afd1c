"""Converting an aiayn encoder-decoder into a CTranslate2 model (Klein et al. 2020) through
transformers' Marian.

``convert`` exports the model directory as a Marian directory (``aiayn.interop.hf.export_hf``)
with a position table of ``max_len + EXTRA_POSITIONS``, has CTranslate2's own converter
(``ctranslate2.converters.TransformersConverter``) convert it, and stamps the result with what
it was made from (``STAMP``). ``sentencepiece_files`` gives the sentencepiece model(s) that
cut text into its tokens, which ``export --format ctranslate2`` (``exports``) writes beside
it and Argos Translate packages carry too. The cache of conversions the engine decodes with
is ``cache``'s; this module knows nothing of it.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import warnings
from pathlib import Path

from aiayn.errors import UserError, debugging
from aiayn.modeldir import ModelDir

INSTALL = "pip install 'aiayn[ctranslate2]'"
QUANTIZATIONS = ("int8",)
STAMP = "aiayn.json"  # in a converted model: what it was converted from, and its files
# A converted model holds a table of sinusoidal positions (CTranslate2 computes none past it):
# the model's max_len plus this many, so that a source cut to max_len tokens can be followed
# by an output of up to this many tokens more, as the torch engine's sinusoids allow.
EXTRA_POSITIONS = 1024


def require_ctranslate2():
    """The ``ctranslate2`` module, or an error saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise UserError(f"the ctranslate2 engine needs CTranslate2: {INSTALL}") from None
    return ctranslate2


class CannotRunHere(UserError):
    """CTranslate2 could take the model but cannot run it here: its conversion cannot be
    written or loaded, or it cannot decode on the device asked for (a build for another CUDA
    than the one installed). Engine "auto" says so and decodes with aiayn's model; a model
    CTranslate2 cannot take goes to aiayn's model without a word."""


def check_quantization(quantization: str | None) -> None:
    """An error unless ``quantization`` is one CTranslate2 converts to here (or None: float32)."""
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise UserError(
            f"quantization {quantization!r} has no CTranslate2 counterpart here; allowed: "
            f"{', '.join(QUANTIZATIONS)} (or none: float32)"
        )


def convert(
    model_dir: ModelDir | Path,
    out: Path,
    quantization: str | None = None,
    add_source_eos: bool = True,
) -> dict:
    """Convert the aiayn encoder-decoder in ``model_dir`` into the CTranslate2 model ``out``
    (model.bin, shared_vocabulary.json, config.json) with CTranslate2's own converter.

    ``add_source_eos``: CTranslate2 appends eos to each source itself (so callers pass the
    sentencepiece pieces alone, as Argos Translate does); aiayn's models read sources ending
    in eos. The position table covers ``max_len + EXTRA_POSITIONS`` positions. The converter's
    and transformers' own warnings and progress bars are shown only when ``debugging()``.
    Returns the record written to ``out/aiayn.json``.
    """
    check_quantization(quantization)
    ctranslate2 = require_ctranslate2()
    from ctranslate2.converters import TransformersConverter

    from aiayn.interop.hf import export_hf

    directory, out = ModelDir.open(model_dir), Path(out)
    model_dir, config = directory.path, directory.config
    if config.family != "encoder-decoder":
        raise UserError(
            f"{model_dir} holds an {config.family} model; the CTranslate2 engine and export "
            "take encoder-decoder (translation) models"
        )
    digest = directory.weights_sha256()
    with tempfile.TemporaryDirectory(prefix="aiayn-hf-") as hf:
        try:
            export_hf(directory, Path(hf))
        except ValueError as e:  # an option Marian (and so CTranslate2) does not have
            raise UserError(f"{model_dir}: {str(e).replace('Marian', 'CTranslate2')}") from None
        hf_config = json.loads((Path(hf) / "config.json").read_text())
        hf_config["max_position_embeddings"] = config.max_len + EXTRA_POSITIONS
        (Path(hf) / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
        with _quiet_libraries():
            TransformersConverter(hf).convert(str(out), quantization=quantization, force=True)
    ct2_config = json.loads((out / "config.json").read_text())
    ct2_config["add_source_eos"] = add_source_eos
    (out / "config.json").write_text(json.dumps(ct2_config, indent=2) + "\n")
    record = {
        "weights_sha256": digest,
        "quantization": quantization,
        "add_source_eos": add_source_eos,
        "ctranslate2": ctranslate2.__version__,
    }
    (out / STAMP).write_text(json.dumps(record, indent=2) + "\n")
    return record


@contextlib.contextmanager
def _quiet_libraries():
    """transformers' warnings, log lines and progress bars hidden, unless ``debugging()``."""
    if debugging():
        yield
        return
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def sentencepiece_files(tokenizer) -> dict[str, bytes]:
    """The sentencepiece model(s) a CTranslate2 user tokenizes with: one shared model
    (``sentencepiece.model``), or Marian's source and target models."""
    from aiayn.data.marian_tokenizer import SOURCE_SPM, TARGET_SPM, MarianTokenizer

    if isinstance(tokenizer, MarianTokenizer):
        if tokenizer.source_proto == tokenizer.target_proto:
            return {"sentencepiece.model": tokenizer.source_proto}
        return {SOURCE_SPM: tokenizer.source_proto, TARGET_SPM: tokenizer.target_proto}
    proto = getattr(tokenizer, "proto", None)
    if proto is None:
        raise UserError(
            f"the tokenizer ({type(tokenizer).__name__}) is not a sentencepiece model; "
            "CTranslate2 and Argos Translate packages carry sentencepiece models"
        )
    return {"sentencepiece.model": proto}
