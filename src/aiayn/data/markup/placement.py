"""Writing a translation back into a segment: each inline element encloses the target words
aligned to the source words it enclosed (word alignments from cross-attention,
``aiayn.infer.alignment``), placed by ``place`` so that siblings keep their order and children
stay inside their parents. No element is added, removed or moved."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from xml.etree import ElementTree

from aiayn.data.markup.elements import unspaced
from aiayn.data.markup.segments import BREAK, Node, Segment

_EXTRA = 0.5  # the cost of enclosing a target word not aligned into the element
_DRIFT = 1e-3  # the cost per word of a point (or an element left empty) away from its anchor


def write(segment: Segment, words: list[str], pairs: Sequence[tuple[int, int]]) -> None:
    n_src, n_tgt = len(segment.spans), len(words)
    source_of = [-1] * n_tgt  # the source word of each target word (-1: none)
    for i, j in pairs:
        if 0 <= j < n_tgt and 0 <= i < n_src:
            source_of[j] = i
    starts = [a for a, _ in segment.spans]
    ends = [b for _, b in segment.spans]

    def after(boundary: int) -> int:
        """The target boundary after every target word aligned before source ``boundary``."""
        return 1 + max((j for j, i in enumerate(source_of) if 0 <= i < boundary), default=-1)

    def prepare(nodes: list[Node]) -> None:
        for node in nodes:
            lo = bisect.bisect_right(ends, node.start)  # the first word ending after start
            hi = lo if node.point else bisect.bisect_left(starts, node.end)
            inside = {i for i in range(lo, hi) if _overlaps(segment.spans[i], node)}
            node.mask = [int(i in inside) for i in source_of]  # type: ignore[attr-defined]
            node.anchor = after(lo)  # type: ignore[attr-defined]
            node.inside = inside  # type: ignore[attr-defined]
            prepare(node.children)

    prepare(segment.nodes)
    _place(segment.nodes, 0, n_tgt, not _own(set(range(n_src)), segment.nodes))
    _fill(segment, words)


def _own(words: set[int], nodes: list[Node]) -> bool:
    """Whether any of ``words`` (a container's) lies outside every element of ``nodes``
    (its children): text of its own, written outside them."""
    for node in nodes:
        if not node.point:
            words = words - node.inside  # type: ignore[attr-defined]
    return bool(words)


def _absorb(nodes: list[Node], lo: int, hi: int) -> None:
    """Give the target words ``_place`` left between sibling ``nodes`` (within [lo, hi)) to
    the element before them, or, at the start or after a point, the element after: in a
    container whose source words all lay inside its elements (every run of a paragraph in a
    ``<span>`` of its own style, as LibreOffice writes them), a word outside them all would
    lose the style every word had. Between two elements the words go to the one whose look
    (tag and attributes) held the most source words, as a run of plain text would be
    plain. Elements that held no words (an anchor) take none."""

    def takes(node: Node | None) -> bool:
        return node is not None and not node.point and bool(node.inside)  # type: ignore[attr-defined]

    def look(node: Node) -> tuple:
        return (node.element.tag, sorted(node.element.attrib.items()))

    weight: dict[tuple, int] = {}  # the words each look (tag and attributes) held
    for node in nodes:
        if takes(node):
            key = repr(look(node))
            weight[key] = weight.get(key, 0) + len(node.inside)  # type: ignore[attr-defined]

    def heavier(a: Node, b: Node) -> bool:
        return weight[repr(look(a))] >= weight[repr(look(b))]

    cursor, previous = lo, None
    for node in nodes:
        a, b = node.span  # type: ignore[attr-defined]
        if a > cursor:  # words between the previous sibling and this one: to the look most
            # words had, the previous one on a tie
            if takes(previous) and (not takes(node) or heavier(previous, node)):
                previous.span = (previous.span[0], a)  # type: ignore[attr-defined,union-attr]
            elif takes(node):
                node.span = (cursor, b)  # type: ignore[attr-defined]
        cursor, previous = node.span[1], node  # type: ignore[attr-defined]
    if hi > cursor and previous is not None and takes(previous):
        previous.span = (previous.span[0], hi)  # type: ignore[attr-defined]


def _overlaps(span: tuple[int, int], node: Node) -> bool:
    return span[0] < node.end and node.start < span[1]


def _place(nodes: list[Node], lo: int, hi: int, fill: bool = False) -> None:
    """Give sibling ``nodes`` target spans within [lo, hi): in order, disjoint, each node's
    span contiguous. Maximises, over the siblings, the target words aligned into their node
    minus ``_EXTRA`` for each word enclosed but not aligned into it (a dynamic programme over
    boundaries, linear per node), points and nodes left empty as near their anchors as the
    order allows; ``fill``: the container had no words of its own, and the words between
    the nodes go into them (``_absorb``). Then each node's children within its own span."""
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
    if fill:
        _absorb(nodes, lo, hi)
    for node in nodes:
        if not node.point:
            inside = node.inside  # type: ignore[attr-defined]
            _place(node.children, *node.span, not _own(inside, node.children))  # type: ignore[attr-defined]


def _fill(segment: Segment, words: list[str]) -> None:
    """Write ``words`` and the placed nodes' text into the tree."""
    events: list[tuple[str, object]] = []

    def walk(nodes: list[Node], lo: int, hi: int) -> None:
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

    walk(segment.nodes, 0, len(words))
    # One space between words (and around untranslated content), placed after the end tags
    # that follow a word and before the start tags and points that precede the next one.
    # A point written against a word in the source (a note's mark "Zeit.<sup>1</sup>", a
    # tab "a<tab>b") stays against the word written there: no space on that side.
    glued = _glued(segment.raw, list(_points(segment.nodes)))
    spaced: list[tuple[str, object]] = []
    wordlike_seen = broken = False  # broken: a line break (<br>, <img>) since the last word
    last: tuple[str, object] | None = None  # the last word or point with text
    for kind, item in events:
        wordlike = kind == "word" or (kind == "point" and item.word)  # type: ignore[union-attr]
        if wordlike and wordlike_seen and not broken:
            at = len(spaced)
            while at and spaced[at - 1][0] in ("open", "point") and not _wordlike(spaced[at - 1]):
                at -= 1
            between = [i for i in range(at, len(spaced)) if spaced[i][0] == "point"]
            sides = [glued[id(spaced[i][1])] for i in between]
            if (
                kind == "point"
                and glued[id(item)][0]
                or last[0] == "point"
                and glued[id(last[1])][1]
            ):
                at = None  # a point against the word before, or a word against the point
            elif any(before and after for before, after in sides):
                at = None  # a tab between two words: it is their space
            else:  # after the points against the word before
                at = next(
                    (
                        i + 1
                        for i, (before, _) in zip(between[::-1], sides[::-1], strict=True)
                        if before
                    ),
                    at,
                )
            if at is not None:
                spaced.insert(at, ("space", None))
        if wordlike:
            wordlike_seen, broken = True, False
            last = (kind, item)
        elif kind in ("point", "close") and unspaced(item.element):  # type: ignore[union-attr]
            broken = True  # after <br>, or after one variant of the text, before another
        spaced.append((kind, item))
    _space_edges(spaced, glued)

    raw, spans = segment.raw, segment.spans
    # the white space before the first word or point, and after the last
    lead = min([spans[0][0]] + [n.start for n in segment.nodes])
    trail = max([spans[-1][1]] + [n.end for n in segment.nodes])
    element, attr = segment.slot
    parts: dict[tuple[int, str], list[str]] = {}
    order: list[tuple[ElementTree.Element, str]] = []

    def slot(target: ElementTree.Element, name: str) -> list[str]:
        key = (id(target), name)
        if key not in parts:
            parts[key] = []
            order.append((target, name))
        return parts[key]

    current = slot(element, attr)
    current.append(raw[:lead].replace(BREAK, ""))  # the leading white space
    for kind, item in spaced:
        if kind == "word":
            current.append(words[item])  # type: ignore[index]
        elif kind == "space":
            current.append(" ")
        elif kind == "open":
            current = slot(item.element, "text")  # type: ignore[union-attr]
        else:  # close, point
            current = slot(item.element, "tail")  # type: ignore[union-attr]
    current.append(raw[trail:].replace(BREAK, ""))  # and the trailing
    _clear(segment.nodes)
    for target, name in order:
        setattr(target, name, "".join(parts[(id(target), name)]) or None)


def _space_edges(spaced: list, glued: dict) -> None:
    """A space between the first word and a point before it (``<img> Text``), and between
    the last word and a point after it, where the source had white space there."""
    words = [i for i, event in enumerate(spaced) if event[0] == "word" or _wordlike(event)]
    if not words:
        return
    after = [i for i in range(words[-1] + 1, len(spaced)) if spaced[i][0] == "point"]
    if after:
        node = spaced[after[0]][1]
        if not unspaced(node.element) and not glued[id(node)][0]:
            spaced.insert(after[0], ("space", None))
    before = [i for i in range(words[0]) if spaced[i][0] == "point"]
    if before:
        node = spaced[before[-1]][1]
        if not unspaced(node.element) and not glued[id(node)][1]:
            spaced.insert(before[-1] + 1, ("space", None))


def _points(nodes: list[Node]):
    for node in nodes:
        if node.point:
            yield node
        else:
            yield from _points(node.children)


def _glued(raw: str, points: list[Node]) -> dict[int, tuple[bool, bool]]:
    """For each point of ``points`` (by ``id``): whether the source wrote it against a word
    before it, and after it (no white space between them; the breaks of the points after it
    passed over, a run of them found once, not once for each of its points)."""
    runs = [(m.start(), m.end()) for m in re.finditer(BREAK + "+", raw)]
    starts = [a for a, _ in runs]
    out = {}
    for node in points:
        before = raw[node.start - 1] if node.start > 0 else " "
        at, k = node.start, bisect.bisect_right(starts, node.start) - 1
        if k >= 0 and at < runs[k][1]:  # in a run of breaks: past it
            at = runs[k][1]
        after = raw[at] if at < len(raw) else " "
        out[id(node)] = (not before.isspace() and before != BREAK, not after.isspace())
    return out


def _wordlike(event: tuple[str, object]) -> bool:
    kind, item = event
    return kind == "point" and item.word  # type: ignore[union-attr]


def _clear(nodes: list[Node]) -> None:
    for node in nodes:
        node.element.tail = None
        if not node.point:
            node.element.text = None
            _clear(node.children)
