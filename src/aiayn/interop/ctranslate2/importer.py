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

Ids: CTranslate2's vocabularies are token lists, a source and a target one or one shared; the
tokenizer (``aiayn.data.argos_tokenizer.ArgosTokenizer``: pieces looked up in those lists, as
CTranslate2 looks them up) maps each onto aiayn's special ids (pad 0, unk 1, bos 2, eos 3,
mask 4; ``ct2_vocab_maps``): unk and eos as the config names them, bos the token decoding
starts from (an extra row where that is a zero vector, Marian's, or eos: a copy of its row),
pad the vocabulary's ``<blank>`` or ``<pad>`` (an extra row without one). An extra row is
never produced (-inf logit). Separate vocabularies make ``src_vocab_size`` and
``tgt_vocab_size``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from torch import Tensor

from aiayn.data.argos_tokenizer import ArgosTokenizer, ct2_vocab_maps, read_ct2_vocabularies
from aiayn.data.tokenizer import BOS, EOS
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
)
from aiayn.interop.ctranslate2.rules import SOURCE_EMBEDDING, Architecture, architecture
from aiayn.interop.hf_rules import Mapping as RuleMapping
from aiayn.interop.hf_rules import to_ours

SHARED_SPM, SOURCE_SPM, TARGET_SPM = "sentencepiece.model", "source.spm", "target.spm"
TARGET_ROWS = ("decoder/embeddings/weight", "decoder/projection/weight", "decoder/projection/bias")


# -- ids -----------------------------------------------------------------------------------------


def _config_tokens(special: SpecialTokens) -> dict:
    """The special tokens as config.json names them (``ct2_vocab_maps`` reads that)."""
    return {
        "unk_token": special.unk,
        "bos_token": special.bos,
        "eos_token": special.eos,
        "decoder_start_token": special.decoder_start,
    }


def check_framing(special: SpecialTokens, maps: tuple[VocabMap, VocabMap], where: str) -> None:
    """What CTranslate2 adds to each source must be aiayn's bos / eos of the source."""
    source_map, target_map = maps
    if special.decoder_start is None:
        raise UserError(
            f"{where}: decoder_start_token is null (every translation starts from a token the "
            "caller gives): not supported"
        )
    if special.add_source_eos and source_map.specials[EOS] is None:
        raise UserError(
            f"{where}: add_source_eos, but eos_token {special.eos!r} is not in the source "
            "vocabulary"
        )
    if special.add_source_bos and (
        source_map.specials[BOS] is None
        or (source_map is target_map and special.bos != special.decoder_start)
    ):
        raise UserError(
            f"{where}: add_source_bos with bos_token {special.bos!r}, which is not the token "
            f"decoding starts from ({special.decoder_start!r}) in a shared vocabulary, or not "
            "in the source vocabulary: not supported"
        )


def _with_optional(weights: dict[str, Tensor]) -> dict[str, Tensor]:
    """CTranslate2's optional variables filled in: a linear layer without a bias adds zero,
    and so does an output projection without one."""
    out = dict(weights)
    for name, w in weights.items():
        if name.endswith("/weight") and name.startswith(("encoder/layer_", "decoder/layer_")):
            out.setdefault(name[: -len("weight")] + "bias", torch.zeros(w.shape[0]))
    rows = weights["decoder/projection/weight"].shape[0]
    out.setdefault("decoder/projection/bias", torch.zeros(rows))
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


def _check_rows(weights: dict[str, Tensor], source: list[str], target: list[str], where: str):
    for name, side, tokens in (
        (SOURCE_EMBEDDING, "source", source),
        *((name, "target", target) for name in TARGET_ROWS),
    ):
        if name in weights and weights[name].shape[0] != len(tokens):
            raise UserError(
                f"{where}: variable {name!r} has {weights[name].shape[0]} rows, but the {side} "
                f"vocabulary has {len(tokens)} tokens"
            )


# -- the tokenizer --------------------------------------------------------------------------------


def _sentencepiece_files(ct2_dir: Path, tokenizer) -> list[Path]:
    """The sentencepiece models given (one, or a source and a target), or those beside the
    model (``sentencepiece.model``, or ``source.spm`` and ``target.spm``)."""
    if tokenizer is None:
        if (ct2_dir / SHARED_SPM).is_file():
            return [ct2_dir / SHARED_SPM]
        if (ct2_dir / SOURCE_SPM).is_file() and (ct2_dir / TARGET_SPM).is_file():
            return [ct2_dir / SOURCE_SPM, ct2_dir / TARGET_SPM]
        raise UserError(
            f"{ct2_dir}: a CTranslate2 model holds no tokenizer; give its sentencepiece "
            "model (--tokenizer sentencepiece.model, or a source and a target model)"
        )
    paths = [Path(tokenizer)] if isinstance(tokenizer, str | Path) else [Path(p) for p in tokenizer]
    if len(paths) not in (1, 2):
        raise UserError(
            f"--tokenizer takes one sentencepiece model, or a source and a target one; got "
            f"{len(paths)}"
        )
    for path in paths:
        if not path.is_file():
            raise UserError(f"{path}: no such file (the tokenizer's sentencepiece model)")
    return paths


def _tokenizer(
    ct2_dir: Path,
    tokenizer,
    special: SpecialTokens,
    zero_start: bool,
    metadata: Mapping | None,
) -> ArgosTokenizer:
    """The tokenizer over the model's vocabularies: ``tokenizer`` itself where it is one (an
    Argos Translate package's, ``package_tokenizer``), else the sentencepiece model(s) it
    names (or those beside the model). Its special ids must be the model's."""
    source, target = read_ct2_vocabularies(ct2_dir)
    maps = ct2_vocab_maps(_config_tokens(special), source, target, zero_start)
    if isinstance(tokenizer, ArgosTokenizer):
        mine = (tokenizer.source, tokenizer.target), (tokenizer.source_map, tokenizer.vocab_map)
        if mine != ((source, target), maps):
            raise UserError(
                f"{ct2_dir}: the tokenizer given is of other vocabularies or special tokens "
                "than the model's"
            )
        return tokenizer
    paths = _sentencepiece_files(ct2_dir, tokenizer)
    protos: list[bytes] = []
    for path in paths:
        try:
            protos.append(path.read_bytes())
        except OSError as e:
            raise UserError(f"{path}: cannot read the tokenizer ({e.strerror or e})") from None
    meta = dict(metadata or {})
    langs = [
        str(meta.get(k, meta.get(o, "")))
        for k, o in (("src_lang", "from_code"), ("tgt_lang", "to_code"))
    ]
    try:
        return ArgosTokenizer(
            "sentencepiece", protos[0], source, target, maps, *langs,
            str(meta.get("target_prefix", "") or ""), protos[1] if len(protos) == 2 else None,
        )  # fmt: skip
    except ValueError as e:
        raise UserError(f"{' / '.join(str(p) for p in paths)}: {e}") from None


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
    tokenizer: ArgosTokenizer | Path | str | Sequence[Path | str] | None = None,
    metadata: Mapping | None = None,
    force: bool = False,
) -> dict:
    """Write the CTranslate2 model ``ct2_dir`` as the aiayn model directory ``out``.

    ``tokenizer``: the sentencepiece model the model's pieces come from (a path), or the
    source and target ones (two paths), or a tokenizer over the model's vocabularies
    (``ArgosTokenizer``); by default the sentencepiece model(s) beside model.bin.
    ``metadata`` (e.g. an Argos Translate package's metadata.json) is kept in run.json; its
    language codes (``from_code`` / ``to_code``, or ``src_lang`` / ``tgt_lang``) name the
    model's pair. ``out`` must be absent or empty; with ``force``, a model directory there
    is replaced whole. Nothing is written when the model is refused. Returns a summary (also
    in imported.json).
    """
    ct2_dir = Path(ct2_dir)
    model_bin_path(ct2_dir)
    given = tokenizer  # the sentencepiece files are found before model.bin is read
    if not isinstance(tokenizer, ArgosTokenizer):
        given = _sentencepiece_files(ct2_dir, tokenizer)

    def make(special: SpecialTokens, zero_start: bool) -> ArgosTokenizer:
        return _tokenizer(ct2_dir, given, special, zero_start, metadata)

    return _import(ct2_dir, Path(out), make, metadata, force, [ct2_dir], str(ct2_dir))


def import_argos_package(path: Path | str, out: Path | str, *, force: bool = False) -> dict:
    """Write the Argos Translate package ``path`` (a ``.argosmodel`` archive, checked and
    extracted into a temporary folder, or an installed package folder) as the aiayn model
    directory ``out``: its CTranslate2 model, its tokenizer as Argos Translate applies it
    (``aiayn.interop.argos_package.package_tokenizer``) and its metadata.json in run.json."""
    from aiayn.interop.argos_package import opened_package, package_tokenizer

    path = Path(path)
    check_replaceable(Path(out), force, keep=[path])
    with opened_package(path) as package:

        def make(special: SpecialTokens, zero_start: bool) -> ArgosTokenizer:
            return _tokenizer(
                package.model_dir, package_tokenizer(package, zero_start), special, zero_start, None
            )

        meta = dict(package.metadata)
        return _import(package.model_dir, Path(out), make, meta, force, [path], str(path))


def transformer_variables(path: Path) -> Variables:
    """The variables of the encoder-decoder Transformer in the model.bin ``path``; another
    spec, or a revision newer than CTranslate2 4.x's, is refused."""
    where = str(path)
    model_bin = read_model_bin(path)
    if model_bin.spec not in TRANSFORMER_SPECS:
        what = OTHER_SPECS.get(model_bin.spec, "a model this importer does not know")
        raise UserError(
            f"{where}: spec {model_bin.spec!r} ({what}) is not supported; aiayn imports "
            "TransformerSpec (encoder-decoder translation models)"
        )
    if model_bin.revision > TRANSFORMER_REVISION:
        raise UserError(
            f"{where}: TransformerSpec revision {model_bin.revision} is newer than the newest "
            f"this importer reads ({TRANSFORMER_REVISION})"
        )
    variables = read_variables(model_bin)
    weights = variables.weights
    if "encoder/embeddings/weight" in weights:  # one source embedding, older spelling
        weights.setdefault(SOURCE_EMBEDDING, weights.pop("encoder/embeddings/weight"))
    for name in (SOURCE_EMBEDDING, "decoder/embeddings/weight", "decoder/projection/weight"):
        if name not in weights:
            raise UserError(f"{where}: no variable {name!r}: not an encoder-decoder Transformer")
    return variables


def _model(theirs: dict[str, Tensor], mapping: RuleMapping, config, where: str):
    """aiayn's model of ``config`` holding ``theirs`` mapped by the table: every parameter
    filled (a tied one through the one it is tied to), every variable used."""
    from aiayn.model import build_model
    from aiayn.modeldir import untied_state_dict

    try:
        ours = to_ours(theirs, mapping, config)
    except ValueError as e:
        raise UserError(f"{where}: {str(e).replace('checkpoint', 'model')}") from None
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = build_model(config)
    state = model.state_dict()
    missing = sorted(set(state) - set(ours) - set(untied_state_dict(model)[1]))
    if missing:
        raise UserError(f"{where}: nothing in the model for {', '.join(missing)}")
    for name, t in ours.items():
        if state[name].shape != t.shape:
            raise UserError(
                f"{where}: {name} has shape {tuple(t.shape)}, aiayn's {tuple(state[name].shape)}"
            )
    model.load_state_dict(ours, strict=False)
    return model.eval()


def _import(
    ct2_dir: Path, out: Path, make_tokenizer, metadata, force: bool, keep, source: str
) -> dict:
    """The import itself: ``make_tokenizer(special tokens, zero start)`` gives the tokenizer
    once model.bin is read; ``source`` names what was imported in the summary."""
    from aiayn.modeldir import save_model_dir

    path = model_bin_path(ct2_dir)
    where = str(path)
    check_replaceable(out, force, keep=keep)
    variables = transformer_variables(path)
    model_bin, weights = variables.model, variables.weights
    special = read_model_config(ct2_dir, variables)
    zero_start = bool(variables.flags.get("decoder/start_from_zero_embedding", False))
    tok = make_tokenizer(special, zero_start)
    shared = tok.target is None
    _check_rows(weights, tok.source, tok.targets, where)
    maps = (tok.source_map, tok.vocab_map)
    check_framing(special, maps, where)
    arch = architecture(variables, special, maps, shared, where)
    config = arch.config
    theirs = _positions(_with_optional(weights), arch)
    tied = {"all": ["decoder/embeddings/weight", "decoder/projection/weight"],
            "decoder": ["decoder/projection/weight"], "none": []}[config.tie_embeddings]  # fmt: skip
    mapping = RuleMapping(
        ct2.rules(config.tie_embeddings, config.norm_first, config.pos_encoding == "learned"),
        tok.vocab_map, arch.perm, tuple(tied), source=tok.source_map,
    )  # fmt: skip
    model = _model(theirs, mapping, config, where)
    summary = {
        "format": "ctranslate2",
        "source": source,
        "binary_version": model_bin.binary_version,
        "spec": model_bin.spec,
        "revision": model_bin.revision,
        "weights": sorted(variables.quantization),
        "positions": arch.positions,
        "vocabularies": "shared" if shared else "separate",
        "tokenizer": tok.kind,
        "notes": arch.notes,
    }
    with replace_directory(out, force, keep=keep) as new:
        save_model_dir(new, model)
        tok.save(new)
        write_json(new / "run.json", _run_json(metadata, summary))
        write_json(new / "imported.json", summary)
    return summary
