"""PowerPoint presentations (.pptx) read and written with python-pptx.

Every slide's text a reader sees: text boxes and placeholders, shapes inside groups, table
cells, a chart's titles, and the slide's notes. Each paragraph is one text; its runs (bold, italic, a
hyperlink, a colour) are inline elements for ``aiayn.data.markup``, each coming back around
the words translated from its own (``Runs``). A line break and a field (a slide number, a
date: left as it is, its text not translated) are points between words, kept where the
words around them went.
"""

from __future__ import annotations

import io

from aiayn.data.markup import Document
from aiayn.documents.base import DocumentError, Limits, Point, Runs
from aiayn.documents.safety import open_archive, require

_DRAWING = "http://schemas.openxmlformats.org/drawingml/2006/main"
_BR = f"{{{_DRAWING}}}br"
_POINTS = {_BR: "br", f"{{{_DRAWING}}}fld": "img"}  # kept, never rewritten
_SKIPPED_KEY = {"lang", "altLang", "dirty", "err", "noProof", "smtClean"}  # look the same


class SlidesDocument:
    def __init__(self, data: bytes, name: str) -> None:
        import pptx

        self._presentation = pptx.Presentation(io.BytesIO(data))
        self._paragraphs: list[tuple[Runs, list]] = []
        from pptx.opc.constants import RELATIONSHIP_TYPE

        for slide in self._presentation.slides:
            self._read(slide.part._element)  # every a:p of the slide: shapes, groups, tables
            for rel in slide.part.rels.values():  # a chart's titles (its own part)
                if rel.reltype == RELATIONSHIP_TYPE.CHART and not rel.is_external:
                    self._read(rel.target_part._element)
            if slide.has_notes_slide:
                self._read(slide.notes_slide.part._element)
        self.documents = [Document(runs.root) for runs, _ in self._paragraphs]

    def _read(self, element) -> None:
        from pptx.text.text import _Run

        r_tag = f"{{{_DRAWING}}}r"
        for p in element.iter(f"{{{_DRAWING}}}p"):
            runs, texts = [], []
            for child in p.iterchildren(r_tag, *_POINTS):
                if child.tag == r_tag:
                    run = _Run(child, None)
                    runs.append(run)
                    texts.append((run.text, _key(child)))
                else:  # a line break, a field: a point between the runs around it
                    runs.append(None)
                    shown = "".join(child.itertext()).strip() if child.tag != _BR else ""
                    # a field shows text (a slide number): spaced as a word is
                    texts.append(Point("img", shown) if shown else Point(_POINTS[child.tag]))
            if any(not isinstance(t, Point) and t[0].strip() for t in texts):
                self._paragraphs.append((Runs(texts), runs))

    def save(self) -> bytes:
        for paragraph, runs in self._paragraphs:
            for run, text in zip(runs, paragraph.texts(), strict=True):
                if run is not None and run.text != text:
                    run.text = text
        out = io.BytesIO()
        self._presentation.save(out)
        return out.getvalue()


def _key(r) -> bytes:
    """What a run looks like: its properties (a link among them), less those that only split
    runs (spelling language, proofing marks)."""
    from lxml import etree

    props = r.find(f"{{{_DRAWING}}}rPr")
    if props is None:
        return b""
    attributes = sorted((k, v) for k, v in props.attrib.items() if k not in _SKIPPED_KEY)
    return repr(attributes).encode() + b"".join(etree.tostring(child) for child in props)


class Slides:
    extensions = (".pptx",)
    media_type = "application/vnd.openxmlformats-officedocument.presentationml.presentation"

    def open(self, data: bytes, name: str, limits: Limits) -> SlidesDocument:
        members = open_archive(data, name, limits, ".pptx")
        require(members, name, ".pptx", "[Content_Types].xml", "ppt/presentation.xml")
        if b"presentationml.presentation" not in members["[Content_Types].xml"]:
            raise DocumentError(f"{name}: not a .pptx: its content types name no presentation")
        return SlidesDocument(data, name)
