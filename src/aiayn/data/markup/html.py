"""HTML read with html5lib (the HTML standard's parsing algorithm, as browsers run it) into a
``Document``, and written back as HTML text.

Input the parser has to repair (an end tag that closes nothing, misnested or unclosed inline
elements, a document cut inside a tag) is refused with the line and column: what the author
meant is then unknown, and the repaired tree would not be the author's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from xml.etree import ElementTree

from aiayn.data.markup.document import Document, Sentences, crowded
from aiayn.data.markup.elements import HTML, Tags
from aiayn.errors import UserError

# What the parser repairs by moving or dropping markup (a stray or misnested end tag, a tag cut
# by the end of the input). Elements left open at the end are closed there, as the author of a
# fragment means: not refused.
_FATAL = re.compile(r"end-tag|adoption-agency|trailing-solidus|eof-in-|but-got-eof")
_CLOSED_AT_END = frozenset(
    ("expected-closing-tag-but-got-eof", "expected-named-closing-tag-but-got-eof")
)
_MESSAGES = {
    "unexpected-end-tag": "end tag </{name}> closes no element open here (a stray end tag, or "
    "an element inside it left open)",
    "adoption-agency": "end tag </{name}> crosses another open element (misnested tags, as in "
    "<b><i></b></i>)",
    "unexpected-start-tag-implies-end-tag": "<{startName}> cannot stand inside <{endName}>: "
    "the parser would close <{endName}> first",
    "non-void-element-with-trailing-solidus": "<{name}/>: only void elements (br, img, ...) "
    "close themselves; write <{name}></{name}>",
}
_DOCUMENT = re.compile(r"<!doctype|<html[\s>]|<\?xml", re.IGNORECASE)


class MarkupError(UserError):
    """HTML that cannot be translated as written (the parser would have to repair it)."""


def parse(html: str, where: str = "html", tags: Tags = HTML) -> Document:
    """``html`` (a whole page when it has a doctype or an ``<html>`` tag, else a fragment of
    a body) as a ``Document`` (``tags``: the caller's rules over HTML's). Refuses with
    ``MarkupError`` what the parser had to repair."""
    import html5lib

    document = bool(_DOCUMENT.search(html[:4096]))
    builder = html5lib.getTreeBuilder("etree", fullTree=True)
    parser = html5lib.HTMLParser(tree=builder, namespaceHTMLElements=False)
    root = parser.parse(html) if document else parser.parseFragment(html)
    for (line, column), code, data in parser.errors:
        if _FATAL.search(code) and code not in _CLOSED_AT_END and "doctype" not in code:
            raise MarkupError(f"{where}: line {line}, column {column}: {_message(code, data)}")
    return Document(root, serialize, tags)


def serialize(root: ElementTree.Element) -> str:
    """A tree as HTML text (every end tag written, attribute values quoted)."""
    from html5lib import getTreeWalker
    from html5lib.serializer import HTMLSerializer

    serializer = HTMLSerializer(
        omit_optional_tags=False,
        quote_attr_values="always",
        minimize_boolean_attributes=False,
        inject_meta_charset=False,
    )
    return serializer.render(getTreeWalker("etree")(root))


def _message(code: str, data: dict | None) -> str:
    from html5lib.constants import E

    template = _MESSAGES.get("adoption-agency" if code.startswith("adoption-agency") else code)
    if template is not None:
        try:
            return template.format(**(data or {}))
        except (KeyError, IndexError):
            pass
    try:
        text = E.get(code, code) % (data or {})
    except (KeyError, TypeError, ValueError):
        text = E.get(code, code)
    return text.removesuffix(" Ignored.").rstrip(".")


def read(
    documents: Sequence[str],
    names: Sequence[str],
    fits: Callable[[str], bool],
    keep: Sequence[str] | None = None,
    tags: Tags = HTML,
    parser: Callable[[str, str, Tags], Document] = parse,
    translatable: Callable[[str], bool] | None = None,
) -> Sentences:
    """``documents`` parsed (errors named by ``names``; HTML, or XML with ``parser``
    ``aiayn.data.markup.xml.parse``) as the ``Sentences`` to translate (a span ``keep``
    matches not cut between two; ``tags``: the caller's rules; a segment ``translatable``
    refuses, one without a letter say, is left as it is)."""
    parsed = [parser(text, name, tags) for text, name in zip(documents, names, strict=True)]
    for document, name in zip(parsed, names, strict=True):
        if translatable is not None:
            document.segments = [s for s in document.segments if translatable(s.text)]
        why = crowded(document)
        if why:
            raise MarkupError(f"{name}: {why}")
    return Sentences(parsed, fits, keep)
