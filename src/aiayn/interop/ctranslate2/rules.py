"""CTranslate2's TransformerSpec -> aiayn's encoder-decoder: one table of names, and the
options of the spec read as ``ModelConfig`` fields.

The table (``rules``) is ``aiayn.interop.hf_rules``'s: our parameter, their variable(s), which
axes index the target vocabulary ("v"), the source vocabulary ("s") or the model dimension
("d"). CTranslate2 fuses the query,
key and value projections of self-attention into ``linear_0`` and the key and value of
cross-attention into ``linear_1``; aiayn keeps one fused ``in_proj``, so cross-attention's is
``linear_0`` and ``linear_1`` stacked. A LayerNorm is ``gamma`` and ``beta``; a pre-norm stack
ends with its own ``layer_norm`` (aiayn's ``norm`` of a ``norm_first`` stack).

What the spec says with flags rather than variables (``pre_norm``, ``num_heads``,
``activation``, ``scale_embeddings``, ``start_from_zero_embedding``...) is read by
``architecture``; a flag or variable of an option aiayn's model does not have (relative
positions, rotary or ALiBi positions, another activation, gated or multi-query layers, RMS
norms...) is refused by ``check_supported``, naming it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.config import ModelConfig
from aiayn.data.vocab_map import VocabMap
from aiayn.errors import UserError
from aiayn.interop.ctranslate2.reader import SpecialTokens, Variables
from aiayn.interop.hf_rules import Rule, rule
from aiayn.model.layers import sinusoidal_table

SOURCE_EMBEDDING = "encoder/embeddings_0/weight"
DEFAULT_EPSILON = 1e-5  # CTranslate2's LayerNorm without a configured epsilon

# CTranslate2's activations (ctranslate2.specs.common_spec.Activation) -> aiayn's
ACTIVATIONS = {0: "relu", 1: "gelu_tanh", 2: "swish", 3: "gelu"}
ACTIVATION_NAMES = {4: "GELUSigmoid", 5: "Tanh", 6: "Sigmoid"}
# a spec with no position table computes one (CTranslate2's own sinusoid): the rows kept
COMPUTED_POSITIONS = 1024
SINUSOID_ATOL = 1e-6  # a stored table is the sinusoid when it is this close (float32 rounding)

# variables and flags of options aiayn's model does not have: pattern -> what they are
UNSUPPORTED = (
    (r"encoder/embeddings_[1-9]\d*/weight", "several source embeddings (source features)"),
    (r".*/relative_(asymmetric_)?position_(keys|values)", "relative position representations"),
    (r".*/relative_attention_(bias|max_distance)", "relative attention biases (T5)"),
    (r".*/rotary_\w+", "rotary position embeddings"),
    (r".*/(original_)?max_position_embeddings", "rotary position embeddings"),
    (r".*/linear_0_noact/.*", "gated feed-forward layers (GLU)"),
    (r".*/num_heads_kv", "multi-query or grouped-query attention"),
    (r".*/layer_norm_use_residual", "RMS normalisation"),
    (r".*/layernorm_embedding/.*", "a LayerNorm over the embeddings"),
    (r".*/(q|k|v)_norm/.*", "normalised queries, keys or values"),
    (r"decoder/project_(in|out)/.*", "projections around the decoder"),
    (r".*/queries_scale", "a custom query scale"),
    (r"decoder/scale_outputs", "scaled decoder outputs"),
    (r".*/sliding_window", "sliding-window attention"),
    (r"decoder/final_logit_softcapping", "soft-capped logits"),
    (r".*/layer_scalar", "scaled layer outputs"),
    (
        r".*/(input|post_attention|pre_feedforward|post_feedforward|shared"
        r"|external_(pre|post)_encoder_attention)_layer_norm/.*",
        "other LayerNorm placements (parallel residuals, pre- and post-norm)",
    ),
    (r".*/memory_kv/.*", "merged encoder attention"),
    (r".*/merged_encoder_attention", "merged encoder attention"),
)
# flags read by ``architecture`` or that change nothing aiayn computes (alignment heads choose
# which attention CTranslate2 returns); with binary versions before 6 the special tokens and
# source framing are flags too (``reader.read_model_config``)
KNOWN_FLAGS = {
    "encoder/num_heads", "decoder/num_heads", "encoder/pre_norm", "decoder/pre_norm",
    "encoder/activation", "decoder/activation", "encoder/embeddings_merge",
    "decoder/alignment_layer", "decoder/alignment_heads", "encoder/scale_embeddings",
    "decoder/scale_embeddings", "encoder/embeddings/multiply_by_sqrt_depth",
    "decoder/embeddings/multiply_by_sqrt_depth", "decoder/start_from_zero_embedding",
    "decoder/alibi", "decoder/alibi_use_positive_positions", "decoder/scale_alibi",
    "encoder/multi_query_attention",
    "num_heads", "pre_norm", "activation", "embeddings_merge", "alignment_layer",
    "alignment_heads", "with_source_bos", "with_source_eos", "with_target_bos",
    "user_decoder_start_tokens", "with_relative_position", "layernorm_embedding",
}  # fmt: skip
OFF_FLAGS = {  # known flags that must be off
    "decoder/alibi": "ALiBi attention biases",
    "encoder/multi_query_attention": "multi-query attention",
    "with_relative_position": "relative position representations",  # revisions 2-4
    "layernorm_embedding": "LayerNorms over the embeddings",  # revision 4
}


def _attention(ours: str, theirs: str, stack: str, cross: bool) -> list[Rule]:
    inputs = ("linear_0", "linear_1") if cross else ("linear_0",)
    out = "linear_2" if cross else "linear_1"
    return [
        rule(f"{ours}.in_proj.weight", tuple(f"{theirs}/{n}/weight" for n in inputs), "-d", stack=stack),
        rule(f"{ours}.in_proj.bias", tuple(f"{theirs}/{n}/bias" for n in inputs), "-", stack=stack),
        rule(f"{ours}.out_proj.weight", f"{theirs}/{out}/weight", "d-", stack=stack),
        rule(f"{ours}.out_proj.bias", f"{theirs}/{out}/bias", "d", stack=stack),
    ]  # fmt: skip


def _norm(ours: str, theirs: str, stack: str = "") -> list[Rule]:
    return [
        rule(f"{ours}.weight", f"{theirs}/gamma", "d", stack=stack),
        rule(f"{ours}.bias", f"{theirs}/beta", "d", stack=stack),
    ]


def _ffn(ours: str, theirs: str, stack: str) -> list[Rule]:
    return [
        rule(f"{ours}.linear1.weight", f"{theirs}/linear_0/weight", "-d", stack=stack),
        rule(f"{ours}.linear1.bias", f"{theirs}/linear_0/bias", "-", stack=stack),
        rule(f"{ours}.linear2.weight", f"{theirs}/linear_1/weight", "d-", stack=stack),
        rule(f"{ours}.linear2.bias", f"{theirs}/linear_1/bias", "d", stack=stack),
    ]


def rules(tie: str, norm_first: bool, positions: bool) -> list[Rule]:
    """Their variable -> our parameter for an encoder-decoder tied as ``tie`` (aiayn's
    ``tie_embeddings``), pre-norm or not, with position tables (``positions``) or not."""
    table = [rule("src_embed.token.weight", "encoder/embeddings_0/weight", "sd")]
    if tie != "all":
        table.append(rule("tgt_embed.token.weight", "decoder/embeddings/weight", "vd"))
    if tie == "none":
        table.append(rule("unembed.weight", "decoder/projection/weight", "vd"))
    table.append(rule("unembed.bias", "decoder/projection/bias", "v"))
    if positions:
        table.append(
            rule("src_embed.position.weight", "encoder/position_encodings/encodings", "-d")
        )
        table.append(
            rule("tgt_embed.position.weight", "decoder/position_encodings/encodings", "-d")
        )
    e, d = "encoder/layer_{i}", "decoder/layer_{i}"
    table += _attention("encoder.layers.{i}.self_attn", f"{e}/self_attention", "encoder", False)
    table += _norm("encoder.layers.{i}.norm1", f"{e}/self_attention/layer_norm", "encoder")
    table += _ffn("encoder.layers.{i}.ffn", f"{e}/ffn", "encoder")
    table += _norm("encoder.layers.{i}.norm2", f"{e}/ffn/layer_norm", "encoder")
    table += _attention("decoder.layers.{i}.self_attn", f"{d}/self_attention", "decoder", False)
    table += _norm("decoder.layers.{i}.norm1", f"{d}/self_attention/layer_norm", "decoder")
    table += _attention("decoder.layers.{i}.cross_attn", f"{d}/attention", "decoder", True)
    table += _norm("decoder.layers.{i}.norm2", f"{d}/attention/layer_norm", "decoder")
    table += _ffn("decoder.layers.{i}.ffn", f"{d}/ffn", "decoder")
    table += _norm("decoder.layers.{i}.norm3", f"{d}/ffn/layer_norm", "decoder")
    if norm_first:
        table += _norm("encoder.norm", "encoder/layer_norm") + _norm(
            "decoder.norm", "decoder/layer_norm"
        )
    return table


# -- the options of a spec ---------------------------------------------------------------------


def check_supported(weights: dict[str, Tensor], flags: dict, where: str) -> None:
    """Refuse a variable or flag of an option aiayn's model does not have, naming it."""
    for name in sorted([*weights, *flags]):
        for pattern, what in UNSUPPORTED:
            if re.fullmatch(pattern, name):
                raise UserError(f"{where}: variable {name!r}: {what} are not supported")
        if (
            name in weights
            and name.endswith("/gamma")
            and name[: -len("gamma")] + "beta" not in weights
        ):
            raise UserError(
                f"{where}: variable {name!r} has no beta beside it: RMS normalisation is not "
                "supported (aiayn's layers use LayerNorm)"
            )
    for name, value in sorted(flags.items()):
        if name not in KNOWN_FLAGS:
            raise UserError(
                f"{where}: flag {name!r} = {value} is an option this importer does not know"
            )
        if name in OFF_FLAGS and value:
            raise UserError(f"{where}: flag {name!r} is on: {OFF_FLAGS[name]} are not supported")


def same_flag(flags: dict, name: str, default, where: str):
    """The value of ``encoder/name`` and ``decoder/name`` (CTranslate2's ``default`` where
    neither is set), which must agree: aiayn's encoder and decoder share the setting."""
    enc, dec = flags.get(f"encoder/{name}", default), flags.get(f"decoder/{name}", default)
    if enc != dec:
        raise UserError(
            f"{where}: encoder/{name} = {enc} differs from decoder/{name} = {dec}; aiayn's "
            f"encoder and decoder share {name}"
        )
    return enc


def activation(flags: dict, where: str) -> str:
    value = same_flag(flags, "activation", 0, where)
    if value not in ACTIVATIONS:
        name = ACTIVATION_NAMES.get(value, f"number {value}")
        allowed = ", ".join(f"{k} ({v})" for k, v in ACTIVATIONS.items())
        raise UserError(
            f"{where}: flag 'encoder/activation' = {value} ({name}) is not supported; "
            f"allowed: {allowed}"
        )
    return ACTIVATIONS[value]


def embeddings_scaled(flags: dict, d_model: int, where: str) -> bool:
    """Whether token embeddings are multiplied by sqrt(d_model), as CTranslate2 decides it:
    ``scale_embeddings`` is a flag (on: sqrt(d_model)) or the factor itself (1: none);
    without it, the older ``embeddings/multiply_by_sqrt_depth`` flag; without either, on."""
    seen = {}
    for stack in ("encoder", "decoder"):
        name = f"{stack}/scale_embeddings"
        value = flags.get(name, flags.get(f"{stack}/embeddings/multiply_by_sqrt_depth", 1))
        if isinstance(value, float) and value != 1.0:
            if not math.isclose(value, math.sqrt(d_model), rel_tol=1e-6):
                raise UserError(
                    f"{where}: flag {name!r} = {value}: embeddings scaled by other than "
                    f"sqrt(d_model) = {math.sqrt(d_model):.6g} or 1 are not supported"
                )
            seen[stack] = True
        else:
            seen[stack] = bool(value) and not isinstance(value, float)
    if seen["encoder"] != seen["decoder"]:
        raise UserError(
            f"{where}: the encoder's embeddings are {'' if seen['encoder'] else 'not '}scaled by "
            f"sqrt(d_model) and the decoder's are {'' if seen['decoder'] else 'not '}; aiayn's "
            "share embed_scale"
        )
    return seen["encoder"]


def ct2_sinusoids(rows: int, d_model: int) -> Tensor:
    """The table CTranslate2 computes when a spec stores none (src/layers/common.cc): position
    p + 1, timescales exp(-i ln(10000) / (D/2 - 1)), every sine then every cosine; float32."""
    half = d_model // 2
    increment = torch.tensor(math.log(10000.0), dtype=torch.float32) / (half - 1)
    timescales = torch.exp(-increment * torch.arange(half, dtype=torch.float32))  # (D/2,)
    scaled = torch.arange(1, rows + 1, dtype=torch.float32)[:, None] * timescales  # (L, D/2)
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], 1)  # (L, D)


def position_layout(tables: list[Tensor]) -> str:
    """How the stored tables are laid out: "interleaved" (the paper's sinusoid, aiayn's),
    "halves" (the same sinusoid with every sine first: Marian's), or "table" (anything else:
    kept as stored)."""
    from aiayn.interop.hf_marian import residual_perm

    if not tables or any(t.shape != tables[0].shape for t in tables):
        return "table"
    rows, d = tables[0].shape
    ours = sinusoidal_table(rows, d)
    halves = ours[:, torch.argsort(residual_perm(d))]
    for layout, reference in (("interleaved", ours), ("halves", halves)):
        if all((t - reference).abs().max() <= SINUSOID_ATOL for t in tables):
            return layout
    return "table"


# -- the architecture -----------------------------------------------------------------------


@dataclass
class Architecture:
    """What a spec's variables and flags make of aiayn's model: its config, the permutation
    of the model dimension (Marian's sinusoids), how positions were stored, and notes for
    the summary."""

    config: ModelConfig
    perm: Tensor | None
    positions: str  # "interleaved", "halves", "table" (stored) or "computed"
    notes: list[str]


def _count_layers(weights: dict, stack: str) -> int:
    n = 0
    while f"{stack}/layer_{n}/ffn/linear_0/weight" in weights:
        n += 1
    return n


def _tie(weights: dict[str, Tensor], shared: bool, notes: list[str]) -> str:
    """aiayn's tie mode: equal tensors are tied (CTranslate2 stores a repeated tensor once, as
    an alias). Equal inputs with a separate output have no aiayn tie: imported as copies."""
    enc, dec = weights[SOURCE_EMBEDDING], weights["decoder/embeddings/weight"]
    out = weights["decoder/projection/weight"]
    inputs_tied = shared and enc.shape == dec.shape and torch.equal(enc, dec)
    output_tied = dec.shape == out.shape and torch.equal(dec, out)
    if inputs_tied and output_tied:
        return "all"
    if inputs_tied:
        notes.append("the encoder and decoder embeddings are shared: imported as two copies")
    return "decoder" if output_tied else "none"


def _position_tables(weights: dict, d_model: int, where: str) -> tuple[str, int]:
    names = ["encoder/position_encodings/encodings", "decoder/position_encodings/encodings"]
    stored = [weights[n] for n in names if n in weights]
    if not stored:
        return "computed", COMPUTED_POSITIONS
    if len(stored) == 1:
        missing = next(n for n in names if n not in weights)
        raise UserError(f"{where}: one position table without the other ({missing!r})")
    for name, table in zip(names, stored, strict=True):
        if table.dim() != 2 or table.shape[1] != d_model:
            raise UserError(
                f"{where}: variable {name!r} has shape {list(table.shape)}, not (n, {d_model})"
            )
    return position_layout(stored), min(t.shape[0] for t in stored)


def architecture(
    variables: Variables,
    special: SpecialTokens,
    maps: tuple[VocabMap, VocabMap],
    shared: bool,
    where: str,
) -> Architecture:
    """The ``ModelConfig`` of a TransformerSpec's variables and flags (``rules`` reads them)
    with the (source, target) vocabulary maps ``maps``."""
    weights, flags = variables.weights, variables.flags
    check_supported(weights, flags, where)
    if special.multi_query_attention:
        raise UserError(f"{where}: config.json: multi_query_attention = true is not supported")
    d_model = weights["decoder/embeddings/weight"].shape[1]
    n_heads = same_flag(flags, "num_heads", 8, where)
    ffn = {s: weights.get(f"{s}/layer_0/ffn/linear_0/weight") for s in ("encoder", "decoder")}
    if any(w is None for w in ffn.values()):
        raise UserError(f"{where}: no feed-forward layer 0 in the encoder and the decoder")
    if ffn["encoder"].shape[0] != ffn["decoder"].shape[0]:
        raise UserError(
            f"{where}: the encoder's feed-forward width {ffn['encoder'].shape[0]} differs from "
            f"the decoder's {ffn['decoder'].shape[0]}; aiayn's stacks share d_ff"
        )
    norm_first = bool(same_flag(flags, "pre_norm", True, where))
    for stack in ("encoder", "decoder"):
        final = f"{stack}/layer_norm/gamma" in weights
        if final != norm_first:
            what = (
                "a post-norm stack with a final LayerNorm"
                if final
                else "a pre-norm stack without a final LayerNorm"
            )
            raise UserError(f"{where}: {stack}/layer_norm: {what} is not supported")
    notes: list[str] = []
    tie = _tie(weights, shared, notes)
    positions, rows = _position_tables(weights, d_model, where)
    perm = None
    if positions == "halves":
        from aiayn.interop.hf_marian import residual_perm

        perm = residual_perm(d_model)
    epsilon = special.layer_norm_epsilon
    source_map, target_map = maps
    try:
        config = ModelConfig(
            family="encoder-decoder",
            vocab_size=target_map.size,
            src_vocab_size=None if shared else source_map.size,
            tgt_vocab_size=None if shared else target_map.size,
            d_model=d_model,
            n_heads=int(n_heads),
            d_ff=ffn["encoder"].shape[0],
            n_encoder_layers=_count_layers(weights, "encoder"),
            n_decoder_layers=_count_layers(weights, "decoder"),
            max_len=rows,
            norm_first=norm_first,
            pos_encoding="sinusoidal" if positions in ("interleaved", "halves") else "learned",
            tie_embeddings=tie,
            activation=activation(flags, where),
            layer_norm_eps=DEFAULT_EPSILON if epsilon is None else float(epsilon),
            embed_scale=embeddings_scaled(flags, d_model, where),
            final_logits_bias=True,
            source_bos=special.add_source_bos,
            source_eos=special.add_source_eos,
        )
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None
    return Architecture(config, perm, positions, notes)
