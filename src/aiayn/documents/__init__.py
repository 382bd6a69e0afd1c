"""Documents translated whole: each format a small module behind one interface (``Format``:
open bytes into an ``Opened`` whose ``documents`` are trees of text and inline elements;
``save`` once their translations are written), read and written with the maintained library
of its format, its inline formatting carried by ``aiayn.data.markup``.

``read`` picks the format by the file's name and checks the upload first
(``aiayn.documents.safety``); ``Sentences`` cuts the documents' segments into the texts to
translate, the same texts a sentence-level model gets everywhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import PurePath

from aiayn.data.markup import Sentences
from aiayn.data.markup.document import crowded
from aiayn.documents.base import DocumentError, Format, Limits, Opened
from aiayn.documents.ebook import Ebook
from aiayn.documents.gettext import Gettext
from aiayn.documents.html import Html
from aiayn.documents.opendocument import OpenDocumentPresentation, OpenDocumentText
from aiayn.documents.slides import Slides
from aiayn.documents.subtitles import Subtitles
from aiayn.documents.text import Text
from aiayn.documents.word import Word

FORMATS: tuple[Format, ...] = (
    Text(),
    Html(),
    Subtitles(),
    Gettext(),
    Word(),
    Slides(),
    OpenDocumentText(),
    OpenDocumentPresentation(),
    Ebook(),
)


def supported_formats() -> list[str]:
    """The name endings a document may have (".docx", ...), as LibreTranslate's
    ``supportedFilesFormat`` lists them."""
    return [ext for f in FORMATS for ext in f.extensions]


def format_for(name: str) -> Format | None:
    """The format of a file called ``name`` (by its ending; None: none)."""
    suffix = PurePath(name).suffix.lower()
    return next((f for f in FORMATS if suffix in f.extensions), None)


def read(data: bytes, name: str, limits: Limits | None = None) -> Opened:
    """The document in ``data`` (a file called ``name``), checked and opened by its format.
    A file that cannot be read is a ``DocumentError`` naming the problem, whatever the
    library of its format raised. Texts without a letter (numbers, dates) are left as they
    are: they are not translated."""
    limits = limits or Limits()
    fmt = format_for(name)
    if fmt is None:
        raise DocumentError(
            f"{name}: file format not supported; supported: {', '.join(supported_formats())}"
        )
    try:
        opened = fmt.open(data, name, limits)
    except DocumentError:
        raise
    except RecursionError:
        raise DocumentError(f"{name}: nested too deeply to read") from None
    except Exception as e:  # noqa: BLE001 - whatever the format's library raised on this file
        raise DocumentError(f"{name}: a damaged {fmt.extensions[0]} ({_described(e)})") from None
    for document in opened.documents:  # a number, a date, a page number: kept as written
        document.segments = [s for s in document.segments if _has_letters(s.text)]
        why = crowded(document)
        if why:
            raise DocumentError(f"{name}: {why}")
    chars = sum(len(s.text) for d in opened.documents for s in d.segments)
    if chars > limits.max_chars:
        raise DocumentError(f"{name}: {chars} characters of text; at most {limits.max_chars}")
    return opened


def read_file(path, limits: Limits | None = None) -> Opened:
    """The document at ``path`` (``read``), its size checked before it is read."""
    from pathlib import Path

    limits = limits or Limits()
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > limits.max_bytes:
            raise DocumentError(f"{path}: {size} bytes; at most {limits.max_bytes}")
        data = path.read_bytes()
    except OSError as e:
        raise DocumentError(f"cannot read {path}: {e.strerror or e}") from None
    return read(data, path.name, limits)


def sentences(
    opened: Opened, fits: Callable[[str], bool], keep: Sequence[str] | None = None
) -> Sentences:
    """The texts of ``opened`` to translate: its segments cut into sentences (``fits``: whether
    a text fits the model; a span ``keep`` matches not cut), as every other route to a model
    cuts them."""
    return Sentences(opened.documents, fits, keep)


def aligned(opened: Opened) -> bool:
    """Whether writing the translations back needs their word alignments: some segment holds
    inline elements or points (without, alignments are never read)."""
    return any(s.nodes for d in opened.documents for s in d.segments)


def save(
    opened: Opened,
    sentences: Sentences,
    translations: Sequence[tuple[str, Sequence[tuple[int, int]]]],
    name: str,
    language: str | None = None,
) -> bytes:
    """The translated file's bytes: each of ``sentences.texts``' (translation, alignment
    pairs) written into ``opened``'s trees, then ``opened.save``; ``language``: the code of
    the translation's language, which a format that declares its document's language (an
    HTML page's ``lang``, an e-book's) then declares. A failure to write it back is a
    ``DocumentError`` naming the file."""
    try:
        sentences.write(translations)
        mark = getattr(opened, "mark_language", None)
        if language and mark is not None:
            mark(language)
        return opened.save()
    except DocumentError:
        raise
    except RecursionError:
        raise DocumentError(f"{name}: nested too deeply to write back") from None
    except Exception as e:  # noqa: BLE001 - whatever the format's library raised writing it
        raise DocumentError(f"{name}: cannot be written back ({_described(e)})") from None


def _has_letters(text: str) -> bool:
    """Whether ``text`` has a letter of any script: one without (a number, "2024-11-27",
    "-- 5 --") is no sentence, and a model would make words up for it."""
    return any(c.isalpha() for c in text)


def _described(error: Exception) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text[:200]}" if text else type(error).__name__


__all__ = [
    "FORMATS",
    "DocumentError",
    "Format",
    "Limits",
    "Opened",
    "format_for",
    "aligned",
    "read",
    "read_file",
    "save",
    "sentences",
    "supported_formats",
]
