"""Validation of the decoding options, in one place for the API, the command line and the
server. Errors are ``OptionError``s naming the option (the command line shows its flag)."""

from __future__ import annotations

import dataclasses
import math

from aiayn.errors import OptionError
from aiayn.infer.sampling import Sampling

# Temperatures past these decode as at their limits (``decoded_sampling``)
GREEDY_BELOW, FLAT_ABOVE = 2.0**-100, 2.0**100


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


def decoded_sampling(sampling: Sampling | None) -> Sampling | None:
    """``sampling`` as the engines decode it: a temperature float32 cannot divide by is
    replaced by the one with the same outcome.

    Both engines divide float32 logits by the temperature. Below ``GREEDY_BELOW`` (2**-100)
    the quotients overflow (the torch engine fails, CTranslate2 draws nonsense), while
    already any logit more than 1e-28 below the largest gets a probability of 0 in float32:
    such a temperature is greedy, its limit (temperature 0). Above ``FLAT_ABOVE`` (2**100)
    every quotient is below float32's resolution around 0, so each token not filtered out
    is equally likely, as at 2**100 (past float32's largest number, a filtered-out token's
    -inf / inf is NaN): such a temperature is 2**100.
    """
    if sampling is None:
        return None
    if 0 < sampling.temperature < GREEDY_BELOW:
        return dataclasses.replace(sampling, temperature=0.0)
    if sampling.temperature > FLAT_ABOVE:
        return dataclasses.replace(sampling, temperature=FLAT_ABOVE)
    return sampling
