"""Reading a tree into segments: every run of text and inline elements between two block
elements is one ``Segment``, translated as a unit, with the inline elements in it as
``Node``s (the source characters each encloses)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from xml.etree import ElementTree

from aiayn.data.markup.elements import (
    HTML,
    VOID,
    Tags,
    breaks,
    has_text,
    is_block,
    name,
    own_text,
    untranslated,
)

BREAK = "\0"  # a word break that is not text (the parser never leaves a NUL in text)
_WORD = re.compile(r"[^\s\0]+")
_MARK_ELEMENTS, _MARK_CHARS = 8, 32  # the most a note's mark holds


@dataclass
class Node:
    """An element or comment inside a segment, with the source characters it encloses
    (``start == end`` for a point: void, untranslated, comment)."""

    element: ElementTree.Element
    start: int
    end: int = -1
    point: bool = False
    children: list[Node] = field(default_factory=list)
    # a point that reads as a word (spaced as one): text of its own, or an element a caller
    # keeps whole in XML (a placeholder, ``<x id="1"/>``)
    word: bool = False


@dataclass
class Segment:
    """The text between two block boundaries, as translated: ``text``, its words joined by
    single spaces."""

    text: str
    raw: str
    spans: list[tuple[int, int]]  # character spans of the words in raw
    slot: tuple[ElementTree.Element, str]  # where the segment's text begins: (element, attr)
    nodes: list[Node]

    @property
    def words(self) -> list[str]:
        return self.text.split(" ")


class _Builder:
    """The segment being read: raw text and the nodes in it."""

    def __init__(self, slot: tuple[ElementTree.Element, str], tags: Tags = HTML) -> None:
        self.slot, self.raw, self.nodes = slot, [], []
        self.length = 0
        self.tags = tags

    def text(self, text: str | None) -> None:
        if text:
            self.raw.append(text)
            self.length += len(text)

    def node(self, element, into: list[Node]) -> None:
        node = Node(element, self.length)
        into.append(node)
        if (
            name(element) is None
            or name(element) in VOID
            or untranslated(element, self.tags)
            or _letterless(element)
        ):
            node.end, node.point = self.length, True
            node.word = has_text(element) or (
                self.tags.xml and name(element) is not None and untranslated(element, self.tags)
            )
            if breaks(element):
                self.text(BREAK)  # "Zeile<br>Zeile": two words
            return
        hidden = element.get("hidden") is not None  # another variant of the text around it
        if hidden:
            self.text(BREAK)
        self.text(element.text)
        for child in element:
            self.node(child, node.children)
            self.text(child.tail)
        if hidden:
            self.text(BREAK)
        node.end = self.length

    def finish(self, segments: list[Segment]) -> None:
        raw = "".join(self.raw)
        words = [m.span() for m in _WORD.finditer(raw)]
        if words:
            text = " ".join(raw[a:b] for a, b in words)
            segments.append(Segment(text, raw, words, self.slot, self.nodes))


def _letterless(element) -> bool:
    """Whether an inline element is a short text without a letter (a note's mark
    ``<a>1</a>``, ``<sup>2</sup>``): kept whole as a point, as a model would drop or change
    it. Only a few elements and characters are read (elements nested 400 deep, each
    reading all it holds, would read a long page 400 times)."""
    texts = []
    for k, node in enumerate(element.iter()):
        if k >= _MARK_ELEMENTS:
            return False
        texts.append(node.text or "")
        if node is not element:
            texts.append(node.tail or "")
        if sum(map(len, texts)) > _MARK_CHARS:
            return False
    text = "".join(texts)
    return bool(text.strip()) and not any(c.isalpha() for c in text)


def collect(
    container, segments: list[Segment], memo: dict | None = None, tags: Tags = HTML
) -> None:
    """Append the segments of ``container`` (an element and what it holds) to ``segments``
    (``tags``: which elements are blocks, which are never translated)."""
    memo = {} if memo is None else memo
    if name(container) is None or untranslated(container, tags):
        return  # a doctype, or what is never translated
    beside_text = own_text(container) if tags.xml else True
    builder = _Builder((container, "text"), tags)
    builder.text(container.text)
    for child in container:
        if is_block(child, memo, tags, beside_text):
            builder.finish(segments)
            collect(child, segments, memo, tags)
            builder = _Builder((child, "tail"), tags)
        else:
            builder.node(child, builder.nodes)
        builder.text(child.tail)
    builder.finish(segments)
