"""The search a translate request runs on: plain or constrained (``aiayn.infer.translate``,
``aiayn.infer.constrained``), over one model or an ensemble (``aiayn.infer.ensemble``), on
the torch model or on CTranslate2 (``aiayn.api.engine``: which engine decodes what).

With the ctranslate2 engine, greedy search gives the torch engine's tokens; beam search keeps
aiayn's scores (the best hypothesis agrees at ``lenpen`` 0, and with the shipped model's on
1,000 of its 1,000 test sentences at 0.6); samples are CTranslate2's, seeded per call (not
per sentence: ``first_index`` does not apply; a seed is below 2**32). A temperature below
2**-100 is greedy, one above 2**100 is 2**100 (``aiayn.api.options.decoded_sampling``), in
both engines. CTranslate2 has no constrained search."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence

import torch

from aiayn.api.engine import needs_torch
from aiayn.errors import OptionError, UserError
from aiayn.modeldir import ModelDir


def ctranslate2_maker(
    directory: ModelDir,
    *,
    quantize: str | None,
    device: torch.device,
    decoders: int,
    cache_dir,
) -> Callable[[], object]:
    """What builds ``directory``'s CTranslate2 engine (converted once, cached in
    ``cache_dir``) on ``device``'s kind, with as many threads as torch has and ``decoders``
    copies of its decoder."""
    from aiayn.interop.ctranslate2 import CTranslate2Engine

    return functools.partial(
        CTranslate2Engine,
        directory,
        quantize=quantize,
        device=str(device),
        threads=torch.get_num_threads(),
        decoders=decoders,
        cache_dir=cache_dir,
    )


def built_or_none(make: Callable[[], object]):
    """The CTranslate2 engine ``make`` builds, or None where it cannot: a model it has no
    counterpart for goes to aiayn's model without a word; one it could take but not here
    (``CannotRunHere``) with a warning that says why."""
    try:
        return make()
    except UserError as e:
        from aiayn.interop.ctranslate2 import CannotRunHere

        if isinstance(e, CannotRunHere):
            warnings.warn(f"engine auto: {e}; aiayn's model decodes", stacklevel=3)
        return None


def check_one_tokenizer(dirs: Sequence[ModelDir]) -> None:
    """The models of an ensemble share one tokenizer (the same file), and so one vocabulary;
    an error names the first that does not."""
    digests = [d.tokenizer_sha256() for d in dirs]
    for d, digest in zip(dirs[1:], digests[1:], strict=True):
        if digest != digests[0]:
            raise UserError(
                f"{d.tokenizer_path} differs from {dirs[0].tokenizer_path}: the models "
                "of an ensemble share one tokenizer (their vocabularies must be the same)"
            )


def decoder_for(
    held: list[list[list[int]]] | None,
    *,
    model,
    decoder,
    fast: Callable[[], object] | None,
    **request,
):
    """What decodes a request (``request``: its search, as ``needs_torch`` takes it) with
    constraints ``held``: under engine "auto" (``fast`` gives its CTranslate2 engine, or
    None) CTranslate2 for greedy and beam search for one translation without scores or
    constraints, the torch ``model`` for the rest; otherwise the translator's ``decoder``,
    where a forced CTranslate2 engine cannot hold constraints (an error naming the engines
    that can)."""
    if fast is not None:
        plain = held is None and not needs_torch(**request)
        return (fast() if plain else None) or model
    if held is None or decoder is model:
        return decoder
    raise OptionError(
        "CTranslate2 has no constrained search, and this request has terms to hold "
        "(glossary, constraints, keep): decode it with engine 'torch', or load the model "
        "with engine 'auto' (the torch model then decodes such requests)",
        "engine",
        "glossary",
    )
