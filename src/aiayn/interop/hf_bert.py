"""BERT (Devlin et al. 2019) <-> aiayn's encoder-only model (Phuong & Hutter 2022, Alg. 9).

BERT is the post-LN encoder with learned positions, a token-type embedding (type 0 for every
token), a LayerNorm over the summed embeddings, no sqrt(d_model) scale, exact GELU and
LayerNorm eps 1e-12, all of which are ``ModelConfig`` fields. Its [PAD], [UNK], [CLS],
[SEP], [MASK] take aiayn's ids 0-4: [CLS] frames every text (the tokenizer's template) and
[SEP] is the eos that aiayn appends. Supported: ``BertModel`` (its pooler kept; the
masked-LM head, which it lacks, starts fresh), ``BertForSequenceClassification`` (pooler +
classifier, labels from ``id2label``), ``BertForMaskedLM`` and ``BertForPreTraining`` (the
next-sentence head is dropped).
"""

from __future__ import annotations

from pathlib import Path

from aiayn.config import ModelConfig
from aiayn.data.hf_tokenizer import HFTokenizer
from aiayn.data.vocab_map import VocabMap
from aiayn.fileio import read_json_object
from aiayn.interop import hf_vocab
from aiayn.interop.hf_rules import (
    Exported,
    Imported,
    Mapping,
    Rule,
    activation_in,
    no_counterpart,
    rule,
    setting,
)

ARCHITECTURES = (
    "BertModel",
    "BertForSequenceClassification",
    "BertForMaskedLM",
    "BertForPreTraining",
)
ACTIVATIONS_OUT = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "swish": "silu"}
SPECIAL_KEYS = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")  # ids 0-4
SPECIAL_DEFAULTS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# What transformers' BertConfig() holds for each key read here with a default: a key that
# config.json leaves out means this value (tests check the table against transformers).
REFERENCE = "BertConfig"
CONFIG_DEFAULTS = {
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "layer_norm_eps": 1e-12,
    "type_vocab_size": 2,
    "tie_word_embeddings": True,
    "is_decoder": False,
    "add_cross_attention": False,
    "problem_type": None,
    "architectures": None,
}


def rules(
    config: ModelConfig, architecture: str, prefix: str, bias: str = "cls.predictions.bias"
) -> list[Rule]:
    """Their name -> ours. ``prefix``: "bert." inside a task model, "" for a bare BertModel;
    ``bias``: where the masked-LM output bias is (``cls.predictions.decoder.bias`` is the
    one the head adds; checkpoints tie ``cls.predictions.bias`` to it)."""
    e, layer = f"{prefix}embeddings.", prefix + "encoder.layer.{i}."
    table = [
        rule("embed.token.weight", e + "word_embeddings.weight", "vd"),
        rule("embed.position.weight", e + "position_embeddings.weight", "-d"),
        rule("embed.norm.weight", e + "LayerNorm.weight", "d"),
        rule("embed.norm.bias", e + "LayerNorm.bias", "d"),
    ]
    if config.n_token_types:
        table.append(rule("embed.token_type.weight", e + "token_type_embeddings.weight", "-d"))
    ours = "encoder.layers.{i}."
    qkv = [layer + f"attention.self.{n}" for n in ("query", "key", "value")]
    per_layer = [
        (ours + "self_attn.in_proj.weight", tuple(n + ".weight" for n in qkv), "-d"),
        (ours + "self_attn.in_proj.bias", tuple(n + ".bias" for n in qkv), "-"),
        (ours + "self_attn.out_proj.weight", layer + "attention.output.dense.weight", "d-"),
        (ours + "self_attn.out_proj.bias", layer + "attention.output.dense.bias", "d"),
        (ours + "norm1.weight", layer + "attention.output.LayerNorm.weight", "d"),
        (ours + "norm1.bias", layer + "attention.output.LayerNorm.bias", "d"),
        (ours + "ffn.linear1.weight", layer + "intermediate.dense.weight", "-d"),
        (ours + "ffn.linear1.bias", layer + "intermediate.dense.bias", "-"),
        (ours + "ffn.linear2.weight", layer + "output.dense.weight", "d-"),
        (ours + "ffn.linear2.bias", layer + "output.dense.bias", "d"),
        (ours + "norm2.weight", layer + "output.LayerNorm.weight", "d"),
        (ours + "norm2.bias", layer + "output.LayerNorm.bias", "d"),
    ]
    table += [rule(o, t, a, stack="encoder") for o, t, a in per_layer]
    if config.pooler == "tanh":
        table += [
            rule("pooler.0.weight", prefix + "pooler.dense.weight", "-d"),
            rule("pooler.0.bias", prefix + "pooler.dense.bias", "-"),
        ]
    if architecture == "BertForSequenceClassification":
        table += [
            rule("classifier.1.weight", "classifier.weight", "--"),
            rule("classifier.1.bias", "classifier.bias", "-"),
        ]
    if architecture in ("BertForMaskedLM", "BertForPreTraining"):
        head = "cls.predictions."
        table += [
            rule("mlm_dense.weight", head + "transform.dense.weight", "-d"),
            rule("mlm_dense.bias", head + "transform.dense.bias", "-"),
            rule("mlm_norm.weight", head + "transform.LayerNorm.weight", "-"),
            rule("mlm_norm.bias", head + "transform.LayerNorm.bias", "-"),
            rule("unembed.bias", bias, "v"),
        ]
        if config.tie_embeddings == "none":
            table.append(rule("unembed.weight", head + "decoder.weight", "vd"))
    return table


def _architecture(hf: dict, names: set[str]) -> str:
    declared = setting(hf, CONFIG_DEFAULTS, "architectures") or []
    if declared:
        if declared[0] not in ARCHITECTURES:
            raise ValueError(
                f"config.json: architectures={declared} is not supported; "
                f"allowed: {', '.join(ARCHITECTURES)}"
            )
        return declared[0]
    if "classifier.weight" in names:
        return "BertForSequenceClassification"
    if "cls.predictions.bias" in names:
        return "BertForMaskedLM"
    return "BertModel"


def _check(hf: dict) -> None:
    problems = {
        # absent (transformers 5 has no other) or absolute (the default of earlier releases)
        "position_embedding_type": (hf.get("position_embedding_type", "absolute"), "absolute"),
        "is_decoder": (setting(hf, CONFIG_DEFAULTS, "is_decoder"), False),
        "add_cross_attention": (setting(hf, CONFIG_DEFAULTS, "add_cross_attention"), False),
    }
    for name, (have, want) in problems.items():
        if have != want:
            raise ValueError(f"config.json: {name}={have!r} is not supported (only {want!r})")
    if setting(hf, CONFIG_DEFAULTS, "problem_type") not in (None, "single_label_classification"):
        raise ValueError(
            f"config.json: problem_type={hf['problem_type']!r} is not supported "
            "(only single_label_classification)"
        )


def _labels(hf: dict) -> list[str]:
    id2label = hf.get("id2label") or {}
    n = int(hf.get("num_labels", len(id2label) or 2))
    if n < 2:
        raise ValueError(f"config.json: num_labels={n} (regression) is not supported")
    return [str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}"))) for i in range(n)]


def vocab_map(text: str, directory: Path, their_size: int) -> VocabMap:
    options = hf_vocab.tokenizer_config(directory)
    specials = []
    for key, default in zip(SPECIAL_KEYS, SPECIAL_DEFAULTS, strict=True):
        name = hf_vocab.token_name(options.get(key)) or default
        specials.append(hf_vocab.token_id(text, name))
    return VocabMap(their_size, tuple(specials), backend="tokenizers")


def _pooling(directory: Path) -> str:
    """sentence-transformers' 1_Pooling/config.json says how to pool (mean, cls, max)."""
    path = Path(directory) / "1_Pooling" / "config.json"
    if not path.is_file():
        return "first"
    data = read_json_object(path, "sentence-transformers pooling config")
    for key, ours in (
        ("pooling_mode_mean_tokens", "mean"),
        ("pooling_mode_cls_token", "first"),
        ("pooling_mode_max_tokens", "max"),
    ):
        if data.get(key):
            return ours
    raise ValueError(f"{path}: no pooling mode our model has (mean, cls or max tokens)")


def import_parts(hf: dict, directory: Path, names: set[str]) -> Imported:
    _check(hf)
    architecture = _architecture(hf, names)
    prefix = "bert." if any(n.startswith("bert.") for n in names) else ""
    text = hf_vocab.tokenizer_json(directory, "wordpiece")
    vmap = vocab_map(text, directory, int(hf["vocab_size"]))
    labels = _labels(hf) if architecture == "BertForSequenceClassification" else []
    has_mlm = architecture in ("BertForMaskedLM", "BertForPreTraining")

    def get(key):
        return setting(hf, CONFIG_DEFAULTS, key)

    activation = activation_in(get("hidden_act"), "config.json: hidden_act")
    try:
        config = ModelConfig(
            family="encoder-only",
            vocab_size=vmap.size,
            d_model=hf["hidden_size"],
            n_heads=hf["num_attention_heads"],
            d_ff=hf["intermediate_size"],
            n_encoder_layers=hf["num_hidden_layers"],
            n_decoder_layers=0,
            dropout=get("hidden_dropout_prob"),
            attention_dropout=get("attention_probs_dropout_prob"),
            embedding_dropout=get("hidden_dropout_prob"),
            max_len=hf["max_position_embeddings"],
            norm_first=False,
            pos_encoding="learned",
            tie_embeddings="all" if get("tie_word_embeddings") else "none",
            activation=activation,
            mlm_activation=activation,  # BertPredictionHeadTransform applies hidden_act too
            layer_norm_eps=get("layer_norm_eps"),
            n_classes=len(labels),
            pooling=_pooling(directory),
            embed_scale=False,
            embedding_layer_norm=True,
            n_token_types=get("type_vocab_size"),
            final_logits_bias=has_mlm,
            pooler="tanh" if f"{prefix}pooler.dense.weight" in names else "none",
        )
    except KeyError as e:
        raise ValueError(f"config.json: missing {e}") from None
    except ValueError as e:
        raise ValueError(f"config.json: {e}") from None
    ignore = (r".*position_ids", r"cls\.seq_relationship\..*")
    if config.tie_embeddings != "none":
        ignore += (r"cls\.predictions\.decoder\.weight",)
    bias = "cls.predictions.bias"
    if "cls.predictions.decoder.bias" in names:  # the bias the head adds, when it is stored
        bias, ignore = "cls.predictions.decoder.bias", ignore + (r"cls\.predictions\.bias",)
    mapping = Mapping(rules(config, architecture, prefix, bias), vmap, ignore=ignore)
    run = {"labels": labels} if labels else {}
    return Imported(config, mapping, HFTokenizer(text, vmap), architecture, run)


def _hf_config(config: ModelConfig, architecture: str, vmap, run: dict) -> dict:
    """The config.json of a BERT export of ``config`` (labels from ``run``, if it has them)."""
    pad = vmap.specials[0]
    hf = {
        "architectures": [architecture],
        "model_type": "bert",
        "vocab_size": vmap.their_size,
        "hidden_size": config.d_model,
        "num_hidden_layers": config.n_encoder_layers,
        "num_attention_heads": config.n_heads,
        "intermediate_size": config.d_ff,
        "hidden_act": ACTIVATIONS_OUT[config.activation],
        "hidden_dropout_prob": config.dropout,
        "attention_probs_dropout_prob": config.attention_dropout,
        "max_position_embeddings": config.max_len,
        "type_vocab_size": config.n_token_types,
        "layer_norm_eps": config.layer_norm_eps,
        "pad_token_id": pad if pad is not None else 0,
        "position_embedding_type": "absolute",
        "tie_word_embeddings": config.tie_embeddings != "none",
    }
    labels = run.get("labels") or []
    if config.n_classes:
        if len(labels) != config.n_classes:
            labels = [f"LABEL_{i}" for i in range(config.n_classes)]
        hf["id2label"] = {str(i): name for i, name in enumerate(labels)}
        hf["label2id"] = {name: i for i, name in enumerate(labels)}
    return hf


def export_parts(model, tokenizer, run: dict) -> Exported:
    config: ModelConfig = model.config
    if not isinstance(tokenizer, HFTokenizer):
        raise ValueError(
            f"the tokenizer ({type(tokenizer).__name__}) has no BERT counterpart: export as "
            "BERT needs a WordPiece tokenizer (a model imported from BERT)"
        )
    no_counterpart(
        config,
        "BERT",
        norm_first=False,
        pos_encoding="learned",
        embed_scale=False,
        embedding_layer_norm=True,
        tie_embeddings=("all", "none"),
    )
    if not config.n_token_types:
        raise ValueError("n_token_types=0 has no BERT counterpart (BERT has token types)")
    if config.n_classes:
        architecture = "BertForSequenceClassification"
        no_counterpart(config, architecture, pooling="first", pooler="tanh")
    else:
        architecture = "BertModel" if config.pooler == "tanh" else "BertForMaskedLM"
    if architecture == "BertForMaskedLM" and config.mlm_activation != config.activation:
        raise ValueError(
            f"mlm_activation={config.mlm_activation!r} differs from activation="
            f"{config.activation!r}: BertForMaskedLM has one hidden_act for its layers and its "
            "masked-LM head"
        )
    vmap = tokenizer.vocab_map
    prefix = "" if architecture == "BertModel" else "bert."
    state = dict(model.state_dict())
    if architecture == "BertForMaskedLM" and "unembed.bias" not in state:
        import torch

        state["unembed.bias"] = torch.zeros(config.vocab_size)
        for extra in vmap.extras:
            state["unembed.bias"][extra] = float("-inf")
    eff = config.replace(final_logits_bias=architecture == "BertForMaskedLM")
    hf = _hf_config(config, architecture, vmap, run)
    names = {}
    tok = tokenizer.tok
    for key, their in zip(SPECIAL_KEYS, vmap.specials, strict=True):
        if their is not None:
            names[key] = tok.id_to_token(their)
    files = {
        "tokenizer.json": tokenizer.text.encode("utf-8"),
        "tokenizer_config.json": {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": tokenizer.folds_case,
            "model_max_length": config.max_len,
            **names,
        },
    }
    mapping = Mapping(rules(eff, architecture, prefix), vmap)
    aliases = {}
    if architecture == "BertForMaskedLM":  # both names of the head's bias, as checkpoints hold
        aliases["cls.predictions.decoder.bias"] = "cls.predictions.bias"
    return Exported(architecture, hf, state, mapping, files=files, aliases=aliases)
