"""Subword tokenizer: a shared BPE vocabulary trained with sentencepiece (Vaswani et al. 2017 §5.1).

Special ids are fixed so every model agrees on them: pad 0, unk 1, bos 2, eos 3, mask 4.
Byte fallback turns unseen characters into byte pieces, so any text encodes and decodes back
unchanged (no normalisation is applied: what goes in comes out), unless the model was trained to
fold case, as a classifier may be.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

from aiayn.config import BOS, EOS, MASK, PAD, UNK
from aiayn.errors import UserError
from aiayn.fileio import atomic_write, read_json_object

MASK_PIECE = "<mask>"
TOKENIZER_FILE = "tokenizer.model"


def sentencepiece_processor(proto: bytes, where: str = "") -> spm.SentencePieceProcessor:
    """The sentencepiece model serialized in ``proto``; a ``ValueError`` (naming ``where``,
    when given) for bytes that are not one."""
    sp = spm.SentencePieceProcessor()
    try:
        sp.load_from_serialized_proto(proto)
    except RuntimeError as e:
        named = f"{where}: " if where else ""
        raise ValueError(f"{named}not a sentencepiece model ({e})") from None
    return sp


class Tokenizer:
    """A sentencepiece BPE model with aiayn's special ids."""

    pad_id, unk_id, bos_id, eos_id, mask_id = PAD, UNK, BOS, EOS, MASK

    def __init__(self, processor: spm.SentencePieceProcessor, proto: bytes) -> None:
        self.sp = processor
        self.proto = proto
        if (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id()) != (
            PAD,
            UNK,
            BOS,
            EOS,
        ) or processor.piece_to_id(MASK_PIECE) != MASK:
            raise ValueError(
                "tokenizer does not use aiayn's special ids (pad 0, unk 1, bos 2, eos 3, mask 4)"
            )

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int,
        seed_sentences: int = 2_000_000,
        case_fold: bool = False,
    ) -> Tokenizer:
        """Train a BPE model of ``vocab_size`` pieces on ``texts`` (both languages, shared).

        ``case_fold`` makes the model fold case (with NFKC) before it segments a text; the rule
        is kept in the model, so every later ``encode`` folds the same way.
        """
        texts = [t for t in texts if t.strip()]
        if not texts:
            raise ValueError("cannot train a tokenizer on no text")
        model = io.BytesIO()
        try:
            cls._train_bpe(texts, vocab_size, seed_sentences, case_fold, model)
        except RuntimeError as e:
            raise ValueError(
                f"could not train a {vocab_size}-piece tokenizer on {len(texts)} texts ({e}); "
                "lower data.vocab_size (at least 262 with byte fallback) or add text"
            ) from None
        return cls.from_bytes(model.getvalue())

    @staticmethod
    def _train_bpe(
        texts: list[str], vocab_size: int, seed_sentences: int, case_fold: bool, model
    ) -> None:
        spm.set_random_generator_seed(1)  # the same texts give the same tokenizer
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_writer=model,
            model_type="bpe",
            vocab_size=vocab_size,
            character_coverage=0.9995,  # rarer characters fall back to bytes
            byte_fallback=True,
            normalization_rule_name="nmt_nfkc_cf" if case_fold else "identity",
            remove_extra_whitespaces=False,
            split_digits=True,
            pad_id=PAD,
            unk_id=UNK,
            bos_id=BOS,
            eos_id=EOS,
            control_symbols=[MASK_PIECE],  # never matched in text: only its id means mask
            input_sentence_size=seed_sentences,
            shuffle_input_sentence=True,
            num_threads=2,
            minloglevel=2,
        )

    @classmethod
    def from_bytes(cls, proto: bytes) -> Tokenizer:
        sp = spm.SentencePieceProcessor()
        sp.load_from_serialized_proto(proto)
        return cls(sp, proto)

    @classmethod
    def load(cls, path: Path) -> Tokenizer:
        path = Path(path)
        if path.is_dir():
            path = path / TOKENIZER_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no tokenizer here (a model directory holds one)")
        try:
            return cls.from_bytes(path.read_bytes())
        except OSError as e:
            raise UserError(f"{path}: cannot read the tokenizer ({e.strerror or e})") from None
        except (RuntimeError, ValueError) as e:
            raise UserError(f"{path}: not a sentencepiece model of aiayn ({e})") from None

    def save(self, directory: Path) -> None:
        """Write ``tokenizer.model`` into ``directory`` (atomically)."""

        atomic_write(Path(directory) / TOKENIZER_FILE, lambda p: p.write_bytes(self.proto))

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, texts: list[str], bos: bool = False, eos: bool = False) -> list[list[int]]:
        """Token ids of each text, optionally framed by bos / eos.

        Any text decodes back to itself (unseen characters through byte fallback), except
        that U+2581, SentencePiece's mark for a space inside its pieces, reads as a space.
        """
        texts = list(texts)
        try:
            # text by text: sentencepiece's list calls start threads for every call (even
            # num_threads=1), which costs a request of a few texts many times their encoding
            ids = [self.sp.encode(text) for text in texts]
        except (TypeError, UnicodeError) as e:
            raise UserError(_not_text(texts) or f"the texts cannot be tokenized ({e})") from None
        except RuntimeError:  # one text at a time, pybind11 cannot cast a lone surrogate
            why = _not_text(texts)
            if why is None:  # not the text's fault
                raise
            raise UserError(why) from None
        head, tail = [BOS] if bos else [], [EOS] if eos else []
        return [head + x + tail for x in ids]

    def encode_target(self, texts: list[str]) -> list[list[int]]:
        """Token ids of target-side texts: one shared vocabulary, so as ``encode``."""
        return self.encode(texts)

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Texts from ids; stops at the first eos and drops pad / bos / mask."""
        clean = []
        for seq in ids:
            seq = list(seq)
            if EOS in seq:
                seq = seq[: seq.index(EOS)]
            clean.append([t for t in seq if t not in (PAD, BOS, MASK)])
        _check_ids(clean, self.vocab_size)
        return [self.sp.decode(seq) for seq in clean]  # text by text, as ``encode``

    @property
    def folds_case(self) -> bool:
        """Whether the model folds case before it segments (``Tokenizer.train(case_fold=True)``)."""
        return self.sp.encode("AZ") == self.sp.encode("az")

    def pieces(self, text: str) -> list[str]:
        return self.sp.encode(text, out_type=str)

    def id_to_piece(self, token: int) -> str:
        return self.sp.id_to_piece(token)

    def unknown_characters(self, texts: list[str]) -> list[str]:
        """The distinct characters of ``texts`` that encode to unk (none with byte fallback)."""
        return characters_read_as_unk(self.encode, texts)


def characters_read_as_unk(encode, texts: list[str]) -> list[str]:
    """The distinct characters of ``texts`` that ``encode`` (texts -> ids) turns into unk."""
    found: set[str] = set()
    for text, ids in zip(texts, encode(list(texts)), strict=True):
        if UNK in ids:
            found |= {c for c in set(text) if UNK in encode([c])[0]}
    return sorted(found)


def warn_unknown_characters(tokenizer, texts: list[str], where: str) -> None:
    """Warn, naming ``where``, about the characters of ``texts`` that ``tokenizer`` reads as
    unk (shows the first ten)."""
    unknown = tokenizer.unknown_characters(texts)
    if unknown:
        shown = " ".join(repr(c) for c in unknown[:10]) + (" ..." if len(unknown) > 10 else "")
        warnings.warn(
            f"{where}: {len(unknown)} character(s) not in the model's vocabulary are read as "
            f"<unk>: {shown}",
            stacklevel=3,
        )


def _not_text(texts: list) -> str | None:
    """Which of ``texts`` cannot be tokenized: not a string, or not encodable as UTF-8
    (None: each is text)."""
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            return f"text {i + 1} is a {type(text).__name__}, not a string"
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            return (
                f"text {i + 1} holds {text[e.start]!r} at position {e.start + 1}, which is not "
                "a Unicode character (a lone surrogate: bytes read with errors='surrogateescape'?)"
            )
    return None


def _check_ids(ids: list[list[int]], vocab_size: int) -> None:
    for seq in ids:
        bad = [t for t in seq if not 0 <= t < vocab_size]
        if bad:
            raise UserError(
                f"token id {bad[0]} is outside the tokenizer's vocabulary (0..{vocab_size - 1}): "
                "the ids come from a model with another vocabulary"
            )


CHAR_TOKENIZER_FILE = "tokenizer.json"
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>", MASK_PIECE)


class CharTokenizer:
    """One id per character, after the five special ids; unseen characters map to unk."""

    pad_id, unk_id, bos_id, eos_id, mask_id = PAD, UNK, BOS, EOS, MASK
    folds_case = False

    def __init__(self, chars: list[str]) -> None:
        if len(set(chars)) != len(chars) or any(len(c) != 1 for c in chars):
            raise ValueError("a character vocabulary needs distinct single characters")
        self.chars = list(chars)
        self.index = {c: i + len(SPECIALS) for i, c in enumerate(self.chars)}

    @classmethod
    def train(cls, texts: Iterable[str]) -> CharTokenizer:
        return cls(sorted(set("".join(texts))))

    @property
    def vocab_size(self) -> int:
        return len(SPECIALS) + len(self.chars)

    def encode(self, texts: list[str], bos: bool = False, eos: bool = False) -> list[list[int]]:
        texts = list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise UserError(_not_text(texts))  # a text that is not a string: named
        head, tail = [BOS] if bos else [], [EOS] if eos else []
        return [head + [self.index.get(c, UNK) for c in t] + tail for t in texts]

    def encode_target(self, texts: list[str]) -> list[list[int]]:
        return self.encode(texts)

    def unknown_characters(self, texts: list[str]) -> list[str]:
        """The distinct characters of ``texts`` outside the vocabulary (encoded as unk)."""
        return sorted({c for text in texts for c in set(text) if c not in self.index})

    def decode(self, ids: list[list[int]]) -> list[str]:
        out = []
        for seq in ids:
            seq = list(seq)
            if EOS in seq:
                seq = seq[: seq.index(EOS)]
            _check_ids([seq], self.vocab_size)
            n = len(SPECIALS)
            out.append("".join(self.chars[t - n] if t >= n else "" for t in seq if t != UNK))
        return out

    def id_to_piece(self, token: int) -> str:
        n = len(SPECIALS)
        return SPECIALS[token] if token < n else self.chars[token - n]

    def save(self, directory: Path) -> None:
        import json

        data = json.dumps({"kind": "char", "chars": self.chars}, ensure_ascii=False)
        atomic_write(Path(directory) / CHAR_TOKENIZER_FILE, lambda p: p.write_text(data))

    @classmethod
    def load(cls, path: Path) -> CharTokenizer:
        data = read_json_object(Path(path), "character tokenizer")
        chars = data.get("chars")
        if not isinstance(chars, list) or not all(isinstance(c, str) for c in chars):
            raise UserError(f"{path}: not a character tokenizer ('chars' must be a list of text)")
        try:
            return cls(chars)
        except ValueError as e:
            raise UserError(f"{path}: {e}") from None


VOCAB_MAP_FILE = "vocab_map.json"  # an imported tokenizer's ids (aiayn.data.vocab_map)
IMPORTED_TOKENIZER_FILES = ("tokenizer.json", "source.spm", "target.spm", "vocab.json")
