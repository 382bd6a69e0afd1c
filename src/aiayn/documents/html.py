"""HTML pages (.html, .htm, UTF-8) read and written by ``aiayn.data.markup`` (html5lib, the
HTML standard's parser): every element and attribute kept, inline markup around the words
aligned to those it held; markup the parser would have to repair is refused."""

from __future__ import annotations

from aiayn.data.markup import MarkupError, parse, serialize
from aiayn.documents.base import DocumentError, Limits
from aiayn.documents.safety import check_size, decode_text


class HtmlDocument:
    def __init__(self, html: str, name: str) -> None:
        try:
            self._document = parse(html, name)
        except MarkupError as e:
            raise DocumentError(str(e)) from None
        self.documents = [self._document]

    def save(self) -> bytes:
        return serialize(self._document.root).encode("utf-8")


class Html:
    extensions = (".html", ".htm")
    media_type = "text/html; charset=utf-8"

    def open(self, data: bytes, name: str, limits: Limits) -> HtmlDocument:
        check_size(data, name, limits)
        return HtmlDocument(decode_text(data, name), name)
