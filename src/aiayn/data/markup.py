"""HTML through translation: its text read out as sentences, its markup put back around the
translated words.

``parse`` reads a page or a fragment with html5lib (the HTML standard's parsing algorithm, as
browsers run it). Every run of text and inline elements between block elements (a paragraph,
a heading, a list item, a table cell) is one ``Segment``, translated as a unit: a sentence
with ``<b>``, ``<a href>`` or nested ``<em><span>`` inside stays one sentence. ``render`` then
writes each translation back: an inline element encloses the target words aligned to the
source words it enclosed (word alignments from cross-attention, ``aiayn.infer.alignment``),
placed by ``_place`` so that siblings keep their order and children stay inside their parents.
No element is added, removed or moved, and no attribute is changed: the tag tree of the
output is the tag tree of the input. Comments, void elements (``<br>``, ``<img>``) and what
is never translated (``<script>``, ``<style>``, ``<code>``, ``<pre>``, anything marked
``translate="no"`` or ``class="notranslate"``) keep their place in the sentence as a point
between words. Attributes (``title``, ``alt``) are not translated.

Input the parser has to repair (an end tag that closes nothing, misnested or unclosed inline
elements, a document cut inside a tag) is refused with the line and column: what the author
meant is then unknown, and the repaired tree would not be the author's.

One module of about 500 lines, on purpose: reading (``parse``), writing back (``render``)
and cutting into sentences (``read``) share the private node model (``_Node``, ``Segment``)
and the rules of which elements are inline, void or untranslated, and change together.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from xml.etree import ElementTree

from aiayn.errors import UserError

# Phrasing elements whose words are translated with the sentence around them.
INLINE = frozenset(
    "a abbr acronym b bdi bdo big button cite data del dfn em font i ins label mark q rb rp "
    "rt rtc ruby s small span strike strong sub sup time tt u".split()
)
# Phrasing elements with no words of their own: a point in the sentence.
VOID = frozenset(
    "area audio br canvas embed iframe img input meter object picture progress source "
    "track video wbr".split()
)
# Elements never translated. Inside a sentence (the phrasing ones) they are a point in it,
# kept whole; elsewhere (the block ones) they are left as they are.
UNTRANSLATED = frozenset(
    "code kbd math noscript pre samp script select style svg template textarea var".split()
)
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
_BREAK = "\0"  # a word break that is not text (the parser never leaves a NUL in text)
_WORD = re.compile(r"[^\s\0]+")
_SENTENCE_END = re.compile(r"(?:\w{3,}|\d|\))[.!?\u2026][\"')\u201c\u201d\u00bb]*$|[!?]$")


class MarkupError(UserError):
    """HTML that cannot be translated as written (the parser would have to repair it)."""


@dataclass
class _Node:
    """An element or comment inside a segment, with the source characters it encloses
    (``start == end`` for a point: void, untranslated, comment)."""

    element: ElementTree.Element
    start: int
    end: int = -1
    point: bool = False
    children: list[_Node] = field(default_factory=list)


@dataclass
class Segment:
    """The text between two block boundaries, as translated: ``text``, its words joined by
    single spaces."""

    text: str
    _raw: str
    _words: list[tuple[int, int]]  # character spans of the words in _raw
    _slot: tuple[ElementTree.Element, str]  # where the segment's text begins: (element, attr)
    _nodes: list[_Node]

    @property
    def words(self) -> list[str]:
        return self.text.split(" ")


class Document:
    """A parsed page or fragment: its ``segments`` to translate, ``render`` to write it back."""

    def __init__(self, root: ElementTree.Element) -> None:
        self._root = root
        self.segments: list[Segment] = []
        _collect(root, self.segments)

    def render(self, translations: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> str:
        """The document with segment i's text replaced by ``translations[i]``: (target
        text, its (source word, target word) alignment pairs)."""
        if len(translations) != len(self.segments):
            raise ValueError(f"{len(translations)} translations for {len(self.segments)} segments")
        for segment, (text, pairs) in zip(self.segments, translations, strict=True):
            _write(segment, text.split(), pairs)
        self.segments = []  # written once: the tree now holds the translation
        return serialize(self._root)


def parse(html: str, where: str = "html") -> Document:
    """``html`` (a whole page when it has a doctype or an ``<html>`` tag, else a fragment of
    a body) as a ``Document``. Refuses with ``MarkupError`` what the parser had to repair."""
    import html5lib

    document = bool(_DOCUMENT.search(html[:4096]))
    builder = html5lib.getTreeBuilder("etree", fullTree=True)
    parser = html5lib.HTMLParser(tree=builder, namespaceHTMLElements=False)
    root = parser.parse(html) if document else parser.parseFragment(html)
    for (line, column), code, data in parser.errors:
        if _FATAL.search(code) and code not in _CLOSED_AT_END and "doctype" not in code:
            raise MarkupError(f"{where}: line {line}, column {column}: {_message(code, data)}")
    return Document(root)


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


# --- reading segments ---------------------------------------------------------------------


def _name(element) -> str | None:
    """The element's tag name; None for a comment or a doctype."""
    tag = element.tag
    return tag.lower() if isinstance(tag, str) and not tag.startswith("<!") else None


def _untranslated(element) -> bool:
    classes = (element.get("class") or "").split()
    return (
        _name(element) in UNTRANSLATED
        or (element.get("translate") or "").strip().lower() == "no"
        or "notranslate" in classes
    )


def _is_block(element, memo: dict) -> bool:
    """Whether ``element`` breaks the sentence around it: not phrasing, or an inline element
    that holds a block (``<a><p>...</p></a>``)."""
    key = id(element)
    if key not in memo:
        name = _name(element)
        if name is None:
            memo[key] = False
        elif name in INLINE:
            memo[key] = not _untranslated(element) and any(
                _is_block(child, memo) for child in element
            )
        else:
            memo[key] = name not in VOID and name not in UNTRANSLATED - {"pre"}
    return memo[key]


class _Builder:
    """The segment being read: raw text and the nodes in it."""

    def __init__(self, slot: tuple[ElementTree.Element, str]) -> None:
        self.slot, self.raw, self.nodes = slot, [], []
        self.length = 0

    def text(self, text: str | None) -> None:
        if text:
            self.raw.append(text)
            self.length += len(text)

    def node(self, element, into: list[_Node]) -> None:
        node = _Node(element, self.length)
        into.append(node)
        if _name(element) is None or _name(element) in VOID or _untranslated(element):
            node.end, node.point = self.length, True
            if _breaks(element):
                self.text(_BREAK)  # "Zeile<br>Zeile": two words
            return
        hidden = element.get("hidden") is not None  # another variant of the text around it
        if hidden:
            self.text(_BREAK)
        self.text(element.text)
        for child in element:
            self.node(child, node.children)
            self.text(child.tail)
        if hidden:
            self.text(_BREAK)
        node.end = self.length

    def finish(self, segments: list[Segment]) -> None:
        raw = "".join(self.raw)
        words = [m.span() for m in _WORD.finditer(raw)]
        if words:
            text = " ".join(raw[a:b] for a, b in words)
            segments.append(Segment(text, raw, words, self.slot, self.nodes))


def _collect(container, segments: list[Segment], memo: dict | None = None) -> None:
    memo = {} if memo is None else memo
    if _name(container) is None or _untranslated(container):
        return  # a doctype, or what is never translated
    builder = _Builder((container, "text"))
    builder.text(container.text)
    for child in container:
        if _is_block(child, memo):
            builder.finish(segments)
            _collect(child, segments, memo)
            builder = _Builder((child, "tail"))
        else:
            builder.node(child, builder.nodes)
        builder.text(child.tail)
    builder.finish(segments)


# --- writing translations back ------------------------------------------------------------

_EXTRA = 0.5  # the cost of enclosing a target word not aligned into the element
_DRIFT = 1e-3  # the cost per word of a point (or an element left empty) away from its anchor


def _write(segment: Segment, words: list[str], pairs: Sequence[tuple[int, int]]) -> None:
    n_src, n_tgt = len(segment._words), len(words)
    source_of = [-1] * n_tgt  # the source word of each target word (-1: none)
    for i, j in pairs:
        if 0 <= j < n_tgt and 0 <= i < n_src:
            source_of[j] = i
    starts = [a for a, _ in segment._words]
    ends = [b for _, b in segment._words]

    def after(boundary: int) -> int:
        """The target boundary after every target word aligned before source ``boundary``."""
        return 1 + max((j for j, i in enumerate(source_of) if 0 <= i < boundary), default=-1)

    def prepare(nodes: list[_Node]) -> None:
        for node in nodes:
            lo = bisect.bisect_right(ends, node.start)  # the first word ending after start
            hi = lo if node.point else bisect.bisect_left(starts, node.end)
            inside = {i for i in range(lo, hi) if _overlaps(segment._words[i], node)}
            node.mask = [int(i in inside) for i in source_of]  # type: ignore[attr-defined]
            node.anchor = after(lo)  # type: ignore[attr-defined]
            prepare(node.children)

    prepare(segment._nodes)
    _place(segment._nodes, 0, n_tgt)
    _fill(segment, words)


def _overlaps(span: tuple[int, int], node: _Node) -> bool:
    return span[0] < node.end and node.start < span[1]


def _place(nodes: list[_Node], lo: int, hi: int) -> None:
    """Give sibling ``nodes`` target spans within [lo, hi): in order, disjoint, each node's
    span contiguous. Maximises, over the siblings, the target words aligned into their node
    minus ``_EXTRA`` for each word enclosed but not aligned into it (a dynamic programme over
    boundaries, linear per node), points and nodes left empty as near their anchors as the
    order allows. Then each node's children within its own span."""
    if not nodes:
        return
    width = hi - lo + 1
    neg = float("-inf")
    reach = [0.0] * width  # best score with the nodes so far ending at or before boundary lo + p
    choices = []
    for node in nodes:
        mask = node.mask[lo:hi]  # type: ignore[attr-defined]
        counts = [0]
        for m in mask:
            counts.append(counts[-1] + m)
        score, start = [neg] * width, [0] * width
        best_open, best_at = neg, 0  # max over a < b of reach[a] - (1 + _EXTRA) C[a] + _EXTRA a
        for b in range(width):
            empty = reach[b] - _DRIFT * abs(lo + b - node.anchor)  # type: ignore[attr-defined]
            score[b], start[b] = empty, b
            if not node.point and counts[-1] and best_open > neg:
                full = best_open + (1 + _EXTRA) * counts[b] - _EXTRA * b
                if full > score[b]:
                    score[b], start[b] = full, best_at
            value = reach[b] - (1 + _EXTRA) * counts[b] + _EXTRA * b
            if value > best_open:
                best_open, best_at = value, b
        ends, running, at = [0] * width, neg, 0
        for p in range(width):  # reach: the best end at or before p
            if score[p] > running:
                running, at = score[p], p
            reach[p], ends[p] = running, at
        choices.append((start, ends))
    p = width - 1
    for node, (start, ends) in zip(reversed(nodes), reversed(choices), strict=True):
        b = ends[p]
        node.span = (lo + start[b], lo + b)  # type: ignore[attr-defined]
        p = start[b]
    for node in nodes:
        if not node.point:
            _place(node.children, *node.span)  # type: ignore[attr-defined]


def _fill(segment: Segment, words: list[str]) -> None:
    """Write ``words`` and the placed nodes' text into the tree."""
    events: list[tuple[str, object]] = []

    def walk(nodes: list[_Node], lo: int, hi: int) -> None:
        cursor = lo
        for node in nodes:
            a, b = node.span  # type: ignore[attr-defined]
            events.extend(("word", j) for j in range(cursor, a))
            if node.point:
                events.append(("point", node))
            else:
                events.append(("open", node))
                walk(node.children, a, b)
                events.append(("close", node))
            cursor = b
        events.extend(("word", j) for j in range(cursor, hi))

    walk(segment._nodes, 0, len(words))
    # One space between words (and around untranslated content), placed after the end tags
    # that follow a word and before the start tags and points that precede the next one.
    spaced: list[tuple[str, object]] = []
    wordlike_seen = broken = False  # broken: a line break (<br>, <img>) since the last word
    for kind, item in events:
        wordlike = kind == "word" or (kind == "point" and _has_text(item.element))
        if wordlike and wordlike_seen and not broken:
            at = len(spaced)
            while at and spaced[at - 1][0] in ("open", "point") and not _wordlike(spaced[at - 1]):
                at -= 1
            spaced.insert(at, ("space", None))
        if wordlike:
            wordlike_seen, broken = True, False
        elif kind in ("point", "close") and _unspaced(item.element):  # type: ignore[union-attr]
            broken = True  # after <br>, or after one variant of the text, before another
        spaced.append((kind, item))

    raw, spans = segment._raw, segment._words
    element, attr = segment._slot
    parts: dict[tuple[int, str], list[str]] = {}
    order: list[tuple[ElementTree.Element, str]] = []

    def slot(target: ElementTree.Element, name: str) -> list[str]:
        key = (id(target), name)
        if key not in parts:
            parts[key] = []
            order.append((target, name))
        return parts[key]

    current = slot(element, attr)
    current.append(raw[: spans[0][0]].replace(_BREAK, ""))  # the leading white space
    for kind, item in spaced:
        if kind == "word":
            current.append(words[item])  # type: ignore[index]
        elif kind == "space":
            current.append(" ")
        elif kind == "open":
            current = slot(item.element, "text")  # type: ignore[union-attr]
        else:  # close, point
            current = slot(item.element, "tail")  # type: ignore[union-attr]
    current.append(raw[spans[-1][1] :].replace(_BREAK, ""))  # and the trailing
    _clear(segment._nodes)
    for target, name in order:
        setattr(target, name, "".join(parts[(id(target), name)]) or None)


def _breaks(element) -> bool:
    """Whether ``element`` breaks a word it stands in: a void element (a line break, an
    image) or hidden text (one variant of the words next to it)."""
    return _name(element) in VOID - {"wbr"} or element.get("hidden") is not None


def _unspaced(element) -> bool:
    """Whether the words on either side of ``element`` are written without a space between
    them: a line break, hidden text (one variant of the words next to it)."""
    return _name(element) == "br" or element.get("hidden") is not None


def _has_text(element) -> bool:
    return bool("".join(element.itertext()).strip()) if _name(element) else False


def _wordlike(event: tuple[str, object]) -> bool:
    kind, item = event
    return kind == "point" and _has_text(item.element)  # type: ignore[union-attr]


def _clear(nodes: list[_Node]) -> None:
    for node in nodes:
        node.element.tail = None
        if not node.point:
            node.element.text = None
            _clear(node.children)


# --- documents as sentences -------------------------------------------------------------


class Sentences:
    """The sentences of ``documents`` as one list to translate (``texts``), and ``render``
    to write their translations back: each segment cut by ``pieces``, the pieces'
    translations and alignments joined end to end."""

    def __init__(self, documents: Sequence[Document], fits: Callable[[str], bool]) -> None:
        self.documents = list(documents)
        self.texts: list[str] = []
        self._plan: list[list[tuple[int, int]]] = []  # per segment: its pieces' word ranges
        for document in self.documents:
            for segment in document.segments:
                words = segment.words
                ranges = pieces(words, fits)
                self._plan.append(ranges)
                self.texts.extend(" ".join(words[a:b]) for a, b in ranges)

    def render(self, translations: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> list[str]:
        """The documents, given each text's (translation, (source word, target word) pairs)."""
        if len(translations) != len(self.texts):
            raise ValueError(f"{len(translations)} translations for {len(self.texts)} texts")
        at, k, out = 0, 0, []
        for document in self.documents:
            joined = []
            for _ in document.segments:
                words: list[str] = []
                pairs: list[tuple[int, int]] = []
                for a, _b in self._plan[k]:
                    text, piece_pairs = translations[at]
                    pairs.extend((a + i, len(words) + j) for i, j in piece_pairs)
                    words.extend(text.split())
                    at += 1
                joined.append((" ".join(words), pairs))
                k += 1
            out.append(document.render(joined))
        return out


def read(documents: Sequence[str], names: Sequence[str], fits: Callable[[str], bool]) -> Sentences:
    """``documents`` parsed (errors named by ``names``) as the ``Sentences`` to translate."""
    parsed = [parse(html, name) for html, name in zip(documents, names, strict=True)]
    return Sentences(parsed, fits)


# --- long segments ------------------------------------------------------------------------


def pieces(words: list[str], fits: Callable[[str], bool]) -> list[tuple[int, int]]:
    """``words`` cut into sentences (word ranges) as a sentence-level model reads them: a cut
    after a word that ends a sentence ("Debian." or "Wirklich?", not "z." or "Nr."); a
    sentence whose text does not ``fit`` the model, cut again at the last word that fits."""
    ends = [i + 1 for i, w in enumerate(words[:-1]) if _SENTENCE_END.search(w)] + [len(words)]
    out: list[tuple[int, int]] = []
    start = 0
    for end in ends:
        while start < end:  # the longest run from start that fits (at least one word)
            cut, lo, hi = start + 1, start + 2, end
            if fits(" ".join(words[start:end])):
                cut = end
            else:
                while lo <= hi:
                    mid = (lo + hi) // 2
                    if fits(" ".join(words[start:mid])):
                        cut, lo = mid, mid + 1
                    else:
                        hi = mid - 1
            out.append((start, cut))
            start = cut
    return out
