"""OpenDocument text and presentations (.odt, .odp) read and written with odfpy.

Every paragraph and heading a reader sees: the body (tables, lists, frames, a presentation's
slides and notes), the page styles' headers and footers, footnotes and endnotes. A
paragraph's own tree is the tree ``aiayn.data.markup`` translates: ``text:span`` and
``text:a`` become inline elements around the words translated from their own, a line break
or a tab a point between words, and anything else inside a paragraph (a frame, a note's
citation, a field, a bookmark) a point kept whole; a note's own paragraphs are translated as
texts of their own.
"""

from __future__ import annotations

import io
from xml.etree import ElementTree

from aiayn.data.markup import Document
from aiayn.documents.base import DocumentError, Limits
from aiayn.documents.safety import open_archive, require, require_mimetype

_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_INLINE = {"span": "span", "a": "a"}
_POINTS = {"line-break": "br", "tab": "img"}  # a point that breaks the words around it
# spaces one ``text:s`` stands for, at most: its ``text:c`` is the file's word (2e9 would be
# 2 GB of spaces), and more than this many in a row mean layout, not words
MAX_SPACES = 64


class _Twin:
    """An odfpy element and the tree element standing for it."""

    def __init__(self, node, element: ElementTree.Element) -> None:
        self.node, self.element = node, element
        self.children: list[_Twin] = []  # in the order of node's element children


def _build(node, element: ElementTree.Element) -> _Twin:
    twin = _Twin(node, element)
    last: ElementTree.Element | None = None

    def add(text: str) -> None:
        if last is None:
            element.text = (element.text or "") + text
        else:
            last.tail = (last.tail or "") + text

    for child in node.childNodes:
        if child.nodeType == child.TEXT_NODE:
            add(child.data)
            continue
        namespace, local = child.qname
        if namespace == _TEXT and local == "s":  # spaces: folded into the text around
            add(" " * min(int(child.getAttribute("c") or 1), MAX_SPACES))
            continue
        tag = _INLINE.get(local) if namespace == _TEXT else None
        if tag is not None:
            last = ElementTree.SubElement(element, tag)
            style = child.getAttribute("stylename") if local == "span" else None
            if style:  # what the run looks like, telling its neighbours apart
                last.set("style", style)
            twin.children.append(_build(child, last))
            continue
        point = _POINTS.get(local, "code") if namespace == _TEXT else "code"
        last = ElementTree.SubElement(element, point)
        twin.children.append(_Twin(child, last))
    return twin


def _write(twin: _Twin) -> None:
    """Put the tree's text back into the odfpy element (its text nodes and spaces replaced)."""
    from odf.element import Text

    node = twin.node
    inline = twin.element.tag in _INLINE.values() or twin.element.tag == "p"
    if not inline:
        return  # a point: kept whole
    for child in list(node.childNodes):
        if child.nodeType == child.TEXT_NODE:
            child.data = ""  # emptied, not removed: odfpy's caches hold elements only
        elif child.qname == (_TEXT, "s"):
            node.removeChild(child)
    anchors = [c.node for c in twin.children]
    if twin.element.text:
        first = anchors[0] if anchors else None
        if first is None:
            node.appendChild(Text(twin.element.text))
        else:
            node.insertBefore(Text(twin.element.text), first)
    for k, child in enumerate(twin.children):
        _write(child)
        if child.element.tail:
            following = anchors[k + 1] if k + 1 < len(anchors) else None
            if following is None:
                node.appendChild(Text(child.element.tail))
            else:
                node.insertBefore(Text(child.element.tail), following)


class OpenDocument:
    def __init__(self, data: bytes, name: str) -> None:
        from odf import text
        from odf.opendocument import load

        self._document = load(io.BytesIO(data))
        self._twins: list[_Twin] = []
        seen = set()
        for kind in (text.P, text.H):
            for node in self._document.getElementsByType(kind):
                if id(node) not in seen:
                    seen.add(id(node))
                    self._twins.append(_build(node, ElementTree.Element("p")))
        self.documents = [Document(t.element) for t in self._twins]

    def save(self) -> bytes:
        for twin in self._twins:
            _write(twin)
        out = io.BytesIO()
        self._document.write(out)
        return out.getvalue()


class _OpenDocumentFormat:
    kind = ""
    mimetype = ""

    def open(self, data: bytes, name: str, limits: Limits) -> OpenDocument:
        members = open_archive(data, name, limits, self.kind)
        require_mimetype(members, name, self.kind, self.mimetype)
        require(members, name, self.kind, "content.xml")
        if b"encryption-data" in members.get("META-INF/manifest.xml", b""):
            raise DocumentError(
                f"{name}: encrypted (saved with a password): save it without a password"
            )
        return OpenDocument(data, name)


class OpenDocumentText(_OpenDocumentFormat):
    extensions = (".odt",)
    kind = ".odt"
    mimetype = media_type = "application/vnd.oasis.opendocument.text"


class OpenDocumentPresentation(_OpenDocumentFormat):
    extensions = (".odp",)
    kind = ".odp"
    mimetype = media_type = "application/vnd.oasis.opendocument.presentation"
