"""Marian's tokenizer: a source and a target sentencepiece model and one ``vocab.json``.

The ids are ``vocab.json``'s (piece -> id), not the sentencepiece models' own; a piece
missing from it is unk. Sources are cut by ``source.spm``, targets by ``target.spm``, and
output ids are read back through ``target.spm`` (special tokens dropped), as Hugging Face's
MarianTokenizer does. ``vocab_map.json`` maps the ids onto aiayn's special-id layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import sentencepiece as spm

from aiayn.data.tokenizer import (
    BOS,
    EOS,
    MASK,
    PAD,
    UNK,
    characters_read_as_unk,
    sentencepiece_processor,
)
from aiayn.data.vocab_map import VocabMap
from aiayn.fileio import atomic_write, write_json

SOURCE_SPM, TARGET_SPM, VOCAB_JSON = "source.spm", "target.spm", "vocab.json"


class MarianTokenizer:
    """Marian's pair of sentencepiece models and its vocabulary, with aiayn's special ids."""

    pad_id, unk_id, bos_id, eos_id, mask_id = PAD, UNK, BOS, EOS, MASK

    def __init__(
        self, source: bytes, target: bytes, vocab: dict[str, int], vocab_map: VocabMap
    ) -> None:
        self.source_proto, self.target_proto = source, target
        self.source, self.target = (
            sentencepiece_processor(source, SOURCE_SPM),
            sentencepiece_processor(target, TARGET_SPM),
        )
        self.vocab = dict(vocab)
        self.pieces_of = {i: p for p, i in self.vocab.items()}
        self.vocab_map = vocab_map
        too_big = [p for p, i in self.vocab.items() if not 0 <= i < vocab_map.their_size]
        if too_big:
            raise ValueError(
                f"{VOCAB_JSON}: ids of {too_big[:3]} are outside the model's "
                f"{vocab_map.their_size} ids"
            )
        unk = vocab_map.specials[UNK]
        if unk is None:
            raise ValueError("a Marian vocabulary needs an unk token")
        self.their_unk = unk
        self.specials = {s for s in vocab_map.specials if s is not None}

    @classmethod
    def load(cls, directory: Path) -> MarianTokenizer:
        directory = Path(directory)
        paths = [directory / n for n in (SOURCE_SPM, TARGET_SPM, VOCAB_JSON)]
        for path in paths:
            if not path.is_file():
                raise FileNotFoundError(
                    f"{path}: missing (a Marian tokenizer has {', '.join(p.name for p in paths)})"
                )
        try:
            vocab = json.loads(paths[2].read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{paths[2]}: not valid JSON ({e})") from None
        try:
            return cls(
                paths[0].read_bytes(), paths[1].read_bytes(), vocab, VocabMap.load(directory)
            )
        except ValueError as e:
            raise ValueError(f"{directory}: {e}") from None

    def save(self, directory: Path) -> None:

        directory = Path(directory)
        atomic_write(directory / SOURCE_SPM, lambda p: p.write_bytes(self.source_proto))
        atomic_write(directory / TARGET_SPM, lambda p: p.write_bytes(self.target_proto))
        write_json(directory / VOCAB_JSON, self.vocab)
        self.vocab_map.save(directory)

    @property
    def vocab_size(self) -> int:
        return self.vocab_map.size

    def _ids(self, sp: spm.SentencePieceProcessor, texts: list[str]) -> list[list[int]]:
        out = []
        for text in texts:
            code = []  # a leading language code such as >>fra<< is one token
            if text.startswith(">>") and (end := text.find("<<")) != -1:
                code, text = [text[: end + 2]], text[end + 2 :]
            pieces = code + sp.encode(text, out_type=str)
            theirs = [self.vocab.get(p, self.their_unk) for p in pieces]
            out.append(self.vocab_map.to_ours(theirs))
        return out

    def encode(self, texts: list[str], bos: bool = False, eos: bool = False) -> list[list[int]]:
        """Token ids of source texts (``source.spm``), optionally framed by bos / eos."""
        head, tail = [BOS] if bos else [], [EOS] if eos else []
        return [head + x + tail for x in self._ids(self.source, list(texts))]

    def encode_target(self, texts: list[str]) -> list[list[int]]:
        """Token ids of target texts (``target.spm``)."""
        return self._ids(self.target, list(texts))

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Target texts from ids; stops at the first eos and drops special tokens."""
        out = []
        for seq in ids:
            seq = list(seq)
            if EOS in seq:
                seq = seq[: seq.index(EOS)]
            theirs = self.vocab_map.to_theirs([t for t in seq if t not in (PAD, BOS, MASK)])
            pieces = [self.pieces_of.get(t, "") for t in theirs if t not in self.specials]
            out.append(self.target.decode_pieces(pieces).replace("\u2581", " ").strip())
        return out

    @property
    def folds_case(self) -> bool:
        return self.encode(["AZ"]) == self.encode(["az"])

    def pieces(self, text: str) -> list[str]:
        return self.source.encode(text, out_type=str)

    def unknown_characters(self, texts: list[str]) -> list[str]:
        """The distinct characters of ``texts`` that encode to unk."""

        return characters_read_as_unk(self.encode, texts)

    def id_to_piece(self, token: int) -> str:
        return self.vocab_map.piece(token, lambda t: self.pieces_of.get(t, ""))
