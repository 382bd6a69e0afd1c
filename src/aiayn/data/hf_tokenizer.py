"""A tokenizer from Hugging Face's ``tokenizers`` library: WordPiece (BERT) or byte-level BPE
(GPT-2), as an imported model's ``tokenizer.json`` defines it.

The file is kept as it came; ``vocab_map.json`` beside it maps its ids onto aiayn's special-id
layout (``aiayn.data.vocab_map``). Texts are framed as the tokenizer's template frames a
single text: its leading special tokens (BERT's ``[CLS]``) come with every ``encode``; the
trailing one is aiayn's eos (BERT's ``[SEP]``), which the callers add as for any tokenizer.
"""

from __future__ import annotations

from pathlib import Path

from aiayn.data.tokenizer import BOS, EOS, MASK, PAD, UNK, characters_read_as_unk
from aiayn.data.vocab_map import VocabMap
from aiayn.fileio import atomic_write

HF_TOKENIZER_FILE = "tokenizer.json"


def _tokenizers():
    try:
        import tokenizers
    except ImportError:
        raise RuntimeError(
            "this model's tokenizer needs Hugging Face's tokenizers library: "
            "pip install tokenizers (or aiayn[hf])"
        ) from None
    return tokenizers


class HFTokenizer:
    """The ``tokenizers`` pipeline of ``tokenizer.json`` with ids mapped by a ``VocabMap``."""

    pad_id, unk_id, bos_id, eos_id, mask_id = PAD, UNK, BOS, EOS, MASK

    def __init__(self, text: str, vocab_map: VocabMap) -> None:
        tokenizers = _tokenizers()
        try:
            self.tok = tokenizers.Tokenizer.from_str(text)
        except Exception as e:  # the library raises its own exception type
            raise ValueError(f"not a tokenizers tokenizer.json ({e})") from None
        self.tok.no_truncation()  # aiayn truncates to the model's max_len itself
        self.tok.no_padding()
        self.text = text
        self.vocab_map = vocab_map
        size = self.tok.get_vocab_size(with_added_tokens=True)
        if size > vocab_map.their_size:
            raise ValueError(
                f"the tokenizer has {size} ids, more than the model's {vocab_map.their_size}"
            )
        self.prefix = vocab_map.to_ours(self._template_prefix())

    def _template_prefix(self) -> list[int]:
        """The special ids the post-processor puts before a single text ([CLS] for BERT)."""
        framed = self.tok.encode("a").ids
        plain = self.tok.encode("a", add_special_tokens=False).ids
        for start in range(len(framed) - len(plain) + 1):
            if framed[start : start + len(plain)] == plain:
                return framed[:start]
        return []

    @classmethod
    def load(cls, directory: Path) -> HFTokenizer:
        directory = Path(directory)
        path = directory / HF_TOKENIZER_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no tokenizer here")
        try:
            return cls(path.read_text(encoding="utf-8"), VocabMap.load(directory))
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def save(self, directory: Path) -> None:
        """Write ``tokenizer.json`` (as it came) and ``vocab_map.json`` into ``directory``."""

        text = self.text
        atomic_write(
            Path(directory) / HF_TOKENIZER_FILE, lambda p: p.write_text(text, encoding="utf-8")
        )
        self.vocab_map.save(directory)

    @property
    def vocab_size(self) -> int:
        return self.vocab_map.size

    def encode(self, texts: list[str], bos: bool = False, eos: bool = False) -> list[list[int]]:
        """Token ids of each text (after the template's leading specials), optionally framed
        by bos (when the template has no leading special of its own) / eos."""
        head = self.prefix or ([BOS] if bos else [])
        tail = [EOS] if eos else []
        to_ours = self.vocab_map.to_ours
        out = self.tok.encode_batch(list(texts), add_special_tokens=False)
        return [head + to_ours(e.ids) + tail for e in out]

    def encode_target(self, texts: list[str]) -> list[list[int]]:
        """Token ids of target-side texts (no template: the decoder starts from bos)."""
        to_ours = self.vocab_map.to_ours
        return [
            to_ours(e.ids) for e in self.tok.encode_batch(list(texts), add_special_tokens=False)
        ]

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Texts from ids; stops at the first eos and drops special tokens."""
        theirs = []
        for seq in ids:
            seq = list(seq)
            if EOS in seq:
                seq = seq[: seq.index(EOS)]
            theirs.append(self.vocab_map.to_theirs([t for t in seq if t not in (PAD, BOS, MASK)]))
        return self.tok.decode_batch(theirs, skip_special_tokens=True)

    @property
    def folds_case(self) -> bool:
        """Whether the normalizer folds case (BERT uncased)."""
        return self.encode(["AZ"]) == self.encode(["az"])

    def pieces(self, text: str) -> list[str]:
        return self.tok.encode(text, add_special_tokens=False).tokens

    def unknown_characters(self, texts: list[str]) -> list[str]:
        """The distinct characters of ``texts`` that encode to unk."""

        return characters_read_as_unk(self.encode, texts)

    def id_to_piece(self, token: int) -> str:
        return self.vocab_map.piece(token, lambda t: self.tok.id_to_token(t) or "")
