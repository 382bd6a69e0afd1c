"""CTranslate2 models made by CTranslate2's own toolchain, with random weights: a Marian model of
transformers converted by ``TransformersConverter``, and Transformers declared with
``ctranslate2.specs`` (the layout of OpenNMT-py and eole conversions) and saved by the spec
API, as the converters save them."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from aiayn.model.layers import sinusoidal_table
from tests.interop.hf_fixtures import ding_lines, marian_model, marian_tokenizer
from tests.interop.hf_fixtures import sentencepiece_model as _trained

D_MODEL, HEADS, D_FF, LAYERS = 32, 4, 48, 2
ONMT_SPECIALS = ["<unk>", "<blank>", "<s>", "</s>"]  # OpenNMT-py's first tokens
# Random weights: linear layers of GAIN / sqrt(fan-in), queries and keys QK times that, so that
# translations vary (with weights of a usual init's scale every step repeats one token) while
# float32 rounding stays small in the outputs (some 2e-5 of a log-probability against float64
# here; a GAIN of 6 made it 2e-3 and near ties that two correct engines decide apart)
GAIN, QK = 4.0, 0.5


def quiet_transformers():
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def marian_ct2(directory: Path, quantization: str | None) -> tuple[Path, list[Path]]:
    """A random OPUS-MT-like MarianMTModel (tests.interop.hf_fixtures) converted by
    CTranslate2's TransformersConverter; (model directory, [source.spm, target.spm]).

    A random post-norm model soon repeats one token whatever its weights' scale (each
    LayerNorm washes out what changes from step to step): the log-probabilities of random
    targets (``test_log_probabilities_equal_ctranslate2s_scores``) check it at every
    position."""
    import torch
    from ctranslate2.converters import TransformersConverter

    quiet_transformers()
    hf = directory / "hf"
    n = marian_tokenizer(hf)
    model = marian_model(hf, n, max_position_embeddings=128)
    with torch.no_grad():  # a bias that does not drown the rest
        model.final_logits_bias.mul_(0.1)
    model.save_pretrained(hf)
    out = directory / "ct2"
    TransformersConverter(str(hf)).convert(str(out), quantization=quantization, force=True)
    return out, [hf / "source.spm", hf / "target.spm"]


def sentencepiece(lines: list[str], size: int) -> bytes:
    return _trained(lines, size)


def vocabulary(proto: bytes, seed: int, drop: int = 3) -> list[str]:
    """An OpenNMT-py-like vocabulary of a sentencepiece model: its specials first, then the
    pieces in another order than the model's ids, a few left out (they read as unk)."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor()
    sp.load_from_serialized_proto(proto)
    pieces = [
        sp.id_to_piece(i)
        for i in range(sp.get_piece_size())
        if not (sp.is_control(i) or sp.is_unknown(i))
    ]
    random.Random(seed).shuffle(pieces)
    return ONMT_SPECIALS + pieces[drop:]


def shared_spm() -> bytes:
    return sentencepiece(ding_lines("de") + ding_lines("en"), 160)


def source_target_spm() -> tuple[bytes, bytes]:
    return sentencepiece(ding_lines("de"), 100), sentencepiece(ding_lines("en"), 90)


def spec_ct2(
    directory: Path,
    source_vocab: list[str],
    target_vocab: list[str] | None = None,
    *,
    quantization: str | None = None,
    pre_norm: bool = True,
    positions: str = "stored",
    activation: str = "relu",
    tie: str = "all",
    qkv_bias: bool = False,
    seed: int = 0,
    rows: int = 256,
    spec_options: dict | None = None,
    **config,
) -> Path:
    """A random TransformerSpec saved by the spec API (validate, optimize, save: what every
    converter does). ``positions``: "stored" (the sinusoid, computed in float64 and stored
    float32), "float32" (computed in float32, as OpenNMT-py computes it: not quite the
    sinusoid) or "computed" (none stored: CTranslate2 computes its own). ``tie``: "all",
    "decoder" or "none" as aiayn names them, or "inputs" (the encoder's and the decoder's
    embeddings one tensor, the output another: OpenNMT-py's share_embeddings alone). Attention layers without biases (OpenNMT-py's
    default) unless ``qkv_bias``. ``spec_options``: more of ``TransformerSpec.from_config``'s
    options; ``config``: config.json's settings (add_source_eos...)."""
    from ctranslate2.specs import transformer_spec

    target_vocab = source_vocab if target_vocab is None else target_vocab
    spec = transformer_spec.TransformerSpec.from_config(
        LAYERS, HEADS, pre_norm=pre_norm, activation=_activation(activation),
        **(spec_options or {}),
    )  # fmt: skip
    rng = np.random.default_rng(seed)
    encoder, decoder = spec.encoder, spec.decoder
    # embeddings small beside what the layers add (scaled by sqrt(D), they would otherwise
    # carry the input token through to the tied output: every step would repeat it)
    e = 0.3
    source_embedding = _rand(rng, len(source_vocab), D_MODEL, scale=e)
    encoder.embeddings[0].weight = source_embedding
    decoder.embeddings.weight = (
        source_embedding
        if tie in ("all", "inputs") and target_vocab == source_vocab
        else _rand(rng, len(target_vocab), D_MODEL, scale=e)
    )
    decoder.projection.weight = (
        decoder.embeddings.weight
        if tie in ("all", "decoder")
        else _rand(rng, len(target_vocab), D_MODEL)
    )
    bias = _rand(rng, len(target_vocab), scale=0.1)
    bias[target_vocab.index("</s>")] += 1.0  # some translations end before their limit
    if "<blank>" in target_vocab:  # OpenNMT-py's padding: never a target, never produced
        bias[target_vocab.index("<blank>")] = -10.0
    decoder.projection.bias = bias
    kv = D_MODEL // HEADS if (spec_options or {}).get("multi_query_attention") else D_MODEL
    _fill(spec, rng, kv, qkv_bias)
    for stack in (encoder, decoder):
        if positions == "stored":
            stack.position_encodings.encodings = sinusoidal_table(rows, D_MODEL).numpy()
        elif positions == "float32" and hasattr(stack, "position_encodings"):
            stack.position_encodings.encodings = _float32_sinusoid(rows, D_MODEL)
    for key, value in config.items():
        setattr(spec.config, key, value)
    spec.register_source_vocabulary(source_vocab)
    spec.register_target_vocabulary(target_vocab)
    return _saved(spec, directory, quantization)


def decoder_only_ct2(directory: Path, vocab: list[str], seed: int = 0) -> Path:
    """A random decoder-only language model (TransformerDecoderModelSpec), as the GPT-2 and
    Llama converters write them."""
    from ctranslate2.specs import transformer_spec

    spec = transformer_spec.TransformerDecoderModelSpec.from_config(LAYERS, HEADS)
    rng = np.random.default_rng(seed)
    spec.decoder.embeddings.weight = _rand(rng, len(vocab), D_MODEL)
    spec.decoder.projection.weight = spec.decoder.embeddings.weight
    _fill(spec, rng, D_MODEL, True)
    spec.register_vocabulary(vocab)
    return _saved(spec, directory, None)


def _saved(spec, directory: Path, quantization: str | None) -> Path:
    spec.validate()
    spec.optimize(quantization=quantization)
    directory.mkdir(parents=True, exist_ok=True)
    spec.save(str(directory))
    return directory


def _activation(name: str):
    from ctranslate2.specs.common_spec import Activation

    return {"relu": Activation.RELU, "gelu": Activation.GELU, "gelu_tanh": Activation.GELUTanh,
            "swish": Activation.SWISH, "sigmoid": Activation.Sigmoid}[name]  # fmt: skip


def _rand(rng, *shape, scale=0.3) -> np.ndarray:
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def _shape(name: str, kv: int) -> tuple[int, ...] | None:
    """The shape of a layer variable of a spec of ``D_MODEL`` / ``D_FF`` (keys and values of
    width ``kv``: multi-query attention has one head's)."""
    leaf = name.rsplit("/", 2)
    if name.endswith(("/gamma", "/beta")):
        return (D_MODEL,)
    if name.endswith(("relative_position_keys", "relative_position_values")):
        return (2 * 8 + 1, D_MODEL // HEADS)
    layer, which = leaf[-2], leaf[-1]
    out_in = {
        "ffn/linear_0": (D_FF, D_MODEL), "ffn/linear_0_noact": (D_FF, D_MODEL),
        "ffn/linear_1": (D_MODEL, D_FF), "self_attention/linear_0": (D_MODEL + 2 * kv, D_MODEL),
        "self_attention/linear_1": (D_MODEL, D_MODEL), "attention/linear_0": (D_MODEL, D_MODEL),
        "attention/linear_1": (2 * kv, D_MODEL), "attention/linear_2": (D_MODEL, D_MODEL),
    }.get(f"{name.rsplit('/', 3)[-3]}/{layer}")  # fmt: skip
    if out_in is None:
        return None
    return out_in if which == "weight" else out_in[:1]


def _fill(spec, rng, kv: int, qkv_bias: bool) -> None:
    """Every variable still unset given random values of its shape; the linear layers' biases
    too (the attention's only with ``qkv_bias``); LayerNorm gains near 1."""
    from ctranslate2.specs import model_spec

    names = [n for n, v in spec.variables().items() if v is None]
    for name in names:
        for bias in ("weight", "bias") if name.endswith("/weight") else ():
            target = name[: -len("weight")] + bias
            if bias == "bias" and ("attention/" in target and not qkv_bias):
                continue
            shape = _shape(target, kv)
            if shape is None:
                raise ValueError(f"no shape for {target}")
            value = _rand(rng, *shape, scale=GAIN * shape[-1] ** -0.5 if bias == "weight" else 0.1)
            if bias == "weight" and "attention/linear_0" in target:  # queries (and keys)
                value[: 2 * D_MODEL if "self_attention" in target else D_MODEL] *= QK
            _set(model_spec, spec, target, value)
        if not name.endswith("/weight"):
            shape = _shape(name, kv)
            if shape is None:
                raise ValueError(f"no shape for {name}")
            value = _rand(rng, *shape, scale=0.1)
            _set(model_spec, spec, name, value + 1.0 if name.endswith("/gamma") else value)


def _set(model_spec, spec, name: str, value) -> None:
    scope, attr = name.rsplit("/", 1)
    setattr(model_spec.index_spec(spec, scope), attr, value)


def _float32_sinusoid(rows: int, d: int) -> np.ndarray:
    """OpenNMT-py's table: the interleaved sinusoid, computed in float32."""
    import math

    import torch

    position = torch.arange(rows, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * -(math.log(10000.0) / d))
    table = torch.zeros(rows, d)
    table[:, 0::2] = torch.sin(position * div)
    table[:, 1::2] = torch.cos(position * div)
    return table.numpy()
