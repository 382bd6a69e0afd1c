"""Reading a CTranslate2 model directory (Klein et al. 2020) the way CTranslate2 reads it.

CTranslate2 defines its format in code: python/ctranslate2/specs/model_spec.py declares a
model as a spec (a tree of named variables) and serialises it into ``model.bin``; the C++
reader (src/models/model.cc) reads it back, still accepting what older versions wrote. This
module mirrors that reader:

* ``read_model_bin``: the file as stored. A header (binary version; from version 2 the spec
  name and its revision), then each variable (name, rank, shape, dtype and byte count: from
  version 4 a type id and bytes, before an item width and an item count), then, from version
  3, aliases (a name that stands for another variable; ``alias + "_scale"`` follows it too).
* ``read_variables``: ``{name: tensor}`` as CTranslate2 computes with them when asked for
  float32 (``compute_type="float32"``): aliases resolved, the names and flags of older spec
  revisions moved where the current ones are, float16 / bfloat16 widened and int8 / int16
  weights dequantized as CTranslate2 does it (``weight * (1 / scale)``, one scale a row),
  plus the scalar flags (``pre_norm``, ``num_heads``, ``activation``...).
* ``read_model_config``: the special tokens and the source framing (``config.json`` from
  binary version 6, variables before). The vocabularies are read by
  ``aiayn.data.argos_tokenizer.read_ct2_vocabularies``.

Nothing here imports CTranslate2: a model is read without it.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from aiayn.errors import UserError
from aiayn.fileio import read_json

MODEL_BIN, CONFIG_JSON = "model.bin", "config.json"
BINARY_VERSIONS = range(1, 7)  # 6: CTranslate2 3.0 and later (config.json beside model.bin)
# the type ids of include/ctranslate2/types.h (binary version 4 on)
DTYPES = (torch.float32, torch.int8, torch.int16, torch.int32, torch.float16, torch.bfloat16)
ITEM_WIDTHS = {4: torch.float32, 2: torch.int16, 1: torch.int8}  # before version 4
INT16_GLOBAL_SCALE = 1000.0  # int16 weights saved without a scale (ops::Quantize)
# Spec names of encoder-decoder Transformers: the empty name (binary version 1) and the two
# fixed presets are older spellings, with their number of heads (src/models/model_factory.cc).
TRANSFORMER_SPECS = {"": 8, "TransformerBase": 8, "TransformerBig": 16, "TransformerSpec": None}
TRANSFORMER_REVISION = 7  # the newest revision of TransformerSpec CTranslate2 4.x reads
OTHER_SPECS = {
    "TransformerDecoderSpec": "a decoder-only language model",
    "TransformerEncoderSpec": "an encoder-only model",
    "WhisperSpec": "a speech recognition model (Whisper)",
    "Wav2Vec2Spec": "a speech model (Wav2Vec2)",
    "Wav2Vec2BertSpec": "a speech model (Wav2Vec2-BERT)",
}
# flags that older revisions kept at the top and the current ones under each stack
# (src/models/transformer.cc, revisions < 5)
STACK_FLAGS = {
    "encoder": ("num_heads", "pre_norm", "activation", "embeddings_merge"),
    "decoder": ("num_heads", "pre_norm", "activation", "alignment_layer", "alignment_heads"),
}
LEGACY_STRINGS = ("unk_token", "bos_token", "eos_token")  # variables before binary version 6


@dataclass
class ModelBin:
    """``model.bin`` as stored: its header, each variable in its stored dtype, the aliases."""

    path: Path
    binary_version: int
    spec: str
    revision: int
    variables: dict[str, Tensor]
    aliases: dict[str, str] = field(default_factory=dict)  # alias -> variable name


class _Stream:
    """A binary file read front to back; a short read is an error naming the file and byte."""

    def __init__(self, f, path: Path) -> None:
        self.f, self.path = f, path
        self.size = os.fstat(f.fileno()).st_size

    def bytes(self, n: int, what: str) -> bytearray:
        at = self.f.tell()
        if n > self.size - at:
            raise UserError(
                f"{self.path}: truncated: {what} needs {n} bytes at byte {at}, but the file "
                f"ends at byte {self.size}"
            )
        data = bytearray(n)  # read into place: a tensor takes it without a copy
        if self.f.readinto(data) != n:
            raise UserError(f"{self.path}: truncated while reading {what} at byte {at}")
        return data

    def unpack(self, fmt: str, what: str):
        values = struct.unpack("<" + fmt, self.bytes(struct.calcsize("<" + fmt), what))
        return values[0] if len(values) == 1 else values

    def string(self, what: str) -> str:
        n = self.unpack("H", f"the length of {what}")
        if n == 0:
            raise UserError(f"{self.path}: {what} has length 0 at byte {self.f.tell() - 2}")
        data = self.bytes(n, what)[:-1]  # written with a closing NUL
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(
                f"{self.path}: {what} is not UTF-8 text: {bytes(data[:40])!r}"
            ) from None


def _variable(s: _Stream, version: int, index: int, values: bool = True) -> tuple[str, Tensor]:
    name = s.string(f"the name of variable {index}")
    rank = s.unpack("B", f"the rank of {name!r}")
    dims = s.unpack(f"{rank}I", f"the shape of {name!r}") if rank else ()
    shape = dims if isinstance(dims, tuple) else (dims,)
    if version >= 4:
        type_id, size = s.unpack("BI", f"the dtype of {name!r}")
        if type_id >= len(DTYPES):
            raise UserError(f"{s.path}: variable {name!r} has unknown type id {type_id}")
        dtype = DTYPES[type_id]
    else:
        width, count = s.unpack("BI", f"the item width of {name!r}")
        if width not in ITEM_WIDTHS:
            raise UserError(f"{s.path}: variable {name!r} has unknown item width {width}")
        dtype, size = ITEM_WIDTHS[width], count * width
    numel = 1
    for n in shape:
        numel *= n
    if size != numel * dtype.itemsize:
        raise UserError(
            f"{s.path}: variable {name!r} has an invalid payload size ({size} bytes for shape "
            f"{list(shape)} of {str(dtype).removeprefix('torch.')})"
        )
    if not values:  # its shape and dtype only: the bytes skipped (still within the file)
        if size > s.size - s.f.tell():
            s.bytes(size, f"the values of {name!r}")  # the error naming the short file
        s.f.seek(size, os.SEEK_CUR)
        return name, torch.empty(shape, dtype=dtype, device="meta")
    data = s.bytes(size, f"the values of {name!r}")
    if not numel:
        return name, torch.empty(shape, dtype=dtype)
    return name, torch.frombuffer(data, dtype=dtype).reshape(shape)


def read_model_bin(path: Path, values: bool = True) -> ModelBin:
    """``model.bin`` as CTranslate2 wrote it, any binary version it still reads (1-6);
    ``values`` False: each variable's shape and dtype only (tensors on the meta device, the
    file's bytes skipped), for what a model's header says."""
    path = Path(path)
    try:
        f = open(path, "rb")  # noqa: SIM115 (closed below)
    except OSError as e:
        raise UserError(f"{path}: cannot read the CTranslate2 model ({e.strerror or e})") from None
    with f:
        s = _Stream(f, path)
        version = s.unpack("I", "the binary version")
        if version not in BINARY_VERSIONS:
            raise UserError(
                f"{path}: not a CTranslate2 model.bin: binary version {version}, but "
                f"CTranslate2 writes versions {BINARY_VERSIONS[0]}-{BINARY_VERSIONS[-1]}"
            )
        spec, revision = "", 1
        if version >= 2:
            spec = s.string("the spec name")
            revision = s.unpack("I", "the spec revision")
        count = s.unpack("I", "the number of variables")
        variables = dict(_variable(s, version, i, values) for i in range(count))
        aliases = {}
        if version >= 3:
            for i in range(s.unpack("I", "the number of aliases")):
                alias = s.string(f"alias {i}")
                aliases[alias] = s.string(f"the variable alias {alias!r} names")
    return ModelBin(path, version, spec, revision, variables, aliases)


# -- the variables CTranslate2 computes with --------------------------------------------------


@dataclass
class Variables:
    """A model's variables as CTranslate2 computes with them in float32.

    ``weights``: {name: float32 tensor}, every variable with at least one dimension (the int8
    / int16 ones dequantized; their scales consumed); ``flags``: {name: number} for the
    scalars; ``strings``: text variables (the special tokens of binary versions before 6);
    ``quantization``: the stored dtypes of the weights (e.g. {"int8", "float32"}).
    """

    model: ModelBin
    weights: dict[str, Tensor]
    flags: dict[str, float | int]
    strings: dict[str, str]
    quantization: set[str]

    @property
    def spec(self) -> str:
        return self.model.spec


def _v1_name(name: str) -> str:
    """Revision 1's names (OpenNMT-tf's) as the current ones (src/models/transformer.cc)."""
    for old, new in (
        ("transformer/", ""), (":0", ""), ("w_embs", "embeddings/weight"), ("kernel", "weight"),
        ("LayerNorm", "layer_norm"), ("dense", "projection"), ("conv1d_", "linear_"),
        ("conv1d", "linear_0"),
    ):  # fmt: skip
        name = name.replace(old, new, 1)
    if "encoder" in name:
        return name.replace("multi_head", "self_attention", 1)
    name = name.replace("masked_multi_head", "self_attention", 1)
    return name.replace("multi_head", "attention", 1)


def _dequantized(name: str, value: Tensor, scale: Tensor | None, path: Path) -> Tensor:
    """int8 (a scale per row) or int16 (one scale) weights as float32: ``v * (1 / scale)``,
    in float32, as CTranslate2's Dequantize."""
    if scale is None:
        if value.dtype != torch.int16:
            raise UserError(f"{path}: variable {name!r} is {value.dtype} without {name}_scale")
        scale = torch.tensor(INT16_GLOBAL_SCALE)
    reciprocal = 1.0 / scale.float()  # float32, as 1.f / scale
    if reciprocal.dim() and value.dim():
        if reciprocal.numel() != value.shape[0]:
            raise UserError(
                f"{path}: {name}_scale has {reciprocal.numel()} values for {value.shape[0]} rows"
            )
        reciprocal = reciprocal.reshape(-1, *([1] * (value.dim() - 1)))
    return value.float() * reciprocal


def read_variables(model: ModelBin | Path) -> Variables:
    """The variables of ``model`` (a ``ModelBin`` or the path of a model.bin) as CTranslate2
    computes with them at compute_type float32 (module doc), named as the current
    TransformerSpec names them."""
    if not isinstance(model, ModelBin):
        model = read_model_bin(model)
    stored = dict(model.variables)
    if model.spec in TRANSFORMER_SPECS and model.revision == 1:
        stored = {_v1_name(k): v for k, v in stored.items()}
    if model.spec in TRANSFORMER_SPECS and model.revision < 3:
        heads = TRANSFORMER_SPECS[model.spec] or 8
        stored.setdefault("num_heads", torch.tensor(heads, dtype=torch.int16))
    for alias, target in model.aliases.items():
        if target in stored:  # as CTranslate2: an alias of nothing is dropped
            stored.setdefault(alias, stored[target])
            if target + "_scale" in stored:
                stored.setdefault(alias + "_scale", stored[target + "_scale"])
    if model.spec in TRANSFORMER_SPECS and model.revision < 5:
        for stack, names in STACK_FLAGS.items():
            for name in names:
                if name in stored:
                    stored.setdefault(f"{stack}/{name}", stored[name])
    weights, flags, strings, kinds = {}, {}, {}, set()
    for name, value in stored.items():
        if name.endswith("_scale") and name.removesuffix("_scale") in stored:
            continue  # consumed with its weight
        if name in LEGACY_STRINGS:
            strings[name] = bytes(value.to(torch.int8).numpy().tobytes()).decode("utf-8", "replace")
        elif value.dim() == 0:
            flags[name] = value.item()
        elif name.endswith("weight") and value.dtype in (torch.int8, torch.int16):
            weights[name] = _dequantized(name, value, stored.get(name + "_scale"), model.path)
            kinds.add(str(value.dtype).removeprefix("torch."))
        else:
            weights[name] = value.float()
            if name.endswith("weight"):
                kinds.add(str(value.dtype).removeprefix("torch."))
    return Variables(model, weights, flags, strings, kinds)


# -- special tokens ------------------------------------------------------------


@dataclass(frozen=True)
class SpecialTokens:
    """The sequence-to-sequence settings CTranslate2 reads beside the weights: the special
    tokens, the token decoding starts from (None: the caller must give it), what it adds to
    each source, and LayerNorm's epsilon (None: CTranslate2's default)."""

    unk: str = "<unk>"
    bos: str = "<s>"
    eos: str = "</s>"
    decoder_start: str | None = "<s>"
    add_source_bos: bool = False
    add_source_eos: bool = False
    layer_norm_epsilon: float | None = None
    multi_query_attention: bool = False


def read_model_config(directory: Path, variables: Variables) -> SpecialTokens:
    """``config.json`` (binary version 6 on) or, before, the variables that held the same
    (src/models/sequence_to_sequence.cc)."""
    path = Path(directory) / CONFIG_JSON
    if variables.model.binary_version < 6:
        flags, strings = variables.flags, variables.strings
        unk, bos, eos = (
            strings.get(k, d) for k, d in zip(LEGACY_STRINGS, ("<unk>", "<s>", "</s>"), strict=True)
        )
        if flags.get("user_decoder_start_tokens", False):
            start = None
        else:
            start = bos if flags.get("with_target_bos", True) else eos
        return SpecialTokens(
            unk, bos, eos, start,
            bool(flags.get("with_source_bos", False)), bool(flags.get("with_source_eos", False)),
        )  # fmt: skip
    data = read_json(path, "CTranslate2 config") if path.is_file() else {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: a CTranslate2 config is a JSON object")
    default = SpecialTokens()
    values = {}
    for key, attr in (
        ("unk_token", "unk"), ("bos_token", "bos"), ("eos_token", "eos"),
        ("decoder_start_token", "decoder_start"),
    ):  # fmt: skip
        value = data.get(key, getattr(default, attr))
        if not isinstance(value, str) and not (attr == "decoder_start" and value is None):
            raise UserError(f"{path}: {key} must be a token (a string), got {value!r}")
        values[attr] = value
    for key in ("add_source_bos", "add_source_eos", "multi_query_attention"):
        value = data.get(key, False)
        if not isinstance(value, bool):
            raise UserError(f"{path}: {key} must be true or false, got {value!r}")
        values[key] = value
    epsilon = data.get("layer_norm_epsilon")
    if epsilon is not None and (isinstance(epsilon, bool) or not isinstance(epsilon, int | float)):
        raise UserError(f"{path}: layer_norm_epsilon must be a number or null, got {epsilon!r}")
    return SpecialTokens(**values, layer_norm_epsilon=epsilon)


def model_bin_path(directory: Path) -> Path:
    """``directory/model.bin``, or an error saying that ``directory`` is no CTranslate2 model."""
    directory = Path(directory)
    if not directory.is_dir():
        what = "is a file" if directory.exists() else "does not exist"
        raise UserError(f"{directory}: {what}; a CTranslate2 model is a directory with model.bin")
    path = directory / MODEL_BIN
    if not path.is_file():
        raise UserError(f"{directory}: no model.bin (is it a CTranslate2 model directory?)")
    return path
