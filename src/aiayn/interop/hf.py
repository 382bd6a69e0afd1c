"""Hugging Face checkpoints in and out: BERT, GPT-2 and Marian as aiayn model directories.

``import_hf(SRC, OUT)`` reads a Hugging Face model directory (config.json, model.safetensors
or pytorch_model.bin, tokenizer files) and writes an ordinary aiayn model directory;
``export_hf(DIR, OUT)`` writes an aiayn model directory back as a Hugging Face one.

Each family (``hf_bert``, ``hf_gpt2``, ``hf_marian``) gives one table of ``Rule``s, their
parameter name -> ours with the transform (a transpose, a fused Q/K/V, which axes index the
vocabulary or the model dimension); ``to_ours`` applies a table and ``to_theirs`` reads the
same table backwards (both in ``hf_rules``, with what else the families share). The options
the other side has are ``ModelConfig`` fields; a value with no counterpart is an error naming
the field. Vocabularies are mapped by a ``aiayn.data.vocab_map.VocabMap`` (special ids to
aiayn's 0-4), model dimensions by a permutation where the other side orders them differently
(Marian's sinusoids).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from torch import Tensor

from aiayn.config import ModelConfig
from aiayn.fileio import (
    atomic_write,
    check_replaceable,
    read_json_object,
    replace_directory,
    write_json,
)
from aiayn.interop.hf_rules import to_ours, to_theirs
from aiayn.modeldir import ModelDir, save_model_dir, untied_state_dict

HF_CONFIG = "config.json"
HF_WEIGHTS = "model.safetensors"


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
    try:
        return Path(snapshot_download(repo_id=src))
    except Exception as e:  # the hub's own errors: offline, not found, no access
        cause = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise FileNotFoundError(
            f"{src}: no such local directory; as a Hugging Face hub name: {cause}"
        ) from None


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
    whole (``aiayn.fileio.replace_directory``). Returns a summary: architecture,
    parameters kept freshly initialised (a head the checkpoint does not have, e.g. BERT's
    masked-LM head for a BertModel).
    """
    from aiayn.model import build_model

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


def export_hf(model_dir: ModelDir | Path, out: Path, *, force: bool = False) -> dict:
    """Write the aiayn model directory ``model_dir`` (a path or an opened ``ModelDir``) as a
    Hugging Face directory ``out``.

    ``out`` must be absent or empty; with ``force``, a model directory there is replaced
    whole (``aiayn.fileio.replace_directory``)."""
    from aiayn.interop import hf_bert, hf_gpt2, hf_marian

    out = Path(out)
    check_replaceable(out, force, keep=[Path(getattr(model_dir, "path", model_dir))])
    directory = ModelDir.open(model_dir)
    model_dir = directory.path
    model = directory.model()
    if getattr(model, "quantization", None):
        raise ValueError(
            f"{model_dir} holds {model.quantization['method']} weights; export the float "
            "model directory it was quantized from"
        )
    tokenizer = directory.tokenizer()
    run = directory.run
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
