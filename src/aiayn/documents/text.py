"""Plain text (.txt, UTF-8): every non-blank line a text to translate; blank lines, each
line's indentation and trailing white space and the line endings kept."""

from __future__ import annotations

import re

from aiayn.data.markup import Document
from aiayn.documents.base import Limits, leaf, tree_text
from aiayn.documents.safety import check_size, decode_text

_LINE = re.compile(r"([ \t]*)(.*?)(\s*)$", re.DOTALL)


class TextDocument:
    def __init__(self, text: str) -> None:
        self._lines = text.splitlines(keepends=True)
        self._units: list[tuple[int, str, Document, str]] = []
        for i, line in enumerate(self._lines):
            lead, body, trail = _LINE.match(line).groups()
            if body.strip():
                self._units.append((i, lead, Document(leaf(body)), trail))
        self.documents = [d for _, _, d, _ in self._units]

    def save(self) -> bytes:
        lines = list(self._lines)
        for i, lead, document, trail in self._units:
            lines[i] = lead + tree_text(document.root) + trail
        return "".join(lines).encode("utf-8")


class Text:
    extensions = (".txt",)
    media_type = "text/plain; charset=utf-8"

    def open(self, data: bytes, name: str, limits: Limits) -> TextDocument:
        check_size(data, name, limits)
        return TextDocument(decode_text(data, name))
