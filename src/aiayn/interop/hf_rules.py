"""What the Hugging Face families (``hf_bert``, ``hf_gpt2``, ``hf_marian``) share: the table
of ``Rule``s that maps their parameter names to ours, ``to_ours`` / ``to_theirs`` applying it
either way, reading their settings, and what a family hands the drivers in
``aiayn.interop.hf`` (``Imported``, ``Exported``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from aiayn.config import ModelConfig
from aiayn.data.vocab_map import VocabMap

# Hugging Face activation names -> aiayn's (ModelConfig.activation)
ACTIVATIONS_IN = {
    "relu": "relu",
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "swish": "swish",
    "silu": "swish",
}


def activation_in(name: Any, field_name: str) -> str:
    if name not in ACTIVATIONS_IN:
        raise ValueError(
            f"{field_name}={name!r} is not supported; allowed: {', '.join(ACTIVATIONS_IN)}"
        )
    return ACTIVATIONS_IN[name]


def setting(hf: dict, defaults: dict[str, Any], key: str) -> Any:
    """config.json's ``key``, or where it leaves the key out, the default of the reference
    config class (``defaults``: a table's ``CONFIG_DEFAULTS``), as transformers fills it in."""
    return hf[key] if key in hf else defaults[key]


def defaulted(hf: dict, key: str, reference: str) -> str:
    """How a message names ``key``: as config.json gives it, or as the reference's default."""
    return "" if key in hf else f" ({reference}'s default: config.json leaves {key} out)"


@dataclass(frozen=True)
class Rule:
    """One of our parameters and where it lives in the other checkpoint.

    ``ours``/``theirs`` may hold ``{i}``, the layer index over the ``stack`` ("encoder" or
    "decoder") of ``ModelConfig``. Several ``theirs`` names are concatenated along dim 0 (a
    fused Q, K, V) and split back on export. ``axes`` labels our tensor's dimensions: "v" the
    vocabulary (rows follow the ``VocabMap``), "s" the source vocabulary where it is another
    (the ``Mapping``'s ``source`` map), "d" the model dimension (follows the permutation, if
    any), "-" anything else. ``transpose``: theirs is stored transposed
    (GPT-2's Conv1D); ``flat``: theirs has a leading axis of 1 (Marian's final_logits_bias).
    """

    ours: str
    theirs: tuple[str, ...]
    axes: str
    transpose: bool = False
    flat: bool = False
    stack: str = ""


def rule(ours: str, theirs: str | tuple[str, ...], axes: str, **kw) -> Rule:
    return Rule(ours, (theirs,) if isinstance(theirs, str) else tuple(theirs), axes, **kw)


def expand(rules: list[Rule], config: ModelConfig) -> Iterator[tuple[str, list[str], Rule]]:
    """(our name, their names, rule) for every layer of every rule."""
    counts = {"encoder": config.n_encoder_layers, "decoder": config.n_decoder_layers}
    for r in rules:
        for i in range(counts[r.stack]) if r.stack else [None]:
            fmt = {"i": i} if i is not None else {}
            yield r.ours.format(**fmt), [t.format(**fmt) for t in r.theirs], r


@dataclass
class Mapping:
    """What turns one checkpoint into the other: the table, the vocabulary map (and the
    source's, where the source has a vocabulary of its own) and the permutation of the
    model dimension (ours[..., k] = theirs[..., perm[k]]), if any."""

    rules: list[Rule]
    vocab: VocabMap
    perm: Tensor | None = None
    ignore: tuple[str, ...] = ()  # regexes of their names that carry nothing (buffers)
    source: VocabMap | None = None  # the source vocabulary's map ("s" axes); None: ``vocab``


def _permute_to_ours(t: Tensor, axes: str, m: Mapping) -> Tensor:
    for k, label in enumerate(axes):
        if label in ("v", "s"):
            vocab = m.source if label == "s" and m.source is not None else m.vocab
            bias = t.dim() == 1  # an output bias (never produced: -inf) or embedding rows
            fill = float("-inf") if bias else 0.0
            t = vocab.rows_to_ours(t.movedim(k, 0), fill, copies=not bias).movedim(0, k)
        elif label == "d" and m.perm is not None:
            t = t.index_select(k, m.perm)
    return t


def _permute_to_theirs(t: Tensor, axes: str, m: Mapping) -> Tensor:
    for k, label in enumerate(axes):
        if label in ("v", "s"):
            vocab = m.source if label == "s" and m.source is not None else m.vocab
            t = vocab.rows_to_theirs(t.movedim(k, 0)).movedim(0, k)
        elif label == "d" and m.perm is not None:
            t = t.index_select(k, torch.argsort(m.perm))
    return t


def to_ours(theirs: dict[str, Tensor], m: Mapping, config: ModelConfig) -> dict[str, Tensor]:
    """Their state dict to ours by the table; a missing or unused tensor is an error."""
    out, used = {}, set()
    for ours, names, r in expand(m.rules, config):
        missing = [n for n in names if n not in theirs]
        if missing:
            raise ValueError(f"the checkpoint lacks {', '.join(missing)} (for our {ours})")
        parts = [theirs[n].t() if r.transpose else theirs[n] for n in names]
        t = torch.cat(parts, 0) if len(parts) > 1 else parts[0]
        t = t.reshape(-1) if r.flat else t
        out[ours] = _permute_to_ours(t, r.axes, m).contiguous()
        used.update(names)
    unused = sorted(
        n for n in theirs if n not in used and not any(re.fullmatch(p, n) for p in m.ignore)
    )
    if unused:
        more = "..." if len(unused) > 8 else ""
        raise ValueError(
            f"the checkpoint holds tensors this architecture does not use: "
            f"{', '.join(unused[:8])}{more}"
        )
    return out


def to_theirs(ours: dict[str, Tensor], m: Mapping, config: ModelConfig) -> dict[str, Tensor]:
    """Our state dict to theirs: the table read backwards."""
    out = {}
    for name, names, r in expand(m.rules, config):
        t = _permute_to_theirs(ours[name], r.axes, m)
        t = t.reshape(1, -1) if r.flat else t
        parts = t.chunk(len(names), 0) if len(names) > 1 else [t]
        for n, p in zip(names, parts, strict=True):
            out[n] = (p.t() if r.transpose else p).contiguous()
    return out


# -- Hugging Face directories ------------------------------------------------------------------


@dataclass
class Imported:
    """What a family makes of a Hugging Face directory, before the weights move."""

    config: ModelConfig
    mapping: Mapping
    tokenizer: Any  # has .save(directory)
    architecture: str
    run_extra: dict = field(default_factory=dict)  # e.g. {"labels": [...]} for a classifier


@dataclass
class Exported:
    """What a family makes of an aiayn model: their config, our tensors to map (possibly
    adjusted), the mapping, further tensors of theirs, and further files (JSON or bytes)."""

    architecture: str
    config: dict
    state: dict[str, Tensor]
    mapping: Mapping
    extra_tensors: dict[str, Tensor] = field(default_factory=dict)
    files: dict[str, Any] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # their name -> a copy of theirs
    originals: dict[str, Tensor] = field(default_factory=dict)  # ours, changed arithmetically


def no_counterpart(config: ModelConfig, architecture: str, **allowed: Any) -> None:
    """Raise if a field of ``config`` differs from what ``architecture`` can express.

    ``allowed`` maps field names to the value (or tuple of values) the other side has.
    """
    for name, want in allowed.items():
        values = want if isinstance(want, tuple) else (want,)
        have = getattr(config, name)
        if have not in values:
            shown = " or ".join(repr(v) for v in values)
            raise ValueError(
                f"{name}={have!r} has no {architecture} counterpart ({architecture} has "
                f"{name}={shown})"
            )
