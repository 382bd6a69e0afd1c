"""Hugging Face checkpoints in and out: BERT, GPT-2 and Marian as aiayn model directories.

``import_hf(SRC, OUT)`` reads a Hugging Face model directory (config.json, model.safetensors
or pytorch_model.bin, tokenizer files) and writes an ordinary aiayn model directory;
``export_hf(DIR, OUT)`` writes an aiayn model directory back as a Hugging Face one.

Each family (``hf_bert``, ``hf_gpt2``, ``hf_marian``) gives one table of ``Rule``s, their
parameter name -> ours with the transform (a transpose, a fused Q/K/V, which axes index the
vocabulary or the model dimension); ``to_ours`` applies a table and ``to_theirs`` reads the
same table backwards. The options the other side has are ``ModelConfig`` fields; a value with
no counterpart is an error naming the field. Vocabularies are mapped by a
``aiayn.data.vocab_map.VocabMap`` (special ids to aiayn's 0-4), model dimensions by a
permutation where the other side orders them differently (Marian's sinusoids).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.config import ModelConfig
from aiayn.data.vocab_map import VocabMap
from aiayn.errors import read_json_object
from aiayn.modeldir import atomic_write, write_json

HF_CONFIG = "config.json"
HF_WEIGHTS = "model.safetensors"

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
    vocabulary (rows follow the ``VocabMap``), "d" the model dimension (follows the
    permutation, if any), "-" anything else. ``transpose``: theirs is stored transposed
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
    """What turns one checkpoint into the other: the table, the vocabulary map and the
    permutation of the model dimension (ours[..., k] = theirs[..., perm[k]]), if any."""

    rules: list[Rule]
    vocab: VocabMap
    perm: Tensor | None = None
    ignore: tuple[str, ...] = ()  # regexes of their names that carry nothing (buffers)


def _permute_to_ours(t: Tensor, axes: str, m: Mapping) -> Tensor:
    for k, label in enumerate(axes):
        if label == "v":
            bias = t.dim() == 1  # an output bias (never produced: -inf) or embedding rows
            fill = float("-inf") if bias else 0.0
            t = m.vocab.rows_to_ours(t.movedim(k, 0), fill, copies=not bias).movedim(0, k)
        elif label == "d" and m.perm is not None:
            t = t.index_select(k, m.perm)
    return t


def _permute_to_theirs(t: Tensor, axes: str, m: Mapping) -> Tensor:
    for k, label in enumerate(axes):
        if label == "v":
            t = m.vocab.rows_to_theirs(t.movedim(k, 0)).movedim(0, k)
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


def read_config(directory: Path) -> dict:
    path = Path(directory) / HF_CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no config.json (is {directory} a Hugging Face model?)")
    return read_json_object(path, "Hugging Face config")


def read_weights(directory: Path) -> dict[str, Tensor]:
    """All tensors of model.safetensors (single or sharded) or pytorch_model.bin."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = Path(directory)
    index = directory / f"{HF_WEIGHTS}.index.json"
    if (directory / HF_WEIGHTS).is_file():
        files = [directory / HF_WEIGHTS]
    elif index.is_file():
        weight_map = read_json_object(index, "weights index").get("weight_map")
        if not isinstance(weight_map, dict) or not all(
            isinstance(v, str) for v in weight_map.values()
        ):
            raise ValueError(f"{index}: weight_map must map tensor names to shard file names")
        shards = sorted(set(weight_map.values()))
        files = [directory / s for s in shards]
    elif (directory / "pytorch_model.bin").is_file():
        path = directory / "pytorch_model.bin"
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # pickle and zip errors come in many types
            raise ValueError(f"{path}: unreadable PyTorch checkpoint ({e})") from None
        return {k: v for k, v in state.items() if isinstance(v, Tensor)}
    else:
        raise FileNotFoundError(
            f"{directory}: no model.safetensors, model.safetensors.index.json or pytorch_model.bin"
        )
    tensors: dict[str, Tensor] = {}
    for path in files:
        try:
            tensors.update(load_file(str(path)))
        except (SafetensorError, OSError) as e:
            raise ValueError(f"{path}: unreadable safetensors file ({e})") from None
    return tensors


def rename_legacy(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    """Old TensorFlow-era names: LayerNorm.gamma/beta -> weight/bias."""
    out = {}
    for k, v in tensors.items():
        k = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", k)
        k = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", k)
        out[k] = v
    return out


def resolve_source(src: str) -> Path:
    """A local directory, or a hub name fetched with huggingface_hub when it is installed."""
    path = Path(src)
    if path.is_dir():
        return path
    if path.exists() or src.count("/") != 1 or src.startswith((".", "/")):
        raise FileNotFoundError(f"{src}: not a model directory")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise FileNotFoundError(
            f"{src}: not a directory; to fetch it from the Hugging Face hub, "
            "pip install huggingface_hub"
        ) from None
    return Path(snapshot_download(repo_id=src))  # pragma: no cover - needs the network


# An export also writes what it could not say in the other format: aiayn's config and, where
# the export changed tensors arithmetically (Marian's start row), the tensors as they were.
# Import uses them only if the exported weights are untouched (same digest).
SIDECAR_JSON, SIDECAR_WEIGHTS = "aiayn.json", "aiayn.safetensors"


def weights_digest(tensors: dict[str, Tensor]) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes."""
    import hashlib

    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _exported_by_aiayn(
    directory: Path, tensors: dict[str, Tensor], config: ModelConfig
) -> tuple[ModelConfig, dict[str, Tensor]] | None:
    """(aiayn's config, original tensors) when ``directory`` is an untouched aiayn export."""
    from safetensors.torch import load_file

    path = Path(directory) / SIDECAR_JSON
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        if data.get("weights_sha256") != weights_digest(tensors):
            return None  # changed since the export: the weights as they are
        ours = ModelConfig.from_dict(data["model"])
        names = data.get("originals", [])
        originals = load_file(str(Path(directory) / SIDECAR_WEIGHTS)) if names else {}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: unreadable ({e})") from None
    if ours.vocab_size != config.vocab_size or sorted(originals) != sorted(names):
        raise ValueError(f"{path}: does not fit the weights beside it")
    return ours, originals


@dataclass
class Imported:
    """What a family makes of a Hugging Face directory, before the weights move."""

    config: ModelConfig
    mapping: Mapping
    tokenizer: Any  # has .save(directory)
    architecture: str
    run_extra: dict = field(default_factory=dict)  # e.g. {"labels": [...]} for a classifier


def _family(model_type: str):
    from aiayn.interop import hf_bert, hf_gpt2, hf_marian

    families = {"bert": hf_bert, "gpt2": hf_gpt2, "marian": hf_marian}
    if model_type not in families:
        raise ValueError(
            f"config.json: model_type={model_type!r} is not supported; "
            f"allowed: {', '.join(families)}"
        )
    return families[model_type]


def import_hf(src: str | Path, out: Path, *, force: bool = False) -> dict:
    """Convert the Hugging Face model at ``src`` into the aiayn model directory ``out``.

    ``out`` must be absent or empty; with ``force``, a model directory there is replaced
    whole (``aiayn.replace_dir.replace_directory``). Returns a summary: architecture,
    parameters kept freshly initialised (a head the checkpoint does not have, e.g. BERT's
    masked-LM head for a BertModel).
    """
    from aiayn.model import build_model
    from aiayn.modeldir import save_model_dir, untied_state_dict
    from aiayn.replace_dir import check_replaceable, replace_directory

    directory = resolve_source(str(src))
    check_replaceable(Path(out), force, keep=[directory])
    hf_config = read_config(directory)
    family = _family(hf_config.get("model_type"))
    tensors = rename_legacy(read_weights(directory))
    imported = family.import_parts(hf_config, directory, set(tensors))
    config = imported.config
    ours = to_ours(tensors, imported.mapping, config)
    exact = _exported_by_aiayn(directory, tensors, config)
    if exact is not None:  # untouched since aiayn exported it: restore the model exactly
        config, originals = exact
        ours.update(originals)
    with torch.random.fork_rng():  # what the checkpoint lacks starts the same every time
        torch.manual_seed(0)
        model = build_model(config)
    state = model.state_dict()
    _, tied = untied_state_dict(model)
    for alias, name in tied.items():  # a tied weight comes with the tensor it is tied to
        if name in ours:
            ours.setdefault(alias, ours[name])
    if config.final_logits_bias and "unembed.bias" not in ours:
        bias = torch.zeros(config.target_vocab)  # the checkpoint has none: only the extras
        bias[imported.mapping.vocab.extras] = float("-inf")
        ours["unembed.bias"] = bias
    if exact is not None:  # e.g. the zero logit bias Marian needs and the model had not
        ours = {k: v for k, v in ours.items() if k in state}
    for name, t in ours.items():
        if name not in state or state[name].shape != t.shape:
            want = tuple(state[name].shape) if name in state else "no such parameter"
            raise ValueError(f"converted {name} has shape {tuple(t.shape)}, ours: {want}")
    fresh = sorted(set(state) - set(ours))
    model.load_state_dict(ours, strict=False)
    summary = {
        "architecture": imported.architecture,
        "source": str(src),
        "family": config.family,
        "vocab_size": config.vocab_size,
        "fresh": fresh,
        "restored_exactly": exact is not None,
    }
    with replace_directory(Path(out), force, keep=[directory]) as new:
        save_model_dir(new, model.eval())
        imported.tokenizer.save(new)
        if imported.run_extra:
            write_json(new / "run.json", imported.run_extra)
        write_json(new / "imported.json", summary)
    return summary


def export_hf(model_dir: Path, out: Path, *, force: bool = False) -> dict:
    """Write the aiayn model directory ``model_dir`` as a Hugging Face directory ``out``.

    ``out`` must be absent or empty; with ``force``, a model directory there is replaced
    whole (``aiayn.replace_dir.replace_directory``)."""
    from aiayn.data.tokenizer import load_tokenizer
    from aiayn.interop import hf_bert, hf_gpt2, hf_marian
    from aiayn.modeldir import load_model_dir, read_run_json
    from aiayn.replace_dir import check_replaceable, replace_directory

    model_dir, out = Path(model_dir), Path(out)
    check_replaceable(out, force, keep=[model_dir])
    model = load_model_dir(model_dir)
    if getattr(model, "quantization", None):
        raise ValueError(
            f"{model_dir} holds {model.quantization['method']} weights; export the float "
            "model directory it was quantized from"
        )
    tokenizer = load_tokenizer(model_dir)
    run = read_run_json(model_dir)
    family = {"encoder-only": hf_bert, "decoder-only": hf_gpt2, "encoder-decoder": hf_marian}[
        model.config.family
    ]
    exported = family.export_parts(model, tokenizer, run)
    theirs = to_theirs(exported.state, exported.mapping, model.config)
    theirs.update(exported.extra_tensors)
    for alias, name in exported.aliases.items():
        theirs[alias] = theirs[name].clone()
    tensors = {k: v.detach().float().contiguous() for k, v in theirs.items()}
    originals = {k: v.detach().contiguous().cpu() for k, v in exported.originals.items()}
    with replace_directory(out, force, keep=[model_dir]) as new:
        _write_export(new, exported, model.config, tensors, originals)
    return {"architecture": exported.architecture, "out": str(out)}


def _write_export(out: Path, exported, config: ModelConfig, tensors, originals) -> None:
    from safetensors.torch import save_file

    atomic_write(out / HF_WEIGHTS, lambda p: save_file(tensors, str(p), metadata={"format": "pt"}))
    write_json(
        out / SIDECAR_JSON,
        {
            "model": config.to_dict(),
            "weights_sha256": weights_digest(tensors),
            "originals": sorted(originals),
        },
    )
    if originals:
        atomic_write(out / SIDECAR_WEIGHTS, lambda p: save_file(originals, str(p)))
    write_json(out / HF_CONFIG, exported.config)
    for name, data in exported.files.items():
        if isinstance(data, bytes):
            atomic_write(out / name, lambda p, data=data: p.write_bytes(data))
        else:
            write_json(out / name, data)


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
