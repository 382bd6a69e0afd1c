"""GPT-2 (Radford et al. 2019) <-> aiayn's decoder-only model (Phuong & Hutter 2022, Alg. 10).

GPT-2 is the pre-LN decoder with a final LayerNorm, learned positions, no sqrt(d_model) scale
and GELU's tanh approximation; its Conv1D weights are stored transposed and its attention
fuses Q, K, V in one matrix (the layout of aiayn's ``in_proj``, transposed). Its one special
token, ``<|endoftext|>``, is aiayn's eos; bos starts as a copy of it (what GPT-2 is fed
before a text), and pad, unk and mask, which GPT-2 lacks, are extra rows it never produces.
"""

from __future__ import annotations

from pathlib import Path

import torch

from aiayn.config import ModelConfig
from aiayn.data.hf_tokenizer import HFTokenizer
from aiayn.data.tokenizer import BOS
from aiayn.data.vocab_map import VocabMap
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

ARCHITECTURES = ("GPT2LMHeadModel",)
ACTIVATIONS_OUT = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "swish": "silu"}
# What transformers' GPT2Config() holds for each key read here with a default: a key that
# config.json leaves out means this value (tests check the table against transformers).
REFERENCE = "GPT2Config"
CONFIG_DEFAULTS = {
    "n_embd": 768,
    "n_head": 12,
    "n_inner": None,  # 4 * n_embd
    "n_layer": 12,
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "attn_pdrop": 0.1,
    "embd_pdrop": 0.1,
    "activation_function": "gelu_new",
    "layer_norm_epsilon": 1e-5,
    "tie_word_embeddings": True,
    "scale_attn_weights": True,
    "scale_attn_by_inverse_layer_idx": False,
    "add_cross_attention": False,
    "bos_token_id": 50256,
    "eos_token_id": 50256,
    "pad_token_id": None,
    "architectures": None,
}


def rules(config: ModelConfig) -> list[Rule]:
    """Their name -> ours (Conv1D weights transposed)."""
    h, ours = "transformer.h.{i}.", "decoder.layers.{i}."
    per_layer = [
        (ours + "norm1.weight", h + "ln_1.weight", "d", False),
        (ours + "norm1.bias", h + "ln_1.bias", "d", False),
        (ours + "self_attn.in_proj.weight", h + "attn.c_attn.weight", "-d", True),
        (ours + "self_attn.in_proj.bias", h + "attn.c_attn.bias", "-", False),
        (ours + "self_attn.out_proj.weight", h + "attn.c_proj.weight", "d-", True),
        (ours + "self_attn.out_proj.bias", h + "attn.c_proj.bias", "d", False),
        (ours + "norm2.weight", h + "ln_2.weight", "d", False),
        (ours + "norm2.bias", h + "ln_2.bias", "d", False),
        (ours + "ffn.linear1.weight", h + "mlp.c_fc.weight", "-d", True),
        (ours + "ffn.linear1.bias", h + "mlp.c_fc.bias", "-", False),
        (ours + "ffn.linear2.weight", h + "mlp.c_proj.weight", "d-", True),
        (ours + "ffn.linear2.bias", h + "mlp.c_proj.bias", "d", False),
    ]
    table = [
        rule("embed.token.weight", "transformer.wte.weight", "vd"),
        rule("embed.position.weight", "transformer.wpe.weight", "-d"),
        *(rule(o, t, a, transpose=tr, stack="decoder") for o, t, a, tr in per_layer),
        rule("decoder.norm.weight", "transformer.ln_f.weight", "d"),
        rule("decoder.norm.bias", "transformer.ln_f.bias", "d"),
    ]
    if config.tie_embeddings == "none":
        table.append(rule("unembed.weight", "lm_head.weight", "vd"))
    return table


def _check(hf: dict) -> None:
    declared = setting(hf, CONFIG_DEFAULTS, "architectures") or ["GPT2LMHeadModel"]
    if declared[0] not in ARCHITECTURES:
        raise ValueError(
            f"config.json: architectures={declared} is not supported; "
            f"allowed: {', '.join(ARCHITECTURES)}"
        )
    for name, want in (
        ("scale_attn_weights", True),
        ("scale_attn_by_inverse_layer_idx", False),
        ("add_cross_attention", False),
    ):
        have = setting(hf, CONFIG_DEFAULTS, name)
        if have != want:
            raise ValueError(f"config.json: {name}={have!r} is not supported (only {want!r})")


def vocab_map(text: str, hf: dict, directory: Path) -> VocabMap:
    """<|endoftext|> (eos_token_id) is eos; bos starts as its copy; the rest are extras."""
    their_size = int(hf["vocab_size"])
    where = Path(directory) / (
        "tokenizer.json" if (Path(directory) / "tokenizer.json").is_file() else "vocab.json"
    )
    eos = setting(hf, CONFIG_DEFAULTS, "eos_token_id")
    if eos is None:  # config.json says null: the tokenizer's <|endoftext|>
        eos = hf_vocab.token_id(text, "<|endoftext|>")
        if eos is None:
            raise ValueError(f"config.json: eos_token_id is null, and {where} has no <|endoftext|>")
    bos = setting(hf, CONFIG_DEFAULTS, "bos_token_id")
    bos = eos if bos is None else bos
    pad = setting(hf, CONFIG_DEFAULTS, "pad_token_id")
    for key, value in (("eos_token_id", eos), ("bos_token_id", bos), ("pad_token_id", pad)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < their_size:
            raise ValueError(
                f"config.json: {key}={value!r} is not an id below vocab_size={their_size}"
                + defaulted(hf, key, REFERENCE)
            )
        if key != "pad_token_id" and hf_vocab.token_name_of(text, value) is None:
            raise ValueError(
                f"{where}: no token with id {value}, the {key} of config.json"
                + defaulted(hf, key, REFERENCE)
            )
    pad = None if pad in (eos, bos) else pad
    if bos == eos:  # one token for both: bos is an extra row, fed as <|endoftext|>
        specials, copies = (pad, None, None, eos, None), {BOS: eos}
    else:
        specials, copies = (pad, None, bos, eos, None), {}
    return VocabMap(their_size, specials, copies, backend="tokenizers")


def import_parts(hf: dict, directory: Path, names: set[str]) -> Imported:
    _check(hf)
    text = hf_vocab.tokenizer_json(directory, "byte_bpe")
    vmap = vocab_map(text, hf, directory)

    def get(key):
        return setting(hf, CONFIG_DEFAULTS, key)

    d = get("n_embd")
    try:
        config = ModelConfig(
            family="decoder-only",
            vocab_size=vmap.size,
            d_model=d,
            n_heads=get("n_head"),
            d_ff=get("n_inner") or 4 * d,
            n_encoder_layers=0,
            n_decoder_layers=get("n_layer"),
            dropout=get("resid_pdrop"),
            attention_dropout=get("attn_pdrop"),
            embedding_dropout=get("embd_pdrop"),
            max_len=get("n_positions"),
            norm_first=True,
            pos_encoding="learned",
            tie_embeddings="all" if get("tie_word_embeddings") else "none",
            activation=activation_in(
                get("activation_function"), "config.json: activation_function"
            ),
            layer_norm_eps=get("layer_norm_epsilon"),
            embed_scale=False,
            final_logits_bias=True,  # -inf on the extra rows
        )
    except ValueError as e:
        raise ValueError(f"config.json: {e}") from None
    ignore = (r"transformer\.h\.\d+\.attn\.(masked_)?bias",)
    if config.tie_embeddings != "none":
        ignore += (r"lm_head\.weight",)
    mapping = Mapping(rules(config), vmap, ignore=ignore)
    return Imported(config, mapping, HFTokenizer(text, vmap), "GPT2LMHeadModel")


def export_parts(model, tokenizer, run: dict) -> Exported:
    config: ModelConfig = model.config
    if not isinstance(tokenizer, HFTokenizer):
        raise ValueError(
            f"the tokenizer ({type(tokenizer).__name__}) has no GPT-2 counterpart: export as "
            "GPT-2 needs a byte-level BPE tokenizer (a model imported from GPT-2)"
        )
    no_counterpart(
        config,
        "GPT-2",
        norm_first=True,
        pos_encoding="learned",
        embed_scale=False,
        embedding_layer_norm=False,
        n_token_types=0,
    )
    vmap = tokenizer.vocab_map
    state = dict(model.state_dict())
    if "unembed.bias" in state:  # GPT-2 has no output bias: only -inf on the extras is allowed
        bias = state["unembed.bias"]
        kept = torch.ones_like(bias, dtype=torch.bool)
        kept[vmap.extras] = False
        if bias[kept].abs().max() > 0 or not torch.isneginf(bias[~kept]).all():
            raise ValueError(
                "final_logits_bias=True with nonzero values has no GPT-2 counterpart "
                "(GPT-2 has no output bias)"
            )
    eos = vmap.specials[3]
    bos = vmap.specials[2] if vmap.specials[2] is not None else vmap.copies.get(BOS, eos)
    hf = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": vmap.their_size,
        "n_positions": config.max_len,
        "n_embd": config.d_model,
        "n_layer": config.n_decoder_layers,
        "n_head": config.n_heads,
        "n_inner": config.d_ff,
        "activation_function": ACTIVATIONS_OUT[config.activation],
        "resid_pdrop": config.dropout,
        "embd_pdrop": config.embedding_dropout,
        "attn_pdrop": config.attention_dropout,
        "layer_norm_epsilon": config.layer_norm_eps,
        "scale_attn_weights": True,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "tie_word_embeddings": config.tie_embeddings != "none",
    }
    if vmap.specials[0] is not None:
        hf["pad_token_id"] = vmap.specials[0]
    tok = tokenizer.tok
    eos_name = tok.id_to_token(eos)
    files = {
        "tokenizer.json": tokenizer.text.encode("utf-8"),
        "tokenizer_config.json": {
            "tokenizer_class": "GPT2Tokenizer",
            "bos_token": tok.id_to_token(bos),
            "eos_token": eos_name,
            "unk_token": eos_name,
            "model_max_length": config.max_len,
        },
    }
    return Exported("GPT2LMHeadModel", hf, state, Mapping(rules(config), vmap), files=files)
