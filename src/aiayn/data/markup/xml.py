"""XML fragments (a text with the caller's own tags, as DeepL's ``tag_handling=xml`` takes
them) read into a ``Document`` and written back as XML text.

A fragment may hold text and elements side by side at its top (``Press <b>OK</b>.``): it is
read inside a root element of its own, which the writing leaves out again. It is parsed with
``defusedxml``: a document type declaration, entities and external references are refused, as
is anything not well formed, with the line and column. An element written empty in the input
(``<x id="1"/>``) is written so again; one written with an end tag (``<x id="1"></x>``, as
Weblate writes its placeholders and then looks for them verbatim) keeps its end tag.
"""

from __future__ import annotations

import functools
import re
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from aiayn.data.markup.document import Document
from aiayn.data.markup.elements import Tags
from aiayn.data.markup.html import MarkupError

XML = Tags(xml=True)  # the caller's own elements, structure found by outline detection
_ROOT = "aiayn-fragment"
_DECLARATION = re.compile(r"\A\s*<\?xml\s[^?]*\?>")
# an element written empty, <name .../>: the names written so (an attribute value holding
# ">" hides one from this, which then keeps an end tag: the same XML)
_EMPTY = re.compile(r"<([^\s<>/!?][^\s<>/]*)(?:\s[^<>]*?)?/>")


def parse(text: str, where: str = "xml", tags: Tags = XML) -> Document:
    """``text`` (an XML fragment, or a document with its declaration) as a ``Document``;
    ``MarkupError`` naming the line and column where it is not well-formed XML."""
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import DefusedXMLParser

    declaration = _DECLARATION.match(text)
    head = declaration.group() if declaration else ""
    body = text[len(head) :]
    builder = ElementTree.TreeBuilder(insert_comments=True, insert_pis=True)
    parser = DefusedXMLParser(target=builder, forbid_dtd=True)
    start = f"<{_ROOT}>"
    try:
        parser.feed(start + body + f"</{_ROOT}>")
        root = parser.close()
    except ElementTree.ParseError as e:
        line, column = e.position
        if line == 1:
            column -= len(start)
        lines = body.split("\n")
        message = str(e).split(":", 1)[0]
        at = f"line {line}, column {column + 1}"
        if line > len(lines) or (line == len(lines) and column >= len(lines[-1])):
            at, message = "at its end", f"{message}: an element left open"
        raise MarkupError(f"{where}: {at}: not well-formed XML ({message})") from None
    except DefusedXmlException as e:
        raise MarkupError(
            f"{where}: {e} (document types and entities are not read: write the characters)"
        ) from None
    empty = frozenset(_EMPTY.findall(body))
    return Document(root, functools.partial(serialize, head=head, empty=empty), tags)


def serialize(root: ElementTree.Element, head: str = "", empty: frozenset[str] = frozenset()):
    """The fragment ``root`` holds as XML text (``head``: a declaration to begin with;
    ``empty``: the names of elements to write as ``<name/>`` when they hold nothing)."""
    parts = [head, escape(root.text or "")]
    for child in root:
        parts.append(ElementTree.tostring(child, encoding="unicode", short_empty_elements=False))
    text = "".join(parts)
    if not empty:
        return text
    names = "|".join(re.escape(name) for name in sorted(empty, key=len, reverse=True))
    return re.sub(rf"<({names})(\s[^<>]*)?></\1>", r"<\1\2/>", text)
