"""A CTranslate2 model directory as an aiayn model directory, decoding as CTranslate2 does.

``import_ctranslate2(CT2_DIR, OUT, tokenizer=...)`` reads ``model.bin`` (``reader``), maps its
variables onto aiayn's encoder-decoder by one table (``rules``) and writes an ordinary model
directory: the weights as CTranslate2 computes with them at ``compute_type="float32"`` (int8
dequantized, float16 widened), the sentencepiece model(s) given, and a vocabulary map.

The layouts CTranslate2's converters write are ``ModelConfig`` fields: pre-norm stacks with a
final LayerNorm (OpenNMT-py, eole) or post-norm ones (Marian, OPUS-MT); a stored position table
is aiayn's sinusoid when it is one (the paper's interleaved layout, or Marian's with every sine
first: then the model dimension is permuted, as ``hf_marian`` does), and a stored table
(``pos_encoding="learned"``) otherwise; the sources framed as CTranslate2 frames them
(``source_bos`` / ``source_eos``).

Ids: CTranslate2's vocabularies are token lists; aiayn's special ids (pad 0, unk 1, bos 2,
eos 3, mask 4) take their tokens (``VocabMap``): unk and eos from ``config.json``, bos the
token decoding starts from. A role with no token of its own gets an extra row that is never
produced (-inf logit): pad always (CTranslate2 pads by lengths, so a vocabulary's pad token,
e.g. OpenNMT-py's ``<blank>``, stays an ordinary token), bos where decoding starts from a zero
vector (Marian) or from eos (a copy of eos's row). Separate source and target vocabularies
become one id space (the target's tokens, then the source's others), the source's limited
to its own tokens by the tokenizer (``source_vocab.json``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from aiayn.config import ModelConfig
from aiayn.data.marian_tokenizer import MarianTokenizer
from aiayn.data.vocab_map import VocabMap
from aiayn.errors import UserError
from aiayn.fileio import check_replaceable, replace_directory, write_json
from aiayn.interop.ctranslate2 import rules as ct2
from aiayn.interop.ctranslate2.reader import (
    OTHER_SPECS,
    TRANSFORMER_REVISION,
    TRANSFORMER_SPECS,
    SpecialTokens,
    Variables,
    model_bin_path,
    read_model_bin,
    read_model_config,
    read_variables,
    read_vocabulary,
)
from aiayn.interop.hf_rules import Mapping as RuleMapping
from aiayn.interop.hf_rules import to_ours

SHARED_SPM, SOURCE_SPM, TARGET_SPM = "sentencepiece.model", "source.spm", "target.spm"
DEFAULT_EPSILON = 1e-5  # CTranslate2's LayerNorm without a configured epsilon


@dataclass
class Vocabularies:
    """The source and target token lists and the id space both map into: ``tokens`` (the
    target's, then the source's others), and for each side the row of its weights behind
    each id of that space (-1: the side has no such token)."""

    source: list[str]
    target: list[str]
    tokens: list[str] = field(init=False)
    source_rows: Tensor = field(init=False)
    target_rows: Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = list(self.target)
        first = _first_ids(self.target)
        for token in dict.fromkeys(self.source):
            if token not in first:
                first[token] = len(self.tokens)
                self.tokens.append(token)
        self.target_rows = torch.arange(len(self.tokens))
        self.target_rows[len(self.target) :] = -1
        self.source_rows = torch.full((len(self.tokens),), -1)
        for row, token in reversed(list(enumerate(self.source))):  # the first row wins
            self.source_rows[first[token]] = row

    @property
    def shared(self) -> bool:
        return self.source == self.target

    def ids(self, side: list[str]) -> dict[str, int]:
        """token -> id of the shared space, for the tokens of ``side`` (the first of a
        repeated token, as CTranslate2 looks tokens up)."""
        first = _first_ids(self.tokens)
        return {t: first[t] for t in side}


def _first_ids(tokens: list[str]) -> dict[str, int]:
    ids: dict[str, int] = {}
    for i, t in enumerate(tokens):
        ids.setdefault(t, i)
    return ids


def read_vocabularies(directory: Path) -> Vocabularies:
    """The shared vocabulary, or the source and target ones (``.json`` or ``.txt``)."""
    shared = read_vocabulary(directory, "shared_vocabulary")
    if shared is not None:
        return Vocabularies(shared[0], shared[0])
    target = read_vocabulary(directory, "target_vocabulary")
    source = read_vocabulary(directory, "source_vocabulary")
    if source is None and read_vocabulary(directory, "source_1_vocabulary") is not None:
        raise UserError(
            f"{directory}: source_1_vocabulary: several source vocabularies (source features) "
            "are not supported"
        )
    if target is None or source is None:
        raise UserError(
            f"{directory}: no shared_vocabulary.json/.txt, nor source_vocabulary and "
            "target_vocabulary (.json or .txt): not a CTranslate2 translation model"
        )
    return Vocabularies(source[0], target[0])


# -- the architecture --------------------------------------------------------------------------


@dataclass
class Architecture:
    """What a spec's variables and flags make of aiayn's model: its config, the tie of the
    embeddings, the permutation of the model dimension (Marian's sinusoids) and the position
    layout, and what a summary says."""

    config: ModelConfig
    perm: Tensor | None
    positions: str  # "interleaved", "halves", "table" (stored) or "computed"
    notes: list[str]


def _count_layers(weights: dict, stack: str) -> int:
    n = 0
    while f"{stack}/layer_{n}/ffn/linear_0/weight" in weights:
        n += 1
    return n


def _tie(weights: dict[str, Tensor], vocab: Vocabularies, notes: list[str]) -> str:
    """aiayn's tie mode: equal tensors are tied (CTranslate2 stores a repeated tensor once, as
    an alias). Equal inputs with a separate output have no aiayn tie: imported as copies."""
    enc, dec = weights["encoder/embeddings_0/weight"], weights["decoder/embeddings/weight"]
    out = weights["decoder/projection/weight"]
    inputs_tied = vocab.shared and enc.shape == dec.shape and torch.equal(enc, dec)
    output_tied = dec.shape == out.shape and torch.equal(dec, out)
    if inputs_tied and output_tied:
        return "all"
    if inputs_tied:
        notes.append("the encoder and decoder embeddings are shared: imported as two copies")
    return "decoder" if output_tied else "none"


def _position_tables(weights: dict, d_model: int) -> tuple[str, int]:
    names = ["encoder/position_encodings/encodings", "decoder/position_encodings/encodings"]
    stored = [weights[n] for n in names if n in weights]
    if not stored:
        return "computed", ct2.COMPUTED_POSITIONS
    if len(stored) == 1:
        missing = next(n for n in names if n not in weights)
        raise UserError(f"model.bin has one position table without the other ({missing})")
    for name, table in zip(names, stored, strict=True):
        if table.dim() != 2 or table.shape[1] != d_model:
            raise UserError(f"variable {name!r} has shape {list(table.shape)}, not (n, {d_model})")
    return ct2.position_layout(stored), min(t.shape[0] for t in stored)


def architecture(
    variables: Variables, special: SpecialTokens, vocab: Vocabularies, vmap: VocabMap, where: str
) -> Architecture:
    """The ``ModelConfig`` of a TransformerSpec's variables and flags (``rules`` reads them)."""
    weights, flags = variables.weights, variables.flags
    ct2.check_supported(weights, flags, where)
    if special.multi_query_attention:
        raise UserError(f"{where}: config.json: multi_query_attention = true is not supported")
    for name in ("encoder/embeddings_0/weight", "decoder/embeddings/weight"):
        if name not in weights:
            raise UserError(f"{where}: no variable {name!r}: not an encoder-decoder Transformer")
    d_model = weights["decoder/embeddings/weight"].shape[1]
    n_heads = ct2.same_flag(flags, "num_heads", 8, where)
    ffn = {s: weights.get(f"{s}/layer_0/ffn/linear_0/weight") for s in ("encoder", "decoder")}
    if any(w is None for w in ffn.values()):
        raise UserError(f"{where}: no feed-forward layer 0 in the encoder and the decoder")
    if ffn["encoder"].shape[0] != ffn["decoder"].shape[0]:
        raise UserError(
            f"{where}: the encoder's feed-forward width {ffn['encoder'].shape[0]} differs from "
            f"the decoder's {ffn['decoder'].shape[0]}; aiayn's stacks share d_ff"
        )
    norm_first = bool(ct2.same_flag(flags, "pre_norm", True, where))
    for stack in ("encoder", "decoder"):
        final = f"{stack}/layer_norm/gamma" in weights
        if final != norm_first:
            what = (
                "a post-norm stack with a final LayerNorm"
                if final
                else ("a pre-norm stack without a final LayerNorm")
            )
            raise UserError(f"{where}: {stack}/layer_norm: {what} is not supported")
    notes: list[str] = []
    tie = _tie(weights, vocab, notes)
    positions, rows = _position_tables(weights, d_model)
    perm = None
    if positions == "halves":
        from aiayn.interop.hf_marian import residual_perm

        perm = residual_perm(d_model)
    epsilon = special.layer_norm_epsilon
    try:
        config = ModelConfig(
            family="encoder-decoder",
            vocab_size=vmap.size,
            d_model=d_model,
            n_heads=int(n_heads),
            d_ff=ffn["encoder"].shape[0],
            n_encoder_layers=_count_layers(weights, "encoder"),
            n_decoder_layers=_count_layers(weights, "decoder"),
            max_len=rows,
            norm_first=norm_first,
            pos_encoding="sinusoidal" if positions in ("interleaved", "halves") else "learned",
            tie_embeddings=tie,
            activation=ct2.activation(flags, where),
            layer_norm_eps=DEFAULT_EPSILON if epsilon is None else float(epsilon),
            embed_scale=ct2.embeddings_scaled(flags, d_model, where),
            final_logits_bias=True,
            source_bos=special.add_source_bos,
            source_eos=special.add_source_eos,
        )
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None
    return Architecture(config, perm, positions, notes)


# -- ids -----------------------------------------------------------------------------------------


def vocab_map(
    special: SpecialTokens, vocab: Vocabularies, zero_start: bool, where: str
) -> VocabMap:
    """Which token of the shared id space plays each of aiayn's roles (module doc)."""
    ids = _first_ids(vocab.tokens)
    target, source = set(vocab.target), set(vocab.source)
    for role, token in (("unk_token", special.unk), ("eos_token", special.eos)):
        for side, tokens in (("target", target), ("source", source)):
            if token not in tokens:
                raise UserError(f"{where}: {role} {token!r} is not in the {side} vocabulary")
    copies = {}
    if special.decoder_start is None:
        raise UserError(
            f"{where}: decoder_start_token is null (every translation starts from a token the "
            "caller gives): not supported"
        )
    if zero_start:  # the first decoder input is a zero vector, whatever the token
        bos = None
    elif special.decoder_start not in target:
        raise UserError(
            f"{where}: decoder_start_token {special.decoder_start!r} is not in the target "
            "vocabulary"
        )
    elif special.decoder_start == special.eos:
        bos, copies = None, {2: ids[special.eos]}  # aiayn's bos: a copy of eos's row
    else:
        bos = ids[special.decoder_start]
    if special.add_source_bos and (bos is None or special.bos != special.decoder_start):
        raise UserError(
            f"{where}: add_source_bos with bos_token {special.bos!r} other than the token "
            f"decoding starts from ({special.decoder_start!r}) is not supported"
        )
    if special.add_source_bos and special.bos not in source:
        raise UserError(f"{where}: bos_token {special.bos!r} is not in the source vocabulary")
    specials = (None, ids[special.unk], bos, ids[special.eos], None)
    return VocabMap(len(vocab.tokens), specials, copies, backend="marian")


def _joint_rows(weights: dict[str, Tensor], vocab: Vocabularies) -> dict[str, Tensor]:
    """The vocabulary-indexed variables with one row per id of the shared space (a side's
    missing tokens: zero rows, and -inf output biases: never produced)."""
    if vocab.shared:
        return weights
    out = dict(weights)
    sides = {
        "encoder/embeddings_0/weight": vocab.source_rows,
        "decoder/embeddings/weight": vocab.target_rows,
        "decoder/projection/weight": vocab.target_rows,
        "decoder/projection/bias": vocab.target_rows,
    }
    for name, rows in sides.items():
        if name not in weights:
            continue
        t = weights[name]
        fill = float("-inf") if t.dim() == 1 else 0.0
        joint = t.new_full((len(rows), *t.shape[1:]), fill)
        joint[rows >= 0] = t[rows[rows >= 0]]
        out[name] = joint
    return out


def _check_rows(weights: dict[str, Tensor], vocab: Vocabularies, where: str) -> None:
    for name, side, tokens in (
        ("encoder/embeddings_0/weight", "source", vocab.source),
        ("decoder/embeddings/weight", "target", vocab.target),
        ("decoder/projection/weight", "target", vocab.target),
        ("decoder/projection/bias", "target", vocab.target),
    ):
        if name in weights and weights[name].shape[0] != len(tokens):
            raise UserError(
                f"{where}: variable {name!r} has {weights[name].shape[0]} rows, but the {side} "
                f"vocabulary has {len(tokens)} tokens"
            )


def _with_optional(weights: dict[str, Tensor], config: ModelConfig, vocab_size: int) -> dict:
    """CTranslate2's optional variables filled in: a linear layer without a bias adds zero."""
    out = dict(weights)
    for name, w in weights.items():
        if name.endswith("/weight") and name.startswith(("encoder/layer_", "decoder/layer_")):
            out.setdefault(name[: -len("weight")] + "bias", torch.zeros(w.shape[0]))
    out.setdefault("decoder/projection/bias", torch.zeros(vocab_size))
    return out


def _positions(weights: dict[str, Tensor], arch: Architecture) -> dict[str, Tensor]:
    """Position tables as the table expects them: none for a sinusoid aiayn computes; the
    computed CTranslate2 sinusoid made a table; stored ones cut to the shorter's rows."""
    out = {k: v for k, v in weights.items() if "/position_encodings/" not in k}
    if arch.config.pos_encoding == "sinusoidal":
        return out
    rows, d = arch.config.max_len, arch.config.d_model
    for stack in ("encoder", "decoder"):
        name = f"{stack}/position_encodings/encodings"
        out[name] = weights[name][:rows] if name in weights else ct2.ct2_sinusoids(rows, d)
    return out


# -- the tokenizer --------------------------------------------------------------------------------


def _tokenizer_protos(ct2_dir: Path, tokenizer) -> tuple[bytes, bytes, list[str]]:
    """The source and target sentencepiece models: given (one path, or a source and a target),
    or beside the model (``sentencepiece.model``, or ``source.spm`` and ``target.spm``, as
    aiayn's CTranslate2 export writes them)."""
    if tokenizer is None:
        if (ct2_dir / SHARED_SPM).is_file():
            paths = [ct2_dir / SHARED_SPM]
        elif (ct2_dir / SOURCE_SPM).is_file() and (ct2_dir / TARGET_SPM).is_file():
            paths = [ct2_dir / SOURCE_SPM, ct2_dir / TARGET_SPM]
        else:
            raise UserError(
                f"{ct2_dir}: a CTranslate2 model holds no tokenizer; give its sentencepiece "
                "model (--tokenizer sentencepiece.model, or a source and a target model)"
            )
    elif isinstance(tokenizer, str | Path):
        paths = [Path(tokenizer)]
    else:
        paths = [Path(p) for p in tokenizer]
    if len(paths) not in (1, 2):
        raise UserError(
            f"--tokenizer takes one sentencepiece model or two (source, target), got {len(paths)}"
        )
    protos = []
    for path in paths:
        try:
            protos.append(path.read_bytes())
        except OSError as e:
            raise UserError(f"{path}: cannot read the tokenizer ({e.strerror or e})") from None
    return protos[0], protos[-1], [str(p) for p in paths]


def _tokenizer(
    source: bytes, target: bytes, names: list[str], vocab: Vocabularies, vmap: VocabMap
) -> MarianTokenizer:
    source_vocab = None if vocab.shared else vocab.ids(vocab.source)
    try:
        tok = MarianTokenizer(source, target, vocab.ids(vocab.tokens), vmap, source_vocab)
    except ValueError as e:
        raise UserError(f"{' / '.join(names)}: {e}") from None
    return tok


def _run_json(metadata: Mapping | None, summary: dict) -> dict:
    run: dict = {"imported": summary}
    if metadata:
        meta = dict(metadata)
        source = meta.get("src_lang", meta.get("from_code"))
        target = meta.get("tgt_lang", meta.get("to_code"))
        if isinstance(source, str) and isinstance(target, str):
            run["data"] = {"task": "translation", "src_lang": source, "tgt_lang": target}
        run["metadata"] = meta
    return run


# -- the entry point -------------------------------------------------------------------------------


def import_ctranslate2(
    ct2_dir: Path | str,
    out: Path | str,
    *,
    tokenizer: Path | str | Sequence[Path | str] | None = None,
    metadata: Mapping | None = None,
    force: bool = False,
) -> dict:
    """Write the CTranslate2 model ``ct2_dir`` as the aiayn model directory ``out``.

    ``tokenizer``: the sentencepiece model the model's tokens come from (a path), or the
    source and target ones (two paths); by default those beside model.bin. ``metadata``
    (e.g. an Argos Translate package's metadata.json): kept in run.json; its language codes
    (``from_code`` / ``to_code``, or ``src_lang`` / ``tgt_lang``) name the model's pair.
    ``out`` must be absent or empty; with ``force``, a model directory there is replaced whole.
    Nothing is written when the model is refused. Returns a summary (also imported.json).
    """
    from aiayn.model import build_model
    from aiayn.modeldir import save_model_dir

    ct2_dir, out = Path(ct2_dir), Path(out)
    path = model_bin_path(ct2_dir)
    check_replaceable(out, force, keep=[ct2_dir])
    model_bin = read_model_bin(path)
    if model_bin.spec not in TRANSFORMER_SPECS:
        what = OTHER_SPECS.get(model_bin.spec, "a model this importer does not know")
        raise UserError(
            f"{path}: spec {model_bin.spec!r} ({what}) is not supported; aiayn imports "
            "TransformerSpec (encoder-decoder translation models)"
        )
    if model_bin.revision > TRANSFORMER_REVISION:
        raise UserError(
            f"{path}: TransformerSpec revision {model_bin.revision} is newer than the newest "
            f"this importer reads ({TRANSFORMER_REVISION})"
        )
    variables = read_variables(model_bin)
    weights = dict(variables.weights)
    if "encoder/embeddings/weight" in weights:  # one source embedding, older spelling
        weights.setdefault("encoder/embeddings_0/weight", weights.pop("encoder/embeddings/weight"))
    variables.weights = weights
    special = read_model_config(ct2_dir, variables)
    vocab = read_vocabularies(ct2_dir)
    where = str(path)
    _check_rows(weights, vocab, where)
    zero_start = bool(variables.flags.get("decoder/start_from_zero_embedding", False))
    vmap = vocab_map(special, vocab, zero_start, where)
    arch = architecture(variables, special, vocab, vmap, where)
    config = arch.config
    source, target, names = _tokenizer_protos(ct2_dir, tokenizer)
    tok = _tokenizer(source, target, names, vocab, vmap)
    theirs = _positions(
        _with_optional(_joint_rows(weights, vocab), config, len(vocab.tokens)), arch
    )
    ignore = [r"decoder/projection/weight", r"decoder/embeddings/weight"]
    mapping = RuleMapping(
        ct2.rules(config.tie_embeddings, config.norm_first, config.pos_encoding == "learned"),
        vmap, arch.perm, tuple(ignore[: {"all": 2, "decoder": 1, "none": 0}[config.tie_embeddings]]),
    )  # fmt: skip
    try:
        ours = to_ours(theirs, mapping, config)
    except ValueError as e:
        raise UserError(f"{where}: {str(e).replace('checkpoint', 'model')}") from None
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = build_model(config)
    state = model.state_dict()
    for name, t in ours.items():
        if name not in state or state[name].shape != t.shape:
            raise UserError(
                f"{where}: {name} has shape {tuple(t.shape)}, aiayn's {tuple(state[name].shape)}"
            )
    missing = sorted(set(state) - set(ours) - _tied(model))
    if missing:
        raise UserError(f"{where}: nothing in the model for {', '.join(missing)}")
    model.load_state_dict(ours, strict=False)
    summary = {
        "format": "ctranslate2",
        "source": str(ct2_dir),
        "binary_version": model_bin.binary_version,
        "spec": model_bin.spec,
        "revision": model_bin.revision,
        "weights": sorted(variables.quantization),
        "positions": arch.positions,
        "vocabularies": "shared" if vocab.shared else "separate",
        "tokenizer": [Path(n).name for n in names],
        "notes": arch.notes,
    }
    with replace_directory(out, force, keep=[ct2_dir]) as new:
        save_model_dir(new, model.eval())
        tok.save(new)
        write_json(new / "run.json", _run_json(metadata, summary))
        write_json(new / "imported.json", summary)
    return summary


def _tied(model) -> set[str]:
    from aiayn.modeldir import untied_state_dict

    return set(untied_state_dict(model)[1])
