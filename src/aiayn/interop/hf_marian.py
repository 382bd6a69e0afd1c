"""Marian (Junczys-Dowmunt et al. 2018; OPUS-MT) <-> aiayn's encoder-decoder, the paper's model.

Marian is post-LN with static sinusoidal positions, embeddings scaled by sqrt(d_model) and
shared by encoder, decoder and output, a ``final_logits_bias``, and ReLU, GELU or swish. Two
differences need care:

* Positions. Marian lays out every sine in the first half of the model dimension and every
  cosine in the second; the paper (and aiayn) interleaves them. The table is rebuilt by
  transformers on load, never stored, so the conversion permutes the model dimension of every
  weight instead (``perm``): the same model with its coordinates relabelled.
* The start of decoding. Hugging Face starts from ``decoder_start_token_id`` (Marian's pad,
  whose row is zero); CTranslate2's converter starts Marian models from a zero vector and
  drops the last vocabulary row. aiayn starts from its bos row, which training made nonzero,
  so export shifts every embedding by the bos row (which becomes zero) and lets the first
  layers' biases absorb the shift: attention sees the same queries, keys and values, the
  residual the same sum, and the tied output logits move by one constant per position, which
  the softmax ignores. The vocabulary is laid out with aiayn's pad last, so the row
  CTranslate2 drops is one never produced.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from aiayn.config import ModelConfig
from aiayn.data.marian_tokenizer import SOURCE_SPM, TARGET_SPM, VOCAB_JSON, MarianTokenizer
from aiayn.data.tokenizer import BOS, Tokenizer
from aiayn.data.vocab_map import VocabMap
from aiayn.fileio import read_json_object
from aiayn.interop import hf_vocab
from aiayn.interop.hf_rules import (
    Exported,
    Imported,
    Mapping,
    Rule,
    activation_in,
    defaulted,
    no_counterpart,
    rule,
    setting,
)
from aiayn.modeldir import untied_state_dict

ACTIVATIONS_OUT = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "swish": "swish"}
TIES = {(True, True): "all", (False, True): "decoder", (False, False): "none"}
# What transformers' MarianConfig() holds for each key read here with a default: a key that
# config.json leaves out means this value (tests check the table against transformers).
# OPUS-MT checkpoints give swish and scale_embedding=true explicitly; the class says otherwise.
REFERENCE = "MarianConfig"
CONFIG_DEFAULTS = {
    "activation_function": "gelu",
    "scale_embedding": False,
    "encoder_attention_heads": 16,
    "decoder_attention_heads": 16,
    "encoder_ffn_dim": 4096,
    "decoder_ffn_dim": 4096,
    "dropout": 0.1,
    "attention_dropout": 0.0,
    "max_position_embeddings": 1024,
    "share_encoder_decoder_embeddings": True,
    "tie_word_embeddings": True,
    "pad_token_id": 58100,
    "eos_token_id": 0,
    "decoder_start_token_id": 58100,
    "architectures": None,
}


def residual_perm(d_model: int) -> Tensor:
    """ours[..., k] = Marian's[..., perm[k]]: sin of frequency j at 2j (ours) / j (Marian),
    cos at 2j + 1 / ceil(D/2) + j."""
    half = (d_model + 1) // 2
    perm = torch.empty(d_model, dtype=torch.long)
    perm[0::2] = torch.arange(half)
    perm[1::2] = half + torch.arange(d_model // 2)
    return perm


def _attention(ours: str, theirs: str, stack: str) -> list[Rule]:
    qkv = [f"{theirs}.{n}_proj" for n in ("q", "k", "v")]
    return [
        rule(f"{ours}.in_proj.weight", tuple(n + ".weight" for n in qkv), "-d", stack=stack),
        rule(f"{ours}.in_proj.bias", tuple(n + ".bias" for n in qkv), "-", stack=stack),
        rule(f"{ours}.out_proj.weight", f"{theirs}.out_proj.weight", "d-", stack=stack),
        rule(f"{ours}.out_proj.bias", f"{theirs}.out_proj.bias", "d", stack=stack),
    ]


def _norm(ours: str, theirs: str, stack: str) -> list[Rule]:
    return [
        rule(f"{ours}.weight", f"{theirs}.weight", "d", stack=stack),
        rule(f"{ours}.bias", f"{theirs}.bias", "d", stack=stack),
    ]


def _ffn(ours: str, theirs: str, stack: str) -> list[Rule]:
    return [
        rule(f"{ours}.linear1.weight", f"{theirs}.fc1.weight", "-d", stack=stack),
        rule(f"{ours}.linear1.bias", f"{theirs}.fc1.bias", "-", stack=stack),
        rule(f"{ours}.linear2.weight", f"{theirs}.fc2.weight", "d-", stack=stack),
        rule(f"{ours}.linear2.bias", f"{theirs}.fc2.bias", "d", stack=stack),
    ]


def rules(config: ModelConfig) -> list[Rule]:
    """Their name -> ours; every model-dimension axis follows ``residual_perm``."""
    if config.tie_embeddings == "all":
        table = [rule("src_embed.token.weight", "model.shared.weight", "vd")]
    else:
        table = [
            rule("src_embed.token.weight", "model.encoder.embed_tokens.weight", "vd"),
            rule("tgt_embed.token.weight", "model.decoder.embed_tokens.weight", "vd"),
        ]
    if config.tie_embeddings == "none":
        table.append(rule("unembed.weight", "lm_head.weight", "vd"))
    table.append(rule("unembed.bias", "final_logits_bias", "v", flat=True))
    e, d = "model.encoder.layers.{i}", "model.decoder.layers.{i}"
    table += _attention("encoder.layers.{i}.self_attn", f"{e}.self_attn", "encoder")
    table += _norm("encoder.layers.{i}.norm1", f"{e}.self_attn_layer_norm", "encoder")
    table += _ffn("encoder.layers.{i}.ffn", e, "encoder")
    table += _norm("encoder.layers.{i}.norm2", f"{e}.final_layer_norm", "encoder")
    table += _attention("decoder.layers.{i}.self_attn", f"{d}.self_attn", "decoder")
    table += _norm("decoder.layers.{i}.norm1", f"{d}.self_attn_layer_norm", "decoder")
    table += _attention("decoder.layers.{i}.cross_attn", f"{d}.encoder_attn", "decoder")
    table += _norm("decoder.layers.{i}.norm2", f"{d}.encoder_attn_layer_norm", "decoder")
    table += _ffn("decoder.layers.{i}.ffn", d, "decoder")
    table += _norm("decoder.layers.{i}.norm3", f"{d}.final_layer_norm", "decoder")
    return table


def _check(hf: dict) -> None:
    declared = setting(hf, CONFIG_DEFAULTS, "architectures") or ["MarianMTModel"]
    if declared[0] != "MarianMTModel":
        raise ValueError(
            f"config.json: architectures={declared} is not supported (only MarianMTModel)"
        )
    for ours, theirs in (
        ("encoder_attention_heads", "decoder_attention_heads"),
        ("encoder_ffn_dim", "decoder_ffn_dim"),
    ):
        a, b = setting(hf, CONFIG_DEFAULTS, ours), setting(hf, CONFIG_DEFAULTS, theirs)
        if a != b:
            raise ValueError(
                f"config.json: {ours}={a}{defaulted(hf, ours, REFERENCE)} differs from "
                f"{theirs}={b}{defaulted(hf, theirs, REFERENCE)}; aiayn's encoder and decoder "
                "share n_heads and d_ff"
            )
    if hf.get("decoder_vocab_size") not in (None, hf.get("vocab_size")):
        raise ValueError(
            f"config.json: decoder_vocab_size={hf['decoder_vocab_size']} differs from "
            f"vocab_size={hf.get('vocab_size')}: separate vocabularies are not supported"
        )
    for name in ("normalize_before", "normalize_embedding", "add_final_layer_norm"):
        if hf.get(name):
            raise ValueError(f"config.json: {name}=true is not supported (Marian is post-LN)")


def _tokenizer_files(directory: Path) -> tuple[bytes, bytes, dict]:
    directory = Path(directory)
    paths = [directory / n for n in (SOURCE_SPM, TARGET_SPM, VOCAB_JSON)]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{directory}: no {', '.join(missing)} (Marian's tokenizer)")
    if hf_vocab.tokenizer_config(directory).get("separate_vocabs"):
        raise ValueError(f"{directory}: separate_vocabs=true is not supported")
    vocab = read_json_object(paths[2], "Marian vocabulary")
    return paths[0].read_bytes(), paths[1].read_bytes(), vocab


def vocab_map(hf: dict, vocab: dict[str, int], unk_name: str) -> VocabMap:
    """bos = the decoder start token; pad = Marian's pad unless it is the start (OPUS-MT:
    then aiayn's pad is an extra row); eos, unk; mask only where the vocabulary has <mask>."""
    keys = ("pad_token_id", "eos_token_id", "decoder_start_token_id")
    pad, eos, start = (setting(hf, CONFIG_DEFAULTS, k) for k in keys)
    if start is None:
        start = pad
    if start is None or eos is None:
        raise ValueError(
            "config.json: needs decoder_start_token_id (or pad_token_id) and eos_token_id"
        )
    size = int(hf["vocab_size"])
    for key, value in zip(keys, (pad, eos, start), strict=True):
        if value is not None and not (isinstance(value, int) and 0 <= value < size):
            raise ValueError(
                f"config.json: {key}={value!r} is not an id below vocab_size={size}"
                + defaulted(hf, key, REFERENCE)
            )
    unk = vocab.get(unk_name)
    if unk is None:
        raise ValueError(f"{VOCAB_JSON}: no unk token {unk_name!r}")
    specials = (pad if pad != start else None, unk, start, eos, vocab.get("<mask>"))
    try:
        return VocabMap(size, specials, backend="marian")
    except ValueError as e:
        raise ValueError(f"config.json: special ids: {e}") from None


def import_parts(hf: dict, directory: Path, names: set[str]) -> Imported:
    _check(hf)
    source, target, vocab = _tokenizer_files(directory)
    options = hf_vocab.tokenizer_config(directory)
    vmap = vocab_map(hf, vocab, hf_vocab.token_name(options.get("unk_token")) or "<unk>")

    def get(key):
        return setting(hf, CONFIG_DEFAULTS, key)

    share = bool(get("share_encoder_decoder_embeddings"))
    tie = bool(get("tie_word_embeddings"))
    if (share, tie) not in TIES:
        raise ValueError(
            "config.json: share_encoder_decoder_embeddings=true with tie_word_embeddings=false "
            "is not supported (no aiayn tie mode shares the inputs only)"
        )
    try:
        config = ModelConfig(
            family="encoder-decoder",
            vocab_size=vmap.size,
            d_model=hf["d_model"],
            n_heads=get("encoder_attention_heads"),
            d_ff=get("encoder_ffn_dim"),
            n_encoder_layers=hf["encoder_layers"],
            n_decoder_layers=hf["decoder_layers"],
            dropout=get("dropout"),
            attention_dropout=get("attention_dropout"),
            embedding_dropout=get("dropout"),
            max_len=get("max_position_embeddings"),
            norm_first=False,
            pos_encoding="sinusoidal",
            tie_embeddings=TIES[(share, tie)],
            activation=activation_in(
                get("activation_function"), "config.json: activation_function"
            ),
            layer_norm_eps=1e-5,  # transformers' Marian uses LayerNorm's default
            embed_scale=bool(get("scale_embedding")),
            final_logits_bias=True,
        )
    except KeyError as e:
        raise ValueError(f"config.json: missing {e}") from None
    except ValueError as e:
        raise ValueError(f"config.json: {e}") from None
    ignore = [r"model\.(encoder|decoder)\.embed_positions\.weight"]
    if config.tie_embeddings == "all":
        ignore.append(r"model\.(encoder|decoder)\.embed_tokens\.weight")
    else:
        ignore.append(r"model\.shared\.weight")
    if config.tie_embeddings != "none":
        ignore.append(r"lm_head\.weight")
    mapping = Mapping(rules(config), vmap, residual_perm(config.d_model), tuple(ignore))
    tokenizer = MarianTokenizer(source, target, vocab, vmap)
    return Imported(config, mapping, tokenizer, "MarianMTModel")


# -- export ------------------------------------------------------------------------------------


def _native_vocab(tokenizer: Tokenizer) -> tuple[VocabMap, dict[str, int]]:
    """A sentencepiece BPE of aiayn's as a Marian vocabulary: the same ids, shifted down by
    one, with aiayn's pad moved to the end (the row CTranslate2 drops)."""
    n = tokenizer.vocab_size
    vmap = VocabMap(n, (n - 1, 0, 1, 2, 3), backend="marian")
    source_ids = vmap.source_ids
    vocab = {tokenizer.sp.id_to_piece(i): source_ids[i] for i in range(n)}
    return vmap, vocab


def shift_start_row(state: dict[str, Tensor], config: ModelConfig) -> list[str]:
    """Make the decoder's bos row zero, keeping the model's function (see the module
    docstring). Changes ``state`` in place (new tensors); returns the names changed."""
    token = state["tgt_embed.token.weight"]
    if not token[BOS].any():
        return []
    if not config.n_decoder_layers or (
        config.tie_embeddings == "all" and not config.n_encoder_layers
    ):
        raise ValueError("a nonzero bos embedding needs a first layer to absorb its shift")
    row = token[BOS].double()
    shift = row * (config.d_model**0.5 if config.embed_scale else 1.0)  # in the residual
    shifted = (token.double() - row).float()
    names = ["tgt_embed.token.weight"]
    if config.tie_embeddings == "all":
        names.append("src_embed.token.weight")
    if config.tie_embeddings != "none":
        names.append("unembed.weight")  # logits move by h . row: one constant per position
    stacks = ["decoder"] + (["encoder"] if config.tie_embeddings == "all" else [])
    for name in names:
        state[name] = shifted
    for stack in stacks:
        attn = f"{stack}.layers.0.self_attn"
        w = state[f"{attn}.in_proj.weight"].double()
        state[f"{attn}.in_proj.bias"] = (state[f"{attn}.in_proj.bias"].double() + w @ shift).float()
        state[f"{attn}.out_proj.bias"] = (state[f"{attn}.out_proj.bias"].double() + shift).float()
        names += [f"{attn}.in_proj.bias", f"{attn}.out_proj.bias"]
    return names


def _hf_config(
    config: ModelConfig, share: bool, tie: bool, their_size: int, pad: int, start: int, eos: int
) -> dict:
    """The config.json of a Marian export of ``config``."""
    hf = {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "is_encoder_decoder": True,
        "vocab_size": their_size,
        "decoder_vocab_size": their_size,
        "d_model": config.d_model,
        "encoder_layers": config.n_encoder_layers,
        "decoder_layers": config.n_decoder_layers,
        "encoder_attention_heads": config.n_heads,
        "decoder_attention_heads": config.n_heads,
        "encoder_ffn_dim": config.d_ff,
        "decoder_ffn_dim": config.d_ff,
        "activation_function": ACTIVATIONS_OUT[config.activation],
        "dropout": config.dropout,
        "attention_dropout": config.attention_dropout,
        "activation_dropout": 0.0,
        "max_position_embeddings": config.max_len,
        "scale_embedding": config.embed_scale,
        "share_encoder_decoder_embeddings": share,
        "tie_word_embeddings": tie,
        "pad_token_id": pad,
        "eos_token_id": eos,
        "decoder_start_token_id": start,
        "forced_eos_token_id": None,
    }
    return hf


def _files(config: ModelConfig, vocab: dict, source, target, vmap, pad, start, eos) -> dict:
    """The tokenizer and generation files of a Marian export (name -> bytes or JSON)."""
    pieces = {i: p for p, i in vocab.items()}
    files = {
        SOURCE_SPM: source,
        TARGET_SPM: target,
        VOCAB_JSON: vocab,
        "tokenizer_config.json": {
            "tokenizer_class": "MarianTokenizer",
            "unk_token": pieces[vmap.specials[1]],
            "eos_token": pieces[eos],
            "pad_token": pieces[pad],
            "model_max_length": config.max_len,
        },
        "generation_config.json": {
            "decoder_start_token_id": start,
            "eos_token_id": eos,
            "pad_token_id": pad,
            "bad_words_ids": [[pad]],
            "forced_eos_token_id": None,
            "max_length": config.max_len,
        },
    }
    return files


def export_parts(model, tokenizer, run: dict) -> Exported:
    config: ModelConfig = model.config
    no_counterpart(
        config,
        "Marian",
        norm_first=False,
        pos_encoding="sinusoidal",
        embedding_layer_norm=False,
        n_token_types=0,
        layer_norm_eps=1e-5,
    )
    if config.source_vocab != config.target_vocab:
        raise ValueError("src_vocab_size != tgt_vocab_size has no Marian counterpart")
    if isinstance(tokenizer, MarianTokenizer):
        vmap, vocab = tokenizer.vocab_map, tokenizer.vocab
        source, target = tokenizer.source_proto, tokenizer.target_proto
    elif isinstance(tokenizer, Tokenizer):
        vmap, vocab = _native_vocab(tokenizer)
        source = target = tokenizer.proto
    else:
        raise ValueError(
            f"the tokenizer ({type(tokenizer).__name__}) has no Marian counterpart "
            "(Marian reads sentencepiece models)"
        )
    state = dict(model.state_dict())
    if "unembed.bias" not in state:
        state["unembed.bias"] = torch.zeros(config.target_vocab)
    shifted = shift_start_row(state, config)
    eff = config.replace(final_logits_bias=True)
    share, tie = {v: k for k, v in TIES.items()}[config.tie_embeddings]
    pad, start, eos = vmap.specials[0], vmap.specials[BOS], vmap.specials[3]
    pad = start if pad is None else pad
    hf = _hf_config(config, share, tie, vmap.their_size, pad, start, eos)
    files = _files(config, vocab, source, target, vmap, pad, start, eos)
    mapping = Mapping(rules(eff), vmap, residual_perm(config.d_model))
    stored, _ = untied_state_dict(model)  # a tied tensor is kept once
    originals = {n: stored[n] for n in shifted if n in stored}
    return Exported("MarianMTModel", hf, state, mapping, files=files, originals=originals)
