"""Validation of the decoding options, in one place for the API, the command line and the
server. Errors are ``OptionError``s naming the option (the command line shows its flag)."""

from __future__ import annotations

import math

from aiayn.errors import OptionError
from aiayn.infer.sampling import Sampling


def check_int(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise OptionError(f"{name} must be an integer >= {low}, got {value!r}", name)


def check_search(beam: int, lenpen: float, max_len_offset: int) -> None:
    """Beam size >= 1, length penalty a finite number >= 0, length offset >= 0."""
    check_int("beam", beam, 1)
    check_int("max_len_offset", max_len_offset, 0)
    if not (isinstance(lenpen, int | float) and math.isfinite(lenpen) and lenpen >= 0):
        raise OptionError(f"lenpen must be a finite number >= 0, got {lenpen!r}", "lenpen")


def check_translate(
    beam: int,
    lenpen: float,
    max_len_offset: int,
    nbest: int,
    early_stop: bool,
    sampling: Sampling | None,
) -> None:
    """The options of ``Translator.translate``: a search (``beam``, ``lenpen``, ``nbest`` up
    to ``beam``) or ``sampling`` (beam 1, no ``early_stop``; ``nbest`` samples)."""
    check_search(beam, lenpen, max_len_offset)
    check_int("nbest", nbest, 1)
    if sampling is not None:
        if not isinstance(sampling, Sampling):
            raise OptionError(
                f"sampling must be an aiayn.Sampling, got {type(sampling).__name__}", "sampling"
            )
        if beam != 1:
            raise OptionError(
                f"sampling draws one token at a time: use it without beam ({beam})",
                "sampling",
                "beam",
            )
        if early_stop:
            raise OptionError(
                "early_stop is for beam search: use it without sampling", "early_stop", "sampling"
            )
    elif nbest > beam:
        raise OptionError(
            f"nbest ({nbest}) cannot exceed beam ({beam}); with sampling, nbest N draws N samples",
            "nbest",
            "beam",
            "sampling",
        )
