"""Text with inline markup through translation: its text read out as sentences, its markup put
back around the translated words.

A tree of elements (read from HTML by ``parse``, or built by a document format for a
paragraph and its runs) is cut into segments: every run of text and inline elements between
block elements (a paragraph, a heading, a list item, a table cell) is one ``Segment``,
translated as a unit: a sentence with ``<b>``, ``<a href>`` or nested ``<em><span>`` inside
stays one sentence. Writing back, an inline element encloses the target words aligned to the
source words it enclosed (word alignments from cross-attention, ``aiayn.infer.alignment``),
so that siblings keep their order and children stay inside their parents. No element is
added, removed or moved, and no attribute is changed: the tag tree of the output is the tag
tree of the input. Comments, void elements (``<br>``, ``<img>``) and what is never translated
(``<script>``, ``<style>``, ``<code>``, ``<pre>``, anything marked ``translate="no"`` or
``class="notranslate"``) keep their place in the sentence as a point between words.
Attributes (``title``, ``alt``) are not translated.

The modules, by concern: ``elements`` (which elements are inline, void, untranslated),
``segments`` (reading a tree into segments), ``placement`` (writing a translation back into
a segment), ``document`` (a tree's segments; many documents' sentences as one list of texts),
``html`` (HTML read with html5lib and written back; what the parser would repair is refused),
``xml`` (XML fragments with the caller's own tags, as DeepL's ``tag_handling=xml`` takes them).
``Tags`` says what a caller's tags mean over the HTML rules (DeepL's ``splitting_tags``,
``non_splitting_tags``, ``ignore_tags``, ``outline_detection``).
"""

from aiayn.data.markup.document import Document, Sentences, pieces
from aiayn.data.markup.elements import HTML, INLINE, UNTRANSLATED, VOID, Tags
from aiayn.data.markup.html import MarkupError, parse, read, serialize
from aiayn.data.markup.segments import Segment

__all__ = [
    "HTML",
    "INLINE",
    "UNTRANSLATED",
    "VOID",
    "Document",
    "MarkupError",
    "Segment",
    "Sentences",
    "Tags",
    "parse",
    "pieces",
    "read",
    "serialize",
]
