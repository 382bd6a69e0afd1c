"""HTML pages (.html, .htm, UTF-8) read and written by ``aiayn.data.markup`` (html5lib, the
HTML standard's parser): every element and attribute kept (a ``<meta>`` charset made to say
UTF-8, as the page is written), inline markup around the words aligned to those it held;
markup the parser would have to repair is refused."""

from __future__ import annotations

import re

from aiayn.data.markup import MarkupError, parse, serialize
from aiayn.documents.base import DocumentError, Limits
from aiayn.documents.safety import check_size, decode_text

MAX_DEPTH = 400  # elements open inside one another
# a tag's start up to its ">", or up to the next "<" (a tag left open, or a "<" inside an
# attribute's value: counted all the same, so no value hides a tag); never scanning past a
# "<", so each character is read once (``[^>]*`` read to the end from every "<" of a text
# without ">": quadratic)
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)[^<>]*?(/?)(?:>|(?=<)|\Z)")
# elements that are never open (void) or whose end tag may be left out: not counted
_UNCOUNTED = frozenset(
    "area base br col embed hr img input link meta source track wbr p li dt dd tr td th "
    "thead tbody tfoot option optgroup rb rt rtc rp colgroup caption".split()
)


def check_depth(html: str, name: str) -> None:
    """Refuse markup nested past ``MAX_DEPTH`` before a parser builds it (the parser and the
    tree walks would take time and stack in proportion), counting start and end tags."""
    depth = 0
    for match in _TAG.finditer(html):
        end, tag, closed = match.groups()
        if closed or tag.lower() in _UNCOUNTED:
            continue
        depth = max(depth - 1, 0) if end else depth + 1
        if depth > MAX_DEPTH:
            line = html.count("\n", 0, match.start()) + 1
            raise DocumentError(
                f"{name}: line {line}: elements nested over {MAX_DEPTH} deep; refused"
            )


_CHARSET = re.compile(r"charset\s*=\s*[^;\s]*", re.IGNORECASE)


def declare_utf8(root) -> None:
    """Make the page's ``<meta>`` say UTF-8, the encoding it is written in (a page that
    declared ISO-8859-1 would show the translation's "’" as "â€™")."""
    for element in root.iter():
        tag = element.tag
        if not isinstance(tag, str) or tag.rsplit("}", 1)[-1].lower() != "meta":
            continue
        if element.get("charset") is not None:
            element.set("charset", "utf-8")
        content = element.get("content")
        if (element.get("http-equiv") or "").lower() == "content-type" and content:
            element.set("content", _CHARSET.sub("charset=utf-8", content))


def mark_language(root, code: str) -> None:
    """Declare ``code`` the page's language: the ``<html>`` element's ``lang`` (and
    ``xml:lang``), and every ``lang`` that named the language it declared before."""
    xml_lang = "{http://www.w3.org/XML/1998/namespace}lang"
    attributes = ("lang", "xml:lang", xml_lang)
    page = next((e for e in root.iter() if _local(e) == "html"), None)
    if page is None:
        return
    before = next((page.get(a) for a in attributes if page.get(a)), None)
    for element in root.iter():
        for attribute in attributes:
            value = element.get(attribute)
            if value is not None and (element is page or value == before):
                element.set(attribute, code)
    if not any(page.get(a) is not None for a in attributes):
        page.set("lang", code)


def _local(element) -> str:
    tag = element.tag
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""


class HtmlDocument:
    def __init__(self, html: str, name: str) -> None:
        check_depth(html, name)
        try:
            self._document = parse(html, name)
        except MarkupError as e:
            raise DocumentError(str(e)) from None
        self.documents = [self._document]

    def mark_language(self, code: str) -> None:
        mark_language(self._document.root, code)

    def save(self) -> bytes:
        declare_utf8(self._document.root)
        return serialize(self._document.root).encode("utf-8")


class Html:
    extensions = (".html", ".htm")
    media_type = "text/html; charset=utf-8"

    def open(self, data: bytes, name: str, limits: Limits) -> HtmlDocument:
        check_size(data, name, limits)
        return HtmlDocument(decode_text(data, name), name)
