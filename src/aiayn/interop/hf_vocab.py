"""Tokenizer files of a Hugging Face model directory, as the ``tokenizers`` backend reads them.

A directory holds ``tokenizer.json`` (the whole pipeline), or only the older files: BERT's
``vocab.txt`` (WordPiece, options in ``tokenizer_config.json``), GPT-2's ``vocab.json`` +
``merges.txt`` (byte-level BPE). The older files are turned into the ``tokenizer.json`` that
transformers' own conversion builds from them, so the ids are the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiayn.data.hf_tokenizer import _tokenizers
from aiayn.fileio import read_json_object


def tokenizer_config(directory: Path) -> dict[str, Any]:
    """tokenizer_config.json merged over special_tokens_map.json (either may be absent)."""
    out: dict[str, Any] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        path = Path(directory) / name
        if path.is_file():
            out.update(read_json_object(path, "tokenizer config"))
    return out


def token_name(value: Any) -> str | None:
    """A special token as the config files write it: a string or {"content": ...}."""
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


def wordpiece_from_vocab_txt(directory: Path) -> str:
    """BERT's WordPiece pipeline from vocab.txt and tokenizer_config.json, as tokenizer.json."""
    tk = _tokenizers()
    from tokenizers import decoders, models, normalizers, pre_tokenizers, processors

    path = Path(directory) / "vocab.txt"
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    vocab = {token: i for i, token in enumerate(lines)}
    options = tokenizer_config(directory)
    names = {
        key: token_name(options.get(key)) or default
        for key, default in (
            ("unk_token", "[UNK]"),
            ("cls_token", "[CLS]"),
            ("sep_token", "[SEP]"),
            ("pad_token", "[PAD]"),
            ("mask_token", "[MASK]"),
        )
    }
    for key in ("unk_token", "cls_token", "sep_token"):
        if names[key] not in vocab:
            raise ValueError(f"{path}: the {key} {names[key]!r} is not in the vocabulary")
    tok = tk.Tokenizer(models.WordPiece(vocab, unk_token=names["unk_token"]))
    lowercase = options.get("do_lower_case", True)
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=options.get("tokenize_chinese_chars", True),
        strip_accents=options.get("strip_accents"),
        lowercase=lowercase,
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = names["cls_token"], names["sep_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0",
        pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])],
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens([tk.AddedToken(n, special=True) for n in names.values() if n in vocab])
    return tok.to_str()


def byte_bpe_from_vocab_json(directory: Path) -> str:
    """GPT-2's byte-level BPE from vocab.json and merges.txt, as tokenizer.json."""
    tk = _tokenizers()
    from tokenizers import decoders, models, pre_tokenizers, processors

    directory = Path(directory)
    options = tokenizer_config(directory)
    tok = tk.Tokenizer(
        models.BPE.from_file(str(directory / "vocab.json"), str(directory / "merges.txt"))
    )
    prefix_space = bool(options.get("add_prefix_space", False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix_space)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    specials = {token_name(options.get(k)) for k in ("bos_token", "eos_token", "unk_token")}
    tok.add_special_tokens(
        [tk.AddedToken(n, special=True) for n in sorted(s for s in specials if s)]
    )
    return tok.to_str()


def tokenizer_json(directory: Path, kind: str) -> str:
    """The tokenizer.json text of ``directory``: the file itself, or built from the older
    files (``kind``: "wordpiece" or "byte_bpe")."""
    directory = Path(directory)
    path = directory / "tokenizer.json"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    if kind == "wordpiece" and (directory / "vocab.txt").is_file():
        return wordpiece_from_vocab_txt(directory)
    if kind == "byte_bpe" and (directory / "vocab.json").is_file():
        if not (directory / "merges.txt").is_file():
            raise FileNotFoundError(f"{directory}: vocab.json without merges.txt")
        return byte_bpe_from_vocab_json(directory)
    wanted = "vocab.txt" if kind == "wordpiece" else "vocab.json and merges.txt"
    raise FileNotFoundError(f"{directory}: no tokenizer files (tokenizer.json, or {wanted})")


def token_id(text: str, name: str | None) -> int | None:
    """The id of token ``name`` in the tokenizer.json ``text`` (None if absent)."""
    if name is None:
        return None
    tok = _tokenizers().Tokenizer.from_str(text)
    return tok.token_to_id(name)


def token_name_of(text: str, token: int) -> str | None:
    """The token with id ``token`` in the tokenizer.json ``text`` (None if it has none)."""
    return _tokenizers().Tokenizer.from_str(text).id_to_token(token)
