"""An Argos Translate package's tokenizer, as Argos Translate applies it, over its CTranslate2
model's vocabularies.

Argos Translate cuts each sentence into pieces and hands the pieces (strings, not ids) to
CTranslate2, which looks them up in the model's vocabularies (``shared_vocabulary.json``, or
``source_vocabulary`` and ``target_vocabulary``, ``.json`` or the ``.txt`` of older
conversions; a piece not there is unk). Two tokenizers:

* ``sentencepiece``: ``sentencepiece.model`` encodes a text as pieces; the output pieces are
  decoded by it, U+2581 read as a space. A CTranslate2 model imported with a source and a
  target sentencepiece model (OPUS-MT's) keeps the target's as ``target.spm``: it cuts
  targets and decodes outputs. (Argos Translate 1.10 and later also turn every
  "_" of a translation into a space; aiayn keeps underscores.)
* ``bpe``: ``bpe.model`` holds subword-nmt merge operations. A source text is normalised and
  tokenized by Moses (sacremoses' ``MosesPunctNormalizer`` and ``MosesTokenizer`` of the source
  language, with their defaults: ``&`` escaped as ``&amp;`` ...), its tokens segmented by
  subword-nmt's ``BPE`` (Argos Translate ships a copy of subword-nmt's ``apply_bpe``), non-final
  pieces marked with ``@@``; output pieces are joined (``"@@ "`` removed) and detokenized by
  the target language's ``MosesDetokenizer``. Needs the ``argos`` extra (sacremoses,
  subword-nmt).

Argos Translate then drops the package's ``target_prefix`` (the token a multilingual model
is started with) and one leading space from each translation; ``decode`` does both.

The ids are the vocabularies' (CTranslate2's), mapped onto aiayn's special ids by a
``VocabMap`` per side (``ct2_vocab_maps``): unk, eos and the decoder's start token as the
model's config.json names them, pad where the vocabulary has one (``<blank>``, ``<pad>``).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from aiayn.data.tokenizer import (
    BOS,
    EOS,
    MASK,
    PAD,
    UNK,
    _not_text,
    characters_read_as_unk,
    sentencepiece_processor,
)
from aiayn.data.vocab_map import VocabMap
from aiayn.errors import UserError
from aiayn.fileio import atomic_write, read_json_object, write_json

ARGOS_TOKENIZER_FILE = "argos_tokenizer.json"
TARGET_MODEL_FILE = "target.spm"  # a target sentencepiece model of its own (OPUS-MT's)
SOURCE_VOCAB_MAP_FILE = "source_vocab_map.json"
MODEL_FILES = {"sentencepiece": "sentencepiece.model", "bpe": "bpe.model"}
SHARED_VOCABULARY = "shared_vocabulary"
SOURCE_VOCABULARY, TARGET_VOCABULARY = "source_vocabulary", "target_vocabulary"
PAD_TOKENS = ("<blank>", "<pad>")  # OpenNMT's padding, and Hugging Face's
FILES = (
    ARGOS_TOKENIZER_FILE,
    SOURCE_VOCAB_MAP_FILE,
    *MODEL_FILES.values(),
    TARGET_MODEL_FILE,
    *(f"{name}.json" for name in (SHARED_VOCABULARY, SOURCE_VOCABULARY, TARGET_VOCABULARY)),
)
CT2_DEFAULTS = {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}


# -- CTranslate2's vocabularies ------------------------------------------------------------


def _vocabulary_file(model_dir: Path, name: str) -> list[str] | None:
    """The vocabulary ``name`` (.json: a list of tokens; .txt: one a line) of ``model_dir``,
    or None when neither file is there."""
    json_path, txt_path = model_dir / f"{name}.json", model_dir / f"{name}.txt"
    if json_path.is_file():
        try:
            tokens = json.loads(json_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UserError(f"{json_path}: not a JSON vocabulary ({e})") from None
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise UserError(f"{json_path}: a vocabulary is a JSON list of tokens (strings)")
        return tokens
    if txt_path.is_file():
        try:
            text = txt_path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise UserError(f"{txt_path}: not UTF-8 text (byte {e.start})") from None
        tokens = text.split("\n")  # only "\n": a token may hold other line breaks
        tokens = tokens[:-1] if tokens and tokens[-1] == "" else tokens
        if tokens and all(t.endswith("\r") for t in tokens):  # CRLF lines, as CTranslate2
            tokens = [t[:-1] for t in tokens]
        return tokens
    return None


def read_ct2_vocabularies(model_dir: Path) -> tuple[list[str], list[str] | None]:
    """The source and target vocabularies of the CTranslate2 model in ``model_dir``: (shared,
    None) for one shared vocabulary."""
    model_dir = Path(model_dir)
    shared = _vocabulary_file(model_dir, SHARED_VOCABULARY)
    if shared is not None:
        return _checked(shared, model_dir, SHARED_VOCABULARY), None
    source = _vocabulary_file(model_dir, SOURCE_VOCABULARY)
    target = _vocabulary_file(model_dir, TARGET_VOCABULARY)
    if source is None or target is None:
        raise UserError(
            f"{model_dir}: no vocabulary: a CTranslate2 model holds shared_vocabulary.json "
            "(or .txt), or source_vocabulary and target_vocabulary"
        )
    return _checked(source, model_dir, SOURCE_VOCABULARY), _checked(
        target, model_dir, TARGET_VOCABULARY
    )


def _checked(tokens: list[str], model_dir: Path, name: str) -> list[str]:
    if not tokens:
        raise UserError(f"{model_dir / name}: an empty vocabulary")
    return tokens


def read_ct2_config(model_dir: Path) -> dict:
    """The CTranslate2 model's config.json ({} for conversions older than the file)."""
    path = Path(model_dir) / "config.json"
    return read_json_object(path, "CTranslate2 model config") if path.is_file() else {}


def _token(config: dict, key: str) -> str:
    """The token config.json names under ``key``, or CTranslate2's default (the decoder
    starts with ``bos_token`` unless ``decoder_start_token`` says otherwise)."""
    default = _token(config, "bos_token") if key == "decoder_start_token" else CT2_DEFAULTS[key]
    value = config.get(key)
    if value is None:
        return default
    if not isinstance(value, str) or not value:
        raise UserError(f"config.json: {key} must be a token (text), got {value!r}")
    return value


def ct2_vocab_maps(
    config: dict,
    source: list[str],
    target: list[str] | None,
    start_from_zero_embedding: bool = False,
) -> tuple[VocabMap, VocabMap]:
    """(source map, target map) of a CTranslate2 model's vocabularies onto aiayn's special
    ids (one map, twice, for a shared vocabulary).

    Target: unk and eos are the config's ``unk_token``/``eos_token``; bos is the decoder's
    start (``decoder_start_token``, default ``bos_token``); where the start is eos (Marian
    conversions), aiayn's bos is an extra row, starting as zeros when the model starts
    ``start_from_zero_embedding`` (Marian's), else as a copy of eos's. Pad is ``<blank>`` or
    ``<pad>`` where the vocabulary has one (an extra row otherwise), mask ``<mask>`` where
    it has one. Source: unk, pad and mask the same way; bos and eos the config's tokens
    where the vocabulary has them.
    """
    unk_token, eos_token = _token(config, "unk_token"), _token(config, "eos_token")
    start_token = _token(config, "decoder_start_token")

    def index(vocab: list[str], token: str, side: str) -> int:
        found = _first_index(vocab, token)
        if found is None:
            raise UserError(
                f"the {side} vocabulary has no {token!r} (the model's config.json names it)"
            )
        return found

    def pad_of(vocab: list[str]) -> int | None:
        return next((i for t in PAD_TOKENS if (i := _first_index(vocab, t)) is not None), None)

    theirs = target if target is not None else source
    eos = index(theirs, eos_token, "target")
    start: int | None = index(theirs, start_token, "target")
    copies: dict[int, int] = {}
    if start == eos:
        start = None
        if not start_from_zero_embedding:
            copies = {BOS: eos}
    target_map = VocabMap(
        len(theirs),
        (pad_of(theirs), index(theirs, unk_token, "target"), start, eos,
         _first_index(theirs, "<mask>")),
        copies,
        backend="argos",
    )  # fmt: skip
    if target is None:
        return target_map, target_map
    bos_token = _token(config, "bos_token")
    source_map = VocabMap(
        len(source),
        (pad_of(source), index(source, unk_token, "source"),
         _first_index(source, bos_token), _first_index(source, eos_token),
         _first_index(source, "<mask>")),
        backend="argos",
    )  # fmt: skip
    return source_map, target_map


def _first_index(vocab: list[str], token: str) -> int | None:
    try:
        return vocab.index(token)
    except ValueError:
        return None


# -- the two ways of cutting text --------------------------------------------------------------


class _SentencePiece:
    """One sentencepiece model, or a source and a target one (OPUS-MT's)."""

    def __init__(self, proto: bytes, target_proto: bytes | None = None) -> None:
        self.sp = sentencepiece_processor(proto)
        self.tp = self.sp if target_proto is None else sentencepiece_processor(target_proto)

    def source(self, text: str) -> list[str]:
        return self.sp.encode(text, out_type=str)

    def target(self, text: str) -> list[str]:
        return self.tp.encode(text, out_type=str)

    def decode(self, pieces: list[str]) -> str:
        return self.tp.decode_pieces(pieces).replace("\u2581", " ")


def check_bpe_codes(text: str) -> None:
    """Refuse subword-nmt codes it cannot read (its reader exits the process on a bad line)."""
    lines = text.rstrip("\n").split("\n")
    first = 1
    if lines and lines[0].startswith("#version:"):
        version = lines[0].split()[-1]
        if version not in ("0.1", "0.2"):
            raise ValueError(
                f"line 1: BPE codes of version {version}; subword-nmt reads 0.1 and 0.2"
            )
        lines, first = lines[1:], 2
    if not lines or lines == [""]:
        raise ValueError("no merge operations")
    for n, line in enumerate(lines, first):
        if len(line.strip("\r\n ").split(" ")) != 2:
            raise ValueError(f"line {n}: {line[:60]!r} is not a merge (two units and a space)")


class _MosesBPE:
    def __init__(self, codes: bytes, source_lang: str, target_lang: str) -> None:
        try:
            text = codes.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"BPE codes: not UTF-8 text (byte {e.start})") from None
        check_bpe_codes(text)
        try:
            from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer
            from subword_nmt.apply_bpe import BPE
        except ImportError:
            raise UserError(
                "a BPE tokenizer (an Argos Translate package's bpe.model) needs sacremoses and "
                "subword-nmt: pip install 'aiayn[argos]'"
            ) from None
        self.bpe = BPE(io.StringIO(text))
        self.langs = (source_lang, target_lang)
        self.normalizers = {lang: MosesPunctNormalizer(lang) for lang in set(self.langs)}
        self.tokenizers = {lang: MosesTokenizer(lang) for lang in set(self.langs)}
        self.detokenizer = MosesDetokenizer(target_lang)

    def _pieces(self, text: str, lang: str) -> list[str]:
        normalized = self.normalizers[lang].normalize(text)
        tokens = " ".join(self.tokenizers[lang].tokenize(normalized))
        return self.bpe.segment_tokens(tokens.strip("\r\n ").split(" "))

    def source(self, text: str) -> list[str]:
        return self._pieces(text, self.langs[0])

    def target(self, text: str) -> list[str]:
        return self._pieces(text, self.langs[1])

    def decode(self, pieces: list[str]) -> str:
        return self.detokenizer.detokenize(" ".join(pieces).replace("@@ ", "").split(" "))


# -- the tokenizer -----------------------------------------------------------------------------


class ArgosTokenizer:
    """An Argos Translate package's tokenizer (``kind`` "sentencepiece" or "bpe", from the
    bytes of its ``model`` file) over a CTranslate2 model's ``source`` and ``target``
    vocabularies (``target`` None: one shared), with aiayn's special ids. ``target_model``:
    a sentencepiece model of the target side's own (a CTranslate2 conversion of OPUS-MT
    comes with ``source.spm`` and ``target.spm``); ``model`` then cuts sources only."""

    pad_id, unk_id, bos_id, eos_id, mask_id = PAD, UNK, BOS, EOS, MASK

    def __init__(
        self,
        kind: str,
        model: bytes,
        source: list[str],
        target: list[str] | None,
        maps: tuple[VocabMap, VocabMap],
        source_lang: str,
        target_lang: str,
        target_prefix: str = "",
        target_model: bytes | None = None,
    ) -> None:
        if kind not in MODEL_FILES:
            raise ValueError(f"unknown tokenizer kind {kind!r}; one of {', '.join(MODEL_FILES)}")
        if target_model is not None and kind != "sentencepiece":
            raise ValueError("a target model of its own is a sentencepiece model's")
        self.kind, self.model, self.target_model = kind, model, target_model
        self.source, self.target = list(source), None if target is None else list(target)
        self.source_map, self.vocab_map = maps
        for side, vocab, vmap in (
            ("source", self.source, maps[0]),
            ("target", self.targets, maps[1]),
        ):
            if vmap.their_size != len(vocab):
                raise ValueError(
                    f"the {side} vocabulary map is of {vmap.their_size} ids, the vocabulary "
                    f"of {len(vocab)}"
                )
        self.source_lang, self.target_lang = source_lang, target_lang
        self.target_prefix = target_prefix
        self.cutter = (
            _SentencePiece(model, target_model)
            if kind == "sentencepiece"
            else _MosesBPE(model, source_lang, target_lang)
        )
        self._source_ids = {t: i for i, t in reversed(list(enumerate(self.source)))}
        self._target_ids = {t: i for i, t in reversed(list(enumerate(self.targets)))}
        unks = (self.source_map.specials[UNK], self.vocab_map.specials[UNK])
        if unks[0] is None or unks[1] is None:
            raise ValueError("a vocabulary map of an Argos tokenizer needs an unk token")
        self._their_unk: tuple[int, int] = (unks[0], unks[1])
        if target_prefix and target_prefix not in self._target_ids:
            raise ValueError(
                f"the target prefix {target_prefix!r} (metadata.json's target_prefix) is not a "
                "token of the target vocabulary"
            )
        self.target_prefix_ids = (
            self.encode_pieces([target_prefix], target=True) if target_prefix else []
        )

    @property
    def model_file_name(self) -> str:
        """sentencepiece.model or bpe.model, as in the package."""
        return MODEL_FILES[self.kind]

    @property
    def targets(self) -> list[str]:
        """The target vocabulary (the shared one where there is one)."""
        return self.target if self.target is not None else self.source

    @classmethod
    def from_files(
        cls,
        kind: str,
        model_file: Path,
        model_dir: Path,
        source_lang: str,
        target_lang: str,
        target_prefix: str = "",
        start_from_zero_embedding: bool = False,
    ) -> ArgosTokenizer:
        """The tokenizer of a package: its ``model_file`` (sentencepiece.model or
        bpe.model) over the vocabularies of the CTranslate2 model in ``model_dir``."""
        source, target = read_ct2_vocabularies(model_dir)
        config = read_ct2_config(model_dir)
        try:
            maps = ct2_vocab_maps(config, source, target, start_from_zero_embedding)
        except (UserError, ValueError) as e:
            raise UserError(f"{model_dir}: {e}") from None
        try:
            return cls(kind, Path(model_file).read_bytes(), source, target, maps, source_lang,
                       target_lang, target_prefix)  # fmt: skip
        except ValueError as e:
            raise UserError(f"{model_file}: {e}") from None

    # -- files -------------------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        atomic_write(directory / self.model_file_name, lambda p: p.write_bytes(self.model))
        if self.target is None:
            write_json(directory / f"{SHARED_VOCABULARY}.json", self.source)
        else:
            write_json(directory / f"{SOURCE_VOCABULARY}.json", self.source)
            write_json(directory / f"{TARGET_VOCABULARY}.json", self.target)
            write_json(directory / SOURCE_VOCAB_MAP_FILE, self.source_map.to_dict())
        info = {
            "kind": self.kind, "source_lang": self.source_lang, "target_lang": self.target_lang,
            "target_prefix": self.target_prefix,
        }  # fmt: skip
        if self.target_model is not None:
            target_model = self.target_model
            atomic_write(directory / TARGET_MODEL_FILE, lambda p: p.write_bytes(target_model))
            info["target_model"] = TARGET_MODEL_FILE
        write_json(directory / ARGOS_TOKENIZER_FILE, info)
        self.vocab_map.save(directory)

    @classmethod
    def load(cls, directory: Path) -> ArgosTokenizer:
        directory = Path(directory)
        info = read_json_object(directory / ARGOS_TOKENIZER_FILE, "Argos tokenizer description")
        kind = info.get("kind")
        if kind not in MODEL_FILES:
            raise UserError(
                f"{directory / ARGOS_TOKENIZER_FILE}: kind {kind!r} is not one of "
                f"{', '.join(MODEL_FILES)}"
            )
        model_file = directory / MODEL_FILES[kind]
        target_file = directory / TARGET_MODEL_FILE if info.get("target_model") else None
        for path in (model_file, target_file):
            if path is not None and not path.is_file():
                raise UserError(f"{path}: missing (the {kind} model of the tokenizer)")
        source, target = read_ct2_vocabularies(directory)
        try:
            target_map = VocabMap.load(directory)
            source_map = (
                target_map if target is None
                else VocabMap.from_dict(read_json_object(directory / SOURCE_VOCAB_MAP_FILE),
                                        str(directory / SOURCE_VOCAB_MAP_FILE))
            )  # fmt: skip
            return cls(kind, model_file.read_bytes(), source, target, (source_map, target_map),
                       str(info.get("source_lang", "")), str(info.get("target_lang", "")),
                       str(info.get("target_prefix", "")),
                       target_file.read_bytes() if target_file is not None else None)  # fmt: skip
        except ValueError as e:
            raise UserError(f"{directory}: {e}") from None

    # -- the tokenizer interface -------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Target ids (aiayn's): the target vocabulary and its extra rows."""
        return self.vocab_map.size

    @property
    def source_vocab_size(self) -> int:
        return self.source_map.size

    def encode_pieces(self, pieces: list[str], target: bool = False) -> list[int]:
        """aiayn ids of ``pieces`` looked up in the source (or target) vocabulary; a piece
        not there is unk, as CTranslate2 reads it."""
        ids, vmap = (
            (self._target_ids, self.vocab_map) if target else (self._source_ids, self.source_map)
        )
        unk = self._their_unk[1 if target else 0]
        return vmap.to_ours([ids.get(p, unk) for p in pieces])

    def _cut(self, texts: list[str], cut) -> list[list[str]]:
        why = _not_text(texts)
        if why:
            raise UserError(why)
        return [cut(text) for text in texts]

    def encode(self, texts: list[str], bos: bool = False, eos: bool = False) -> list[list[int]]:
        """Source ids of ``texts``, optionally framed by bos / eos."""
        head, tail = [BOS] if bos else [], [EOS] if eos else []
        return [
            head + self.encode_pieces(p) + tail for p in self._cut(list(texts), self.cutter.source)
        ]

    def encode_target(self, texts: list[str]) -> list[list[int]]:
        """Target ids of ``texts`` (the target language's Moses rules, for BPE)."""
        return [
            self.encode_pieces(p, target=True) for p in self._cut(list(texts), self.cutter.target)
        ]

    def target_pieces(self, ids: list[int]) -> list[str]:
        """The target pieces of aiayn ids ``ids`` (up to the first eos; pad, bos and mask
        dropped), as CTranslate2 returns them to Argos Translate."""
        ids = list(ids)
        if EOS in ids:
            ids = ids[: ids.index(EOS)]
        for t in ids:
            if not 0 <= t < self.vocab_size:
                raise UserError(
                    f"token id {t} is outside the tokenizer's vocabulary (0..{self.vocab_size - 1})"
                )
        theirs = self.vocab_map.to_theirs([t for t in ids if t not in (PAD, BOS, MASK)])
        return [self.targets[t] for t in theirs]

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Target texts of ids, as Argos Translate reads CTranslate2's output: the target
        prefix and one leading space dropped."""
        out = []
        for seq in ids:
            seq = list(seq)
            n = len(self.target_prefix_ids)
            if n and seq[:n] == self.target_prefix_ids:
                seq = seq[n:]
            out.append(self.decode_pieces(self.target_pieces(seq)))
        return out

    def decode_pieces(self, pieces: list[str]) -> str:
        """The text of target ``pieces`` (as CTranslate2 returns them), as Argos Translate
        reads it: a leading target prefix and one leading space dropped."""
        pieces = list(pieces)
        if self.target_prefix and pieces[:1] == [self.target_prefix]:
            pieces = pieces[1:]
        text = self.cutter.decode(pieces)
        return text[1:] if text.startswith(" ") else text

    def target_text_pieces(self, text: str) -> list[str]:
        """The target pieces of ``text`` (a translation's beginning: a prefix), as the model
        writes them."""
        return self._cut([text], self.cutter.target)[0]

    @property
    def folds_case(self) -> bool:
        return self.encode(["AZ"]) == self.encode(["az"])

    def pieces(self, text: str) -> list[str]:
        """The source pieces of ``text``, as Argos Translate hands them to CTranslate2."""
        return self._cut([text], self.cutter.source)[0]

    def id_to_piece(self, token: int) -> str:
        return self.vocab_map.piece(token, lambda t: self.targets[t])

    def unknown_characters(self, texts: list[str]) -> list[str]:
        """The distinct characters of ``texts`` that encode to unk."""
        return characters_read_as_unk(self.encode, texts)
