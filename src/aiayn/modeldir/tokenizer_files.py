"""Which tokenizer a model or run directory holds, and loading it: BPE (``tokenizer.model``),
character (``tokenizer.json`` with its characters), or imported (``vocab_map.json`` beside a
Hugging Face ``tokenizer.json``, Marian's ``source.spm`` / ``target.spm`` / ``vocab.json``, or an
Argos Translate package's ``argos_tokenizer.json``, its model and its CTranslate2 vocabularies).
The tokenizers themselves are ``aiayn.data``'s; this is what a directory of them means."""

from __future__ import annotations

import hashlib
from pathlib import Path

from aiayn.data.argos_tokenizer import FILES as ARGOS_FILES
from aiayn.data.argos_tokenizer import ArgosTokenizer
from aiayn.data.hf_tokenizer import HFTokenizer
from aiayn.data.marian_tokenizer import MarianTokenizer
from aiayn.data.tokenizer import (
    CHAR_TOKENIZER_FILE,
    IMPORTED_TOKENIZER_FILES,
    TOKENIZER_FILE,
    VOCAB_MAP_FILE,
    CharTokenizer,
    Tokenizer,
)
from aiayn.data.vocab_map import VocabMap
from aiayn.errors import UserError


def tokenizer_file(directory: Path) -> Path:
    """The tokenizer file of a model or run directory (``directory`` itself if it is a file);
    for an imported tokenizer, its ``vocab_map.json``."""
    directory = Path(directory)
    if not directory.is_dir():
        return directory
    if (directory / VOCAB_MAP_FILE).is_file():
        return directory / VOCAB_MAP_FILE
    found = [directory / name for name in (TOKENIZER_FILE, CHAR_TOKENIZER_FILE)]
    found = [p for p in found if p.is_file()]
    if len(found) > 1:
        raise UserError(
            f"{directory} holds two tokenizers, {found[0].name} (BPE) and {found[1].name} "
            "(characters); keep the one its model was trained with"
        )
    return found[0] if found else directory / TOKENIZER_FILE


def remove_tokenizer(directory: Path) -> None:
    """Delete the tokenizer of ``directory`` (every file of an imported one)."""
    for path in tokenizer_paths(directory):
        path.unlink(missing_ok=True)


def tokenizer_sha256(directory: Path) -> str:
    """A digest of the tokenizer of ``directory``: its file's SHA-256, or for an imported
    tokenizer the SHA-256 of all its files (names and bytes)."""
    path = tokenizer_file(directory)
    if path.name != VOCAB_MAP_FILE:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    digest = hashlib.sha256()
    for part in tokenizer_paths(directory):
        digest.update(part.name.encode() + b"\0" + part.read_bytes())
    return digest.hexdigest()


def load_tokenizer(directory: Path):
    """The tokenizer saved in a model or run directory, by the files it holds: an imported
    one (``vocab_map.json`` beside Hugging Face ``tokenizer.json``, Marian's
    ``source.spm``/``target.spm``/``vocab.json`` or an Argos Translate package's files), BPE
    (``tokenizer.model``) or character."""
    directory = Path(directory)
    if (directory / VOCAB_MAP_FILE).is_file():
        backend = VocabMap.load(directory).backend
        if backend == "marian":
            return MarianTokenizer.load(directory)
        if backend == "argos":
            return ArgosTokenizer.load(directory)
        return HFTokenizer.load(directory)
    path = tokenizer_file(directory)
    if path.name == CHAR_TOKENIZER_FILE:
        return CharTokenizer.load(path)
    return Tokenizer.load(path)


def has_tokenizer(directory: Path) -> bool:
    directory = Path(directory)
    return any(
        (directory / f).is_file() for f in (TOKENIZER_FILE, CHAR_TOKENIZER_FILE, VOCAB_MAP_FILE)
    )


def tokenizer_paths(directory: Path) -> list[Path]:
    """Every file of the tokenizer of ``directory`` (an imported tokenizer has several)."""
    path = tokenizer_file(directory)
    if path.name != VOCAB_MAP_FILE:
        return [path] if path.is_file() else []
    names = dict.fromkeys([*IMPORTED_TOKENIZER_FILES, *ARGOS_FILES])
    return [path] + [path.parent / n for n in names if (path.parent / n).is_file()]
