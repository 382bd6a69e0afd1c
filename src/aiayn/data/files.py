"""Reading corpus files: the user's own parallel files and every prepared corpus's splits.

The user's own files (``aiayn prepare files``), plain or gzip, UTF-8:

* two aligned plain-text files, one sentence per line (``read_parallel``);
* ``source<TAB>target`` lines (``read_tsv``);
* JSON lines in the layout of Hugging Face translation datasets (``read_jsonl``).

Bad input is a ``UserError`` (a ValueError) naming the file and line (or both files and their
line counts): bytes that are not UTF-8 (with the line and column), a damaged gzip stream, a
malformed line. Lines end at a newline (LF or CR LF); a carriage return inside a line is read
as a space, and one inside a JSON text field too, with a warning, so that a stray CR cannot
shift every later pair. A byte order mark at the start of a file is dropped. Blank lines and
pairs with an empty side are dropped with a warning giving their line numbers.

Prepared corpora, as the corpus modules under ``aiayn.data.corpora`` write them:

* parallel: ``{split}.{src,tgt}.gz`` (``load_split``);
* running text: ``{split}.txt.gz`` (``read_text``);
* labelled: ``{split}.tsv.gz`` with ``label<TAB>text`` lines (``read_labelled``).
"""

from __future__ import annotations

import gzip
import json
import re
import warnings
import zlib
from pathlib import Path

from aiayn.errors import UserError, decode_utf8

MAX_MISMATCH_LINES_SHOWN = 5
Pair = tuple[str, str]  # (source, target)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _read_bytes(path: Path) -> bytes:
    """The bytes of ``path``, gunzipped if it ends in .gz; a damaged gzip file is named."""
    path = Path(path)
    data = path.read_bytes()
    if path.suffix != ".gz":
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as error:
        raise UserError(f"{path}: not a UTF-8 gzip file, or a damaged one ({error})") from None


def _shown(numbers: list[int]) -> str:
    more = ", ..." if len(numbers) > MAX_MISMATCH_LINES_SHOWN else ""
    return ", ".join(map(str, numbers[:MAX_MISMATCH_LINES_SHOWN])) + more


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file (plain or .gz), without their line endings.

    A line ends at LF or CR LF (a file with CR endings only, from classic Mac OS, is split at
    CR); a lone CR inside a line becomes a space, with a warning naming the lines.
    """
    text = decode_utf8(_read_bytes(path), path).removeprefix("\ufeff")
    if not text:
        return []
    if "\n" not in text:
        text = text.replace("\r", "\n")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    lines = [line.removesuffix("\r") for line in lines]
    inner = [n for n, line in enumerate(lines, 1) if "\r" in line]
    if inner:
        warnings.warn(
            f"{path}: {len(inner)} line(s) hold a carriage return (CR) inside the line, read as "
            f"a space (line {_shown(inner)})",
            stacklevel=3,
        )
        lines = [line.replace("\r", " ") for line in lines]
    return lines


def _drop_empty(pairs: list[Pair], numbers: list[int], where: str) -> list:
    kept = [(s, t) for s, t in pairs if s and t]
    empty = [n for (s, t), n in zip(pairs, numbers, strict=True) if not (s and t)]
    if empty:
        warnings.warn(
            f"dropped {len(empty)} line(s) with an empty side in {where} (line {_shown(empty)})",
            stacklevel=3,
        )
    return kept


def read_parallel(src_path: Path, tgt_path: Path) -> list[Pair]:
    """Read aligned source/target files (plain or .gz), one sentence per line.

    Raises ValueError if the line counts differ; drops pairs with an empty side
    with a warning that gives their (1-based) line numbers.
    """
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise UserError(
            f"line counts differ: {src_path} has {len(src)} lines, {tgt_path} has {len(tgt)}"
        )
    pairs = [(s.strip(), t.strip()) for s, t in zip(src, tgt, strict=True)]
    return _drop_empty(pairs, list(range(1, len(pairs) + 1)), f"{src_path} / {tgt_path}")


def read_tsv(path: Path) -> list[Pair]:
    """Read ``source<TAB>target`` lines (plain or .gz).

    A non-blank line without exactly one tab raises ValueError naming the file and
    line; blank lines and pairs with an empty side are dropped with a warning.
    """
    pairs, numbers = [], []
    for number, line in enumerate(read_lines(path), start=1):
        if line.strip() and line.count("\t") != 1:
            raise UserError(
                f"{path}, line {number}: expected exactly one tab, found {line.count(chr(9))}"
            )
        src, _, tgt = line.partition("\t")
        pairs.append((src.strip(), tgt.strip()))
        numbers.append(number)
    return _drop_empty(pairs, numbers, str(path))


def read_jsonl(path: Path, src_lang: str, tgt_lang: str) -> list[Pair]:
    """Read JSON lines in the layout of Hugging Face translation datasets (plain or .gz).

    Each line is ``{"translation": {"de": ..., "en": ...}}`` (WMT, IWSLT, ``Dataset.to_json``)
    or ``{"de": ..., "en": ...}`` (e.g. Multi30k); other fields are ignored. A line that is not
    JSON, or lacks a language, raises ValueError naming the file, the line and the fields it
    has; blank lines and pairs with an empty side are dropped with a warning.
    """
    pairs, numbers, broken = [], [], []
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            pairs.append(("", ""))
            numbers.append(number)
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{path}, line {number}: not JSON ({e.msg})") from None
        if not isinstance(record, dict):
            raise UserError(f"{path}, line {number}: expected a JSON object")
        fields = record.get("translation", record)
        if not isinstance(fields, dict):
            raise UserError(f"{path}, line {number}: 'translation' is not an object")
        for lang in (src_lang, tgt_lang):
            if not isinstance(fields.get(lang), str):
                raise UserError(
                    f"{path}, line {number}: no text for language {lang!r} "
                    f"(fields: {', '.join(sorted(map(str, fields))) or 'none'})"
                )
        src, tgt = (fields[lang] for lang in (src_lang, tgt_lang))
        if _LINE_BREAK.search(src + tgt):  # one sentence is one line of the corpus files
            broken.append(number)
            src, tgt = _LINE_BREAK.sub(" ", src), _LINE_BREAK.sub(" ", tgt)
        pairs.append((src.strip(), tgt.strip()))
        numbers.append(number)
    if broken:
        warnings.warn(
            f"{path}: {len(broken)} text(s) hold a line break, read as a space (line "
            f"{_shown(broken)})",
            stacklevel=2,
        )
    return _drop_empty(pairs, numbers, str(path))


def load_split(
    corpus_dir: Path, split: str, src_lang: str = "de", tgt_lang: str = "en"
) -> list[Pair]:
    """Load ``corpus_dir/{split}.{src_lang,tgt_lang}.gz`` as (source, target) pairs."""
    corpus_dir = Path(corpus_dir)
    paths = [corpus_dir / f"{split}.{lang}.gz" for lang in (src_lang, tgt_lang)]
    for path in paths:
        have = sorted(
            p.name[: -len(f".{src_lang}.gz")] for p in corpus_dir.glob(f"*.{src_lang}.gz")
        )
        if not path.is_file() and have:
            raise FileNotFoundError(
                f"{path} not found: {corpus_dir} has no split {split!r} in {src_lang}-{tgt_lang} "
                f"(its {src_lang} splits: {', '.join(have)})"
            )
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found; build the corpus with `aiayn prepare {corpus_dir.name}` "
                f"(or `python scripts/prepare_corpora.py {corpus_dir.name} --out {corpus_dir}`)"
            )
    return read_parallel(*paths)


def read_text(corpus: Path, split: str) -> str:
    path = Path(corpus) / f"{split}.txt.gz"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found; a language-model corpus holds {{train,valid}}.txt.gz "
            f"(e.g. `aiayn prepare moby-dick`)"
        )
    return decode_utf8(_read_bytes(path), path)


def read_labelled(corpus: Path, split: str) -> list[tuple[str, str]]:
    """(text, label) pairs of ``corpus/{split}.tsv.gz``; blank lines are skipped.

    A line is ``label<TAB>text`` with a non-empty label and text and no second tab; any other
    line is an error naming the file and line, as is a file that is not UTF-8 gzip.
    """
    path = Path(corpus) / f"{split}.tsv.gz"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found; a labelled corpus holds {{train,valid,test}}.tsv.gz with "
            "label<TAB>text lines (e.g. `aiayn prepare rotten-tomatoes`)"
        )
    lines = decode_utf8(_read_bytes(path), path).split("\n")
    pairs = []
    for number, line in enumerate(lines, 1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        label, sep, text = line.partition("\t")
        if not sep or not label or not text.strip() or "\t" in text:
            raise UserError(f"{path}, line {number}: expected label<TAB>text, got {line[:60]!r}")
        pairs.append((text, label))
    return pairs
