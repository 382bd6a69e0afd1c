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
from collections.abc import Iterator
from itertools import chain, islice, zip_longest
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


def iter_line_chunks(path: Path, chunk_bytes: int = 1 << 24) -> Iterator[list[str]]:
    """The lines of a UTF-8 text file (plain or .gz) in lists, read ``chunk_bytes`` at a time.

    Streaming ``read_lines``: the same line endings (LF or CR LF; a CR inside a line becomes
    a space, with one warning counting the lines), the byte order mark dropped, and bytes
    that are not UTF-8 a ``UserError`` naming the line and column. A file of CR endings only
    is read whole, as ``read_lines`` does (such files come from classic Mac OS, and are small).
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    number, rest, first = 0, b"", True
    inner = _LineNumbers()
    try:
        with opener(path, "rb") as f:
            while True:
                block = f.read(chunk_bytes)
                if first and block and b"\n" not in block and b"\r" in block:
                    yield read_lines(path)
                    return
                data = rest + block
                if not block:
                    cut = len(data)
                else:
                    cut = data.rfind(b"\n") + 1
                    if cut == 0:
                        rest = data
                        continue
                data, rest = data[:cut], data[cut:]
                if not data:
                    break
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    decode_utf8(data, path)  # raises, naming the line within this block ...
                    raise
                if first:
                    text = text.removeprefix("\ufeff")
                    first = False
                if not text:
                    break
                lines = text.split("\n")
                if text.endswith("\n"):
                    lines.pop()
                lines = [line.removesuffix("\r") for line in lines]
                found = [n for n, line in enumerate(lines, number + 1) if "\r" in line]
                if found:
                    inner.add(found)
                    lines = [line.replace("\r", " ") for line in lines]
                number += len(lines)
                yield lines
                if not block:
                    break
    except UserError as error:  # ... counted from the file's first line
        raise _shift_line(error, number) from None
    except (OSError, EOFError, zlib.error) as error:
        raise UserError(f"{path}: not a UTF-8 gzip file, or a damaged one ({error})") from None
    if inner.count:
        warnings.warn(
            f"{path}: {inner.count} line(s) hold a carriage return (CR) inside the line, read as "
            f"a space (line {inner})",
            stacklevel=2,
        )


class _LineNumbers:
    """A count of lines, and the first few numbers to show (bounded for any file size)."""

    def __init__(self) -> None:
        self.count, self.first = 0, []

    def add(self, numbers: list[int]) -> None:
        self.count += len(numbers)
        self.first += numbers[: MAX_MISMATCH_LINES_SHOWN + 1 - len(self.first)]

    def __str__(self) -> str:
        return _shown(self.first)


def _shift_line(error: UserError, before: int) -> UserError:
    """``error`` (from ``decode_utf8`` over a block) with its line counted from the file."""
    match = re.search(r", line (\d+):", str(error))
    if not match:
        return error
    line = int(match.group(1)) + before
    return UserError(str(error).replace(match.group(0), f", line {line}:", 1))


def iter_parallel(
    src_path: Path, tgt_path: Path, chunk_bytes: int = 1 << 24
) -> Iterator[list[Pair]]:
    """Streaming ``read_parallel``: lists of (source, target) pairs, both sides stripped,
    pairs with an empty side dropped (one warning at the end gives their line numbers), and
    a ``UserError`` naming both files when their line counts differ."""
    src = chain.from_iterable(iter_line_chunks(src_path, chunk_bytes))
    tgt = chain.from_iterable(iter_line_chunks(tgt_path, chunk_bytes))
    lines = zip_longest(src, tgt)  # None past the end of the shorter file
    n_src = n_tgt = number = 0
    empty = _LineNumbers()
    while block := list(islice(lines, 50_000)):
        pairs, dropped = [], []
        for s, t in block:
            n_src += s is not None
            n_tgt += t is not None
            if s is None or t is None:
                continue  # the counts differ: read on to count them
            number += 1
            s, t = s.strip(), t.strip()
            if s and t:
                pairs.append((s, t))
            else:
                dropped.append(number)
        empty.add(dropped)
        if n_src == n_tgt:
            yield pairs
    if n_src != n_tgt:
        raise UserError(f"line counts differ: {src_path} has {n_src} lines, {tgt_path} has {n_tgt}")
    if empty.count:
        warnings.warn(
            f"dropped {empty.count} line(s) with an empty side in {src_path} / {tgt_path} "
            f"(line {empty})",
            stacklevel=2,
        )


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
    return [pair for chunk in iter_tsv(path) for pair in chunk]


def iter_tsv(path: Path, chunk_bytes: int = 1 << 24) -> Iterator[list[Pair]]:
    """Streaming ``read_tsv``: lists of pairs, one warning at the end for the dropped ones."""
    number, empty = 0, _LineNumbers()
    for lines in iter_line_chunks(path, chunk_bytes):
        pairs, dropped = [], []
        for line in lines:
            number += 1
            if line.strip() and line.count("\t") != 1:
                raise UserError(
                    f"{path}, line {number}: expected exactly one tab, found {line.count(chr(9))}"
                )
            src, _, tgt = line.partition("\t")
            src, tgt = src.strip(), tgt.strip()
            if src and tgt:
                pairs.append((src, tgt))
            else:
                dropped.append(number)
        empty.add(dropped)
        yield pairs
    _warn_empty(empty, str(path))


def read_jsonl(path: Path, src_lang: str, tgt_lang: str) -> list[Pair]:
    """Read JSON lines in the layout of Hugging Face translation datasets (plain or .gz).

    Each line is ``{"translation": {"de": ..., "en": ...}}`` (WMT, IWSLT, ``Dataset.to_json``)
    or ``{"de": ..., "en": ...}`` (e.g. Multi30k); other fields are ignored. A line that is not
    JSON, or lacks a language, raises ValueError naming the file, the line and the fields it
    has; blank lines and pairs with an empty side are dropped with a warning.
    """
    return [pair for chunk in iter_jsonl(path, src_lang, tgt_lang) for pair in chunk]


def iter_jsonl(
    path: Path, src_lang: str, tgt_lang: str, chunk_bytes: int = 1 << 24
) -> Iterator[list[Pair]]:
    """Streaming ``read_jsonl``: lists of pairs, the warnings at the end."""
    number, empty, broken = 0, _LineNumbers(), _LineNumbers()
    for lines in iter_line_chunks(path, chunk_bytes):
        pairs, dropped, breaks = [], [], []
        for line in lines:
            number += 1
            if not line.strip():
                dropped.append(number)
                continue
            src, tgt = _json_pair(path, number, line, src_lang, tgt_lang)
            if _LINE_BREAK.search(src + tgt):  # one sentence is one line of the corpus files
                breaks.append(number)
                src, tgt = _LINE_BREAK.sub(" ", src), _LINE_BREAK.sub(" ", tgt)
            src, tgt = src.strip(), tgt.strip()
            if src and tgt:
                pairs.append((src, tgt))
            else:
                dropped.append(number)
        empty.add(dropped)
        broken.add(breaks)
        yield pairs
    if broken.count:
        warnings.warn(
            f"{path}: {broken.count} text(s) hold a line break, read as a space (line {broken})",
            stacklevel=2,
        )
    _warn_empty(empty, str(path))


def _json_pair(path: Path, number: int, line: str, src_lang: str, tgt_lang: str) -> Pair:
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
    return fields[src_lang], fields[tgt_lang]


def _warn_empty(empty: _LineNumbers, where: str) -> None:
    if empty.count:
        warnings.warn(
            f"dropped {empty.count} line(s) with an empty side in {where} (line {empty})",
            stacklevel=3,
        )


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
