"""SubRip subtitles (.srt, UTF-8) read and written with the ``srt`` library: each subtitle's
text one text to translate (a sentence often runs over two lines), its number and times
kept; its line breaks kept where the words around them went, a dialogue line's dash and a
positioning tag (``{\\an8}``) kept whole, never shown to the model; the inline tags SubRip
players know (``<i>``, ``<b>``, ``<u>``, ``<font>``) kept around the words aligned to those
they held."""

from __future__ import annotations

import html
import re
from xml.etree import ElementTree

from aiayn.data.markup import Document, MarkupError, parse, serialize
from aiayn.documents.base import DocumentError, Limits
from aiayn.documents.html import check_depth
from aiayn.documents.safety import check_size, decode_text

# kept as written: a positioning or style override ("{\an8}"), a dialogue line's dash
_KEPT = re.compile(r"\{\\[^{}\n]*\}|^[-\u2010\u2013\u2014] ?", re.MULTILINE)
_MARK = "aiayn-kept"  # the class of the <code> standing for what is kept, in tagged text
_MARKED = re.compile(f'<code class="{_MARK}">(.*?)</code>', re.DOTALL)


def _plain_tree(content: str) -> ElementTree.Element:
    """Untagged ``content`` as a block: its line breaks ``<br>``, what it keeps ``<code>``."""
    root = ElementTree.Element("p")
    last: ElementTree.Element | None = None
    at = 0
    for match in re.finditer(f"{_KEPT.pattern}|\\n", content, re.MULTILINE):
        words = content[at : match.start()]
        if last is None:
            root.text = (root.text or "") + words
        else:
            last.tail = (last.tail or "") + words
        last = ElementTree.SubElement(root, "br" if match.group() == "\n" else "code")
        if last.tag == "code":
            last.text = match.group()
        at = match.end()
    if last is None:
        root.text = (root.text or "") + content[at:]
    else:
        last.tail = (last.tail or "") + content[at:]
    return root


def _plain_text(root: ElementTree.Element) -> str:
    """The written ``_plain_tree``: each line's words, the line breaks and what it kept."""
    out = [root.text or ""]
    for child in root:
        out.append("\n" if child.tag == "br" else child.text or "")
        out.append(child.tail or "")
    return _lines("".join(out))


def _lines(text: str) -> str:
    """One space between words, none at a line's ends (the writer puts one after a dash
    that had it, and one between a positioning tag and the words)."""
    lines = (re.sub(r"[ \t]+", " ", line).strip(" ") for line in text.split("\n"))
    return "\n".join(re.sub(r"(\{\\[^{}]*\}) ", r"\1", line) for line in lines)


def _tagged_source(content: str) -> str:
    """Tagged ``content`` as HTML to parse: line breaks ``<br>``, what it keeps a marked
    ``<code>``."""
    kept = _KEPT.sub(lambda m: f'<code class="{_MARK}">{html.escape(m.group())}</code>', content)
    return kept.replace("\n", "<br>")


def _tagged_text(root: ElementTree.Element) -> str:
    """The written tagged tree as SubRip: HTML's ``<br>`` a line break, the marked
    ``<code>`` what it held (SubRip is not HTML: its "&" is an ampersand)."""
    text = serialize(root).replace("<br>", "\n")
    return _lines(html.unescape(_MARKED.sub(lambda m: m.group(1), text)))


class SubtitleDocument:
    def __init__(self, text: str, name: str) -> None:
        import srt

        try:
            self._subtitles = list(srt.parse(text))
        except (srt.SRTParseError, ValueError) as e:
            raise DocumentError(f"{name}: not SubRip subtitles ({e})") from None
        self._units: list[tuple[int, Document, bool]] = []
        for k, subtitle in enumerate(self._subtitles):
            content = subtitle.content.strip()
            if not content:
                continue
            tagged = "<" in content
            if tagged:
                check_depth(content, f"{name}: subtitle {subtitle.index}")
            try:
                where = f"{name}: subtitle {subtitle.index}"
                document = parse(_tagged_source(content), where) if tagged else None
            except MarkupError:
                document, tagged = None, False  # a lone "<" is text
            self._units.append((k, document or Document(_plain_tree(content)), tagged))
        self.documents = [d for _, d, _ in self._units]

    def save(self) -> bytes:
        import srt

        for k, document, tagged in self._units:
            root = document.root
            self._subtitles[k].content = _tagged_text(root) if tagged else _plain_text(root)
        return srt.compose(self._subtitles, reindex=False).encode("utf-8")


class Subtitles:
    extensions = (".srt",)
    media_type = "application/x-subrip; charset=utf-8"

    def open(self, data: bytes, name: str, limits: Limits) -> SubtitleDocument:
        check_size(data, name, limits)
        return SubtitleDocument(decode_text(data, name), name)
