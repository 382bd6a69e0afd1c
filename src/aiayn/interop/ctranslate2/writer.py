"""An imported CTranslate2 model (or Argos Translate package), fine-tuned or not, written back
as a CTranslate2 TransformerSpec: the import's table (``rules``) read backwards.

A model whose tokenizer is an Argos Translate package's (``ArgosTokenizer``: pieces looked up
in CTranslate2's vocabularies) goes back in the layout it came in, whatever that is: pre-norm
with a final LayerNorm on each stack (OpenNMT-py, eole) or post-norm (Marian), a stored
position table or aiayn's sinusoid (stored as such), shared or separate vocabularies, the
source framing (``add_source_bos`` / ``add_source_eos``), LayerNorm's epsilon, a sentencepiece
or a Moses + BPE tokenizer. The spec is declared with ``ctranslate2.specs``, filled from the
table, validated, optimised (``int8`` where asked) and saved, as CTranslate2's own converters
do it. aiayn's own models (and imported Hugging Face Marian ones) go through transformers'
Marian instead (``conversion.convert``; ``exports`` picks one or the other).

Ids go back through the tokenizer's vocabulary maps; extra rows (a role the vocabulary has no
token for) are dropped. One of them may have learned something: aiayn's bos row, where the
model starts decoding from a zero vector (Marian conversions) or from a copy of eos. While it
is still that vector the spec says so (``start_from_zero_embedding``, or eos as the decoder's
start); once fine-tuning has moved it, it becomes a token of the target vocabulary of its own
(``<s>``, or a name no piece has), the decoder's start token, whose logit stays -inf.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from aiayn.config import ModelConfig
from aiayn.data.argos_tokenizer import ArgosTokenizer
from aiayn.data.tokenizer import BOS, EOS, UNK
from aiayn.data.vocab_map import VocabMap
from aiayn.errors import UserError
from aiayn.interop.ctranslate2 import rules as ct2
from aiayn.interop.ctranslate2.conversion import STAMP, check_quantization, require_ctranslate2
from aiayn.interop.hf_rules import Mapping, no_counterpart, to_theirs
from aiayn.model.layers import sinusoidal_table
from aiayn.modeldir import ModelDir

ACTIVATIONS = {name: number for number, name in ct2.ACTIVATIONS.items()}  # aiayn's -> theirs
START_TOKEN = "<s>"  # the name of a learned start row, where no piece has it


def has_spec_tokenizer(tokenizer) -> bool:
    """Whether a model with this tokenizer is written by ``write_spec`` (an Argos Translate
    package's, over CTranslate2's vocabularies)."""
    return isinstance(tokenizer, ArgosTokenizer)


def _fresh_token(vocab: list[str], name: str) -> str:
    """``name``, or ``name`` numbered (``<s_1>``...) where a piece of ``vocab`` already is it."""
    taken, candidate, n = set(vocab), name, 0
    while candidate in taken:
        n += 1
        candidate = f"{name[:-1]}_{n}>"
    return candidate


class _Start:
    """How the decoder starts: from a token of the vocabulary, from zeros, or from a token of
    its own added to the target vocabulary (the bos row fine-tuning moved)."""

    def __init__(self, state: dict[str, Tensor], tok: ArgosTokenizer) -> None:
        vmap, targets = tok.vocab_map, tok.targets
        row = state["tgt_embed.token.weight"][BOS]
        eos = vmap.specials[EOS]
        self.zero, self.added = False, None
        if vmap.specials[BOS] is not None:
            self.token = targets[vmap.specials[BOS]]
        elif not vmap.copies and not row.any():
            self.token, self.zero = targets[eos], True  # CTranslate2 starts from zeros
        elif vmap.copies.get(BOS) == eos and torch.equal(row, state["tgt_embed.token.weight"][EOS]):
            self.token = targets[eos]
        else:
            self.token = self.added = _fresh_token(targets, START_TOKEN)

    def maps(self, tok: ArgosTokenizer) -> tuple[VocabMap, VocabMap, list[str], list[str]]:
        """(source map, target map, source vocabulary, target vocabulary) of the spec."""
        source_map, target_map = tok.source_map, tok.vocab_map
        source, target = list(tok.source), list(tok.targets)
        if self.added is None:
            return source_map, target_map, source, target
        specials = list(target_map.specials)
        specials[BOS] = target_map.their_size
        added = VocabMap(target_map.their_size + 1, specials, backend=target_map.backend)
        target.append(self.added)
        if tok.target is None:  # one shared vocabulary: the source's grows with it
            return added, added, target, target
        return source_map, added, source, target


def _state(model, config: ModelConfig) -> dict[str, Tensor]:
    state = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    if "unembed.bias" not in state:
        state["unembed.bias"] = torch.zeros(config.target_vocab)
    return state


def _spec(config: ModelConfig):
    from ctranslate2.specs import transformer_spec

    spec = transformer_spec.TransformerSpec.from_config(
        (config.n_encoder_layers, config.n_decoder_layers),
        config.n_heads,
        pre_norm=config.norm_first,
        activation=ACTIVATIONS[config.activation],
    )
    for stack in (spec.encoder, spec.decoder):
        stack.scale_embeddings = config.embed_scale
    return spec


def _assign(spec, name: str, value: np.ndarray) -> None:
    """Set the spec's variable ``name`` ("decoder/layer_0/ffn/linear_0/weight")."""
    *path, leaf = name.split("/")
    node = spec
    for part in path:
        stem, _, index = part.rpartition("_")
        if index.isdigit() and hasattr(node, stem) and isinstance(getattr(node, stem), list):
            node = getattr(node, stem)[int(index)]  # layer_3, embeddings_0
        else:
            node = getattr(node, part)
    setattr(node, leaf, value)


def _variables(state: dict[str, Tensor], config: ModelConfig, start: _Start, maps) -> dict:
    """Their variables of our state: the table read backwards (cross-attention's fused
    projection split as CTranslate2 keeps it: the query, then the key and value)."""
    source_map, target_map = maps
    table = ct2.rules(config.tie_embeddings, config.norm_first, config.pos_encoding == "learned")
    theirs = to_theirs(state, Mapping(table, target_map, source=source_map), config)
    for i in range(config.n_decoder_layers):
        for kind in ("weight", "bias"):
            fused = state[f"decoder.layers.{i}.cross_attn.in_proj.{kind}"]  # (3D, ...)
            head = f"decoder/layer_{i}/attention"
            theirs[f"{head}/linear_0/{kind}"] = fused[: config.d_model].contiguous()  # (D, ...)
            theirs[f"{head}/linear_1/{kind}"] = fused[config.d_model :].contiguous()  # (2D, ...)
    if start.added is not None:  # the learned start row: never produced
        theirs["decoder/projection/bias"][-1] = float("-inf")
    if config.pos_encoding == "sinusoidal":  # aiayn's sinusoid, stored as CTranslate2 reads it
        table_rows = sinusoidal_table(config.max_len, config.d_model)  # (L, D)
        for stack in ("encoder", "decoder"):
            theirs[f"{stack}/position_encodings/encodings"] = table_rows
    return theirs


def _settings(config: ModelConfig, start: _Start, maps, source, target) -> dict:
    """config.json's special tokens and source framing."""
    source_map, target_map = maps
    return {
        "unk_token": target[target_map.specials[UNK]],
        "bos_token": source[source_map.specials[BOS]] if config.source_bos else start.token,
        "eos_token": target[target_map.specials[EOS]],
        "decoder_start_token": start.token,
        "add_source_bos": config.source_bos,
        "add_source_eos": config.source_eos,
        "layer_norm_epsilon": config.layer_norm_eps,
    }


def _checked(directory: ModelDir):
    """The model directory's (config, tokenizer), where a TransformerSpec can hold it."""
    config, tok = directory.config, directory.tokenizer()
    where = str(directory.path)
    if config.family != "encoder-decoder":
        raise UserError(f"{where} holds an {config.family} model; CTranslate2 takes translators")
    if not has_spec_tokenizer(tok):
        raise UserError(f"{where}: its tokenizer is not an Argos Translate package's")
    if directory.quantization:
        raise UserError(
            f"{where} holds {directory.quantization} weights; write the float model directory "
            "it was quantized from"
        )
    try:
        no_counterpart(config, "CTranslate2", embedding_layer_norm=False, n_token_types=0)
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None
    return config, tok


def write_spec(model_dir: ModelDir | Path, out: Path, quantization: str | None = None) -> dict:
    """Write the encoder-decoder in ``model_dir`` (with an Argos Translate package's
    tokenizer) as the CTranslate2 model ``out`` (model.bin, config.json, vocabularies), int8
    with ``quantization="int8"``. Returns the record also written to ``out/aiayn.json``."""
    check_quantization(quantization)
    ctranslate2 = require_ctranslate2()
    directory, out = ModelDir.open(model_dir), Path(out)
    config, tok = _checked(directory)
    state = _state(directory.model(), config)
    start = _Start(state, tok)
    source_map, target_map, source, target = start.maps(tok)
    maps = (source_map, target_map)
    spec = _spec(config)
    for name, tensor in _variables(state, config, start, maps).items():
        _assign(spec, name, tensor.numpy())
    # a tied tensor is one array: CTranslate2 stores it once (an alias)
    if config.tie_embeddings == "all":
        spec.decoder.embeddings.weight = spec.encoder.embeddings[0].weight
    if config.tie_embeddings != "none":
        spec.decoder.projection.weight = spec.decoder.embeddings.weight
    spec.decoder.start_from_zero_embedding = start.zero
    for key, value in _settings(config, start, maps, source, target).items():
        setattr(spec.config, key, value)
    spec.register_source_vocabulary(source)
    spec.register_target_vocabulary(target)
    try:
        spec.validate()
    except ValueError as e:
        raise UserError(f"{directory.path}: CTranslate2 refuses the model ({e})") from None
    spec.optimize(quantization=quantization)
    out.mkdir(parents=True, exist_ok=True)
    spec.save(str(out))
    record = {
        "weights_sha256": directory.weights_sha256(),
        "quantization": quantization,
        "add_source_eos": config.source_eos,
        "ctranslate2": ctranslate2.__version__,
        "layout": "TransformerSpec",
        "start": "zeros" if start.zero else ("added" if start.added else "token"),
    }
    (out / STAMP).write_text(json.dumps(record, indent=2) + "\n")
    return record


def tokenizer_files(tokenizer: ArgosTokenizer) -> dict[str, bytes]:
    """The files that cut text into the written model's pieces: ``sentencepiece.model`` (or
    a source and a target one, ``source.spm`` and ``target.spm``, as OPUS-MT's come), or
    the Moses + BPE codes ``bpe.model``."""
    if tokenizer.target_model is not None:
        return {"source.spm": tokenizer.model, "target.spm": tokenizer.target_model}
    return {tokenizer.model_file_name: tokenizer.model}
