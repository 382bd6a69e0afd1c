"""Word documents (.docx) read and written with python-docx.

Every part a reader sees: the body (its tables and lists included, nested tables too), every
header and footer (first page, even pages), footnotes, endnotes and comments. Each paragraph
is one text; its runs (bold, italic, a hyperlink's runs, a style) are inline elements for
``aiayn.data.markup``, so each comes back around the words translated from its own
(``Runs``); a tab or a line or page break is a point between words, kept where the words
around it went. A run holding more than text (a picture, a footnote mark, words a tracked
change deleted) and a field's result (a page number, a date: Word's to compute) are left as
they are, each a point kept where the words around it went; a hyperlink field's result is
its text, translated as a link's, and the runs a tracked change inserted are an inline
element of their own.
"""

from __future__ import annotations

import io

from aiayn.data.markup import Document
from aiayn.documents.base import DocumentError, Limits, Point, Runs
from aiayn.documents.safety import open_archive, require

# what may stand in a run whose text python-docx rewrites (anything else stays untouched)
_TEXT_ONLY = {"rPr", "t", "tab", "br", "cr", "noBreakHyphen", "softHyphen", "lastRenderedPageBreak"}
# of those, the points between words (a tab, a line, column or page break): each split into
# a run of its own, kept as it is where the words around it went
_POINTS = {"tab": "img", "br": "br", "cr": "br"}
_SKIPPED_KEY = {"lang", "noProof", "rFonts", "szCs", "bCs", "iCs"}  # split runs, look the same
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_PARTS = ("document.main", "header", "footer", "footnotes", "endnotes", "comments")


class WordDocument:
    def __init__(self, data: bytes, name: str) -> None:
        import docx
        from docx.oxml.parser import parse_xml

        self._document = docx.Document(io.BytesIO(data))
        self._raw_parts = []  # parts python-docx keeps as bytes (footnotes, endnotes)
        self._paragraphs: list[tuple[Runs, list]] = []
        for part in self._document.part.package.iter_parts():
            if not any(f"wordprocessingml.{kind}+xml" in part.content_type for kind in _PARTS):
                continue
            element = getattr(part, "element", None)
            if element is None:  # a part python-docx has no class for: parsed here
                element = parse_xml(part.blob)
                self._raw_parts.append((part, element))
            self._read(element)
        self.documents = [Document(runs.root) for runs, _ in self._paragraphs]

    def _read(self, element) -> None:
        from docx.oxml.ns import qn
        from docx.text.run import Run

        p_tag, r_tag = qn("w:p"), qn("w:r")
        fields: list[_Field] = []  # the complex fields open here (one may span paragraphs)
        for p in element.iter(p_tag):
            runs, texts = [], []
            shown: set[int] = set()  # the fields already a point in this paragraph
            for whole in list(p.iter(r_tag)):
                if _owner(whole, p_tag) is not p:
                    continue
                kind, field = _field_of(whole, fields)
                if kind == "control":
                    continue
                if kind == "result":  # one point for the whole result, shown as a word is
                    if id(field) not in shown:
                        shown.add(id(field))
                        texts.append(Point("img", "field"))
                        runs.append(None)
                    continue
                if not all(_local(child.tag) in _TEXT_ONLY for child in whole) or _removed(whole):
                    if _visible(whole):  # a picture, a note's mark, deleted words: in place
                        texts.append(Point("img"))
                        runs.append(None)
                    continue
                for r in _split(whole):
                    point = next(
                        (_POINTS[_local(c.tag)] for c in r if _local(c.tag) in _POINTS), None
                    )
                    if point is not None:
                        texts.append(Point(point))
                        runs.append(None)
                    else:
                        run = Run(r, None)
                        runs.append(run)
                        texts.append((run.text, (field, *_key(r))))
            if any(not isinstance(t, Point) and t[0].strip() for t in texts):
                self._paragraphs.append((Runs(texts), runs))

    def save(self) -> bytes:
        from docx.opc.oxml import serialize_part_xml

        for paragraph, runs in self._paragraphs:
            for run, text in zip(runs, paragraph.texts(), strict=True):
                if run is not None and run.text != text:
                    run.text = text
        for part, element in self._raw_parts:
            part._blob = serialize_part_xml(element)  # what Part.blob gives back
        out = io.BytesIO()
        self._document.save(out)
        return out.getvalue()


def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _split(r) -> list:
    """The text-only run ``r`` as runs of its text and runs of one point each (``_POINTS``),
    each with a copy of its properties, in its place (``[r]``: no point, or only one)."""
    from copy import deepcopy

    pieces: list[list] = []
    for child in r:
        local = _local(child.tag)
        if local == "rPr":
            continue
        if local in _POINTS or not pieces or _local(pieces[-1][0].tag) in _POINTS:
            pieces.append([child])
        else:
            pieces[-1].append(child)
    if len(pieces) <= 1:
        return [r]
    props = r.find("{http://schemas.openxmlformats.org/wordprocessingml/2006/main}rPr")
    out = []
    for piece in pieces:
        new = r.makeelement(r.tag, r.attrib)
        if props is not None:
            new.append(deepcopy(props))
        new.extend(piece)  # moved out of r
        r.addprevious(new)
        out.append(new)
    r.getparent().remove(r)
    return out


class _Field:
    """A complex field open among the runs: its instruction (``PAGE``, ``HYPERLINK
    "https://..."``) and whether its result has begun."""

    def __init__(self) -> None:
        self.instruction, self.result = "", False


def _field_of(r, fields: list[_Field]):
    """What the run ``r`` is to the fields around it, after following the field characters
    it holds (``fields``: the complex fields open before it, updated): ``("control", None)``
    a field's characters or instruction (no text: kept as it is); ``("result", owner)`` a
    field's result, Word's to compute (a page number, a date, a table of contents: kept as
    it is, a point among the words); ``("link", owner)`` a hyperlink field's result, its
    text translated as a link's; ``(None, None)`` none. ``owner``: the field (the same for
    all its runs)."""
    simple = next((a for a in r.iterancestors() if _local(a.tag) == "fldSimple"), None)
    if simple is not None:
        link = (simple.get(_W + "instr") or "").split()[:1] == ["HYPERLINK"]
        return ("link" if link else "result"), simple
    control = False
    for child in r:
        local = _local(child.tag)
        if local == "fldChar":
            control = True
            kind = child.get(_W + "fldCharType")
            if kind == "begin":
                fields.append(_Field())
            elif kind == "separate" and fields:
                fields[-1].result = True
            elif kind == "end" and fields:
                fields.pop()
        elif local == "instrText" and fields:
            control = True
            fields[-1].instruction += child.text or ""
    if control or (fields and not fields[0].result):
        return "control", None
    if not fields:
        return None, None
    outer = fields[0]
    link = len(fields) == 1 and outer.instruction.split()[:1] == ["HYPERLINK"]
    return ("link" if link else "result"), outer


def _removed(r) -> bool:
    """Whether ``r`` is deleted or moved away by a tracked change (its text a reader of the
    changes sees struck out)."""
    return any(_local(a.tag) in ("del", "moveFrom") for a in r.iterancestors())


def _visible(r) -> bool:
    """Whether a run that is not text holds something a reader sees (not only properties
    or a rendering hint)."""
    return any(_local(c.tag) not in ("rPr", "lastRenderedPageBreak") for c in r)


def _owner(r, p_tag):
    """The paragraph a run belongs to (a text box's paragraphs hold their own runs)."""
    return next(r.iterancestors(p_tag), None)


def _key(r):
    """What a run looks like: its properties (less those that only split runs) and the link
    it is in."""
    from lxml import etree

    link = next(
        (a for a in r.iterancestors() if _local(a.tag) in ("hyperlink", "ins", "moveTo")), None
    )
    props = r.find("{http://schemas.openxmlformats.org/wordprocessingml/2006/main}rPr")
    shown = b""
    if props is not None:
        shown = b"".join(
            etree.tostring(child) for child in props if _local(child.tag) not in _SKIPPED_KEY
        )
    return (link, shown)  # the element itself: an id() of lxml's proxy is reused once freed


class Word:
    extensions = (".docx",)
    media_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

    def open(self, data: bytes, name: str, limits: Limits) -> WordDocument:
        members = open_archive(data, name, limits, ".docx")
        require(members, name, ".docx", "[Content_Types].xml", "word/document.xml")
        if b"wordprocessingml.document" not in members["[Content_Types].xml"]:
            raise DocumentError(f"{name}: not a .docx: its content types name no Word document")
        return WordDocument(data, name)
