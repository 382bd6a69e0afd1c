"""Which engine decodes a translator: ``"torch"`` (aiayn's model), ``"ctranslate2"``
(CTranslate2, the ``ctranslate2`` extra), or ``"auto"``, the default: CTranslate2 where it is
installed and can run the model as asked (an encoder-decoder model, one model not an
ensemble, float32 weights not quantized, on a device it runs on), aiayn's model otherwise.

Under "auto" the torch model stays loaded and answers every request that needs what only it
has or where the two would answer differently: n-best lists, sampling, prefixes, alignments,
scores (as attention maps always are), beam search that stops early; CTranslate2 answers
greedy search and beam search for one translation, without scores (what the server's
translation routes and ``aiayn translate`` ask for). Its greedy search gives the torch
model's tokens; its beam search, searched on until twice the beam has finished and rescored
with GNMT's length penalty, the paper's (``aiayn.interop.ctranslate2.searches``), gave the
torch model's exact search's best translation on 1,000 of the shipped model's 1,000 test
sentences (``bench/ct2_beam.py``). A model CTranslate2 cannot take (a character tokenizer, learned
positions, int8 weights, ...) is decoded by the torch model."""

from __future__ import annotations

import importlib.util

import torch

from aiayn.api.device import placement
from aiayn.config import ModelConfig
from aiayn.errors import UserError

ENGINES = ("auto", "torch", "ctranslate2")


def check_engine_name(engine: str) -> None:
    """``engine`` is one of ``ENGINES``: a ``UserError`` naming them otherwise."""
    if engine not in ENGINES:
        raise UserError(f"engine {engine!r}: choose one of {', '.join(ENGINES)}")


def ctranslate2_installed() -> bool:
    """CTranslate2 and the converter's reader (transformers) are importable."""
    return all(
        importlib.util.find_spec(name) is not None for name in ("ctranslate2", "transformers")
    )


def resolve_engine(
    engine: str,
    config: ModelConfig,
    *,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
    quantize: str | None = None,
    ensemble: bool = False,
) -> str:
    """The engine that decodes (``"torch"`` or ``"ctranslate2"``) for ``engine`` as asked;
    ``"auto"`` picks CTranslate2 where it can run the model so (see the module)."""
    if engine != "auto":
        return engine
    if config.family != "encoder-decoder" or ensemble or quantize is not None:
        return "torch"  # int8: CTranslate2's int8 is not torch's (other outputs)
    if not ctranslate2_installed():
        return "torch"
    try:
        placement(device, dtype, quantize=quantize, engine="ctranslate2")
    except UserError:  # a dtype CTranslate2 does not decode in: aiayn's model
        return "torch"
    return "ctranslate2"


def needs_torch(
    *, beam: int, nbest: int, sampling, prefixes, alignment: bool, scores: bool, early_stop: bool
) -> bool:
    """Whether a translation under engine "auto" goes to the torch model: anything but
    greedy or beam search for one translation without scores (CTranslate2's
    log-probabilities differ from the torch model's in the fourth digit, its n-best lists
    past the first may differ, and its early stop is its own rule)."""
    searched = nbest != 1 or sampling is not None or (beam != 1 and early_stop)
    return searched or prefixes is not None or alignment or scores
