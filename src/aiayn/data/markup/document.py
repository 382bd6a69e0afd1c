"""A tree's segments as one unit of translation (``Document``), several documents' segments
cut into sentences as one list of texts (``Sentences``), and the cutting itself (``pieces``).

A ``Document`` holds any tree of elements: one html5lib read from a page (``parse``), or one a
document format builds for a paragraph, its runs of bold or linked words as inline elements
(``aiayn.documents``). ``write`` puts the translations into the tree; ``render`` also turns
the tree back into text, with the function its reader gave (``serialize`` for HTML).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from xml.etree import ElementTree

from aiayn.data.markup.elements import HTML, Tags
from aiayn.data.markup.placement import write
from aiayn.data.markup.segments import Segment, collect
from aiayn.data.terminology import placeholders

_SENTENCE_END = re.compile(r"(?:\w{3}|\d|\))[.!?\u2026][\"')\u201c\u201d\u00bb]*$|[!?]$")
Translations = Sequence[tuple[str, Sequence[tuple[int, int]]]]


class Document:
    """A tree (``root``): its ``segments`` to translate, ``write`` or ``render`` to put their
    translations back; ``tags``: which of its elements break sentences or are never
    translated, over the HTML rules (``aiayn.data.markup.elements.Tags``)."""

    def __init__(
        self,
        root: ElementTree.Element,
        serialize: Callable[[ElementTree.Element], str] | None = None,
        tags: Tags = HTML,
    ) -> None:
        self.root = root
        self._serialize = serialize
        self.segments: list[Segment] = []
        collect(root, self.segments, tags=tags)

    def write(self, translations: Translations) -> ElementTree.Element:
        """The tree with segment i's text replaced by ``translations[i]``: (target text, its
        (source word, target word) alignment pairs)."""
        if len(translations) != len(self.segments):
            raise ValueError(f"{len(translations)} translations for {len(self.segments)} segments")
        for segment, (text, pairs) in zip(self.segments, translations, strict=True):
            write(segment, text.split(), pairs)
        self.segments = []  # written once: the tree now holds the translation
        return self.root

    def render(self, translations: Translations) -> str:
        """``write``, then the tree as text (the serializer the document was read with)."""
        if self._serialize is None:
            raise ValueError("this document was read without a serializer: use write")
        return self._serialize(self.write(translations))


# Writing a segment back costs time and memory in proportion to its inline elements times its
# words (each element's words are found among all the target words): bounded per segment.
MAX_PLACEMENT = 1_000_000


def crowded(document: Document) -> str | None:
    """Why ``document`` cannot be written back at a bounded cost (None: it can): a segment
    whose inline elements times words pass ``MAX_PLACEMENT`` (a paragraph of 150,000 words
    and line breaks would take hundreds of gigabytes)."""
    for segment in document.segments:
        elements = _count(segment.nodes)
        if elements * len(segment.spans) > MAX_PLACEMENT:
            return (
                f"a paragraph of {len(segment.spans)} words holds {elements} inline elements "
                f"(tags, line breaks, pictures): at most {MAX_PLACEMENT:,} words times "
                "elements in one paragraph; split it into paragraphs"
            )
    return None


def _count(nodes) -> int:
    return sum(1 + _count(node.children) for node in nodes)


class Sentences:
    """The sentences of ``documents`` as one list to translate (``texts``), and ``write`` or
    ``render`` to put their translations back: each segment cut by ``pieces``, the pieces'
    translations and alignments joined end to end."""

    def __init__(
        self,
        documents: Sequence[Document],
        fits: Callable[[str], bool],
        keep: Sequence[str] | None = None,
    ) -> None:
        self.documents = list(documents)
        self.texts: list[str] = []
        self._plan: list[list[tuple[int, int]]] = []  # per segment: its pieces' word ranges
        for document in self.documents:
            for segment in document.segments:
                words = segment.words
                ranges = pieces(words, fits, kept_joins(words, keep) if keep else frozenset())
                self._plan.append(ranges)
                self.texts.extend(" ".join(words[a:b]) for a, b in ranges)

    def _joined(self, translations: Translations) -> list[list[tuple[str, list]]]:
        """Per document, its segments' translations (pieces joined)."""
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
            out.append(joined)
        return out

    def write(self, translations: Translations) -> list[ElementTree.Element]:
        """The documents' trees, given each text's (translation, (source word, target word)
        pairs)."""
        joined = self._joined(translations)
        return [d.write(j) for d, j in zip(self.documents, joined, strict=True)]

    def render(self, translations: Translations) -> list[str]:
        """The documents as text (``write``, then each document's serializer)."""
        joined = self._joined(translations)
        return [d.render(j) for d, j in zip(self.documents, joined, strict=True)]


def kept_joins(words: Sequence[str], keep: Sequence[str]) -> frozenset[int]:
    """Where ``words`` may not be cut (``i``: between words ``i - 1`` and ``i``): inside a span
    one of ``keep`` (regular expressions) matches in their text, which a cut would leave
    whole in neither sentence ("{% trans 'Hallo!' %}" after its "!")."""
    text = " ".join(words)
    starts, at = [], 0  # each word's position in the text
    for word in words:
        starts.append(at)
        at += len(word) + 1
    out: set[int] = set()
    for span in placeholders(text, keep):
        first = bisect.bisect_right(starts, span.start)  # the word after the one it begins in
        last = bisect.bisect_left(starts, span.end)  # the first word at or after its end
        out.update(range(first, last))
    return frozenset(out)


def pieces(
    words: list[str],
    fits: Callable[[str], bool],
    glued: frozenset[int] = frozenset(),
    ends: Sequence[int] | None = None,
) -> list[tuple[int, int]]:
    """``words`` cut into sentences (word ranges) as a sentence-level model reads them: a cut
    after a word that ends a sentence ("Debian." or "Wirklich?", not "z." or "Nr."), or, given
    ``ends``, after each word they name (``i``: between words ``i - 1`` and ``i``: where a
    sentence splitter of the model's own ended a sentence); a sentence whose text does not
    ``fit`` the model, cut again at the last word that fits; never at a position of ``glued``
    (``kept_joins``) where another cut may be made.

    Once a sentence does not fit, each piece is found by doubling its length until it does
    not fit, then halving the difference: the texts ``fits`` reads are at most twice the
    piece, not the rest of the sentence (a paragraph of a million characters without a full
    stop would otherwise be read again for every piece)."""
    if ends is None:
        ends = [i + 1 for i, w in enumerate(words[:-1]) if _SENTENCE_END.search(w)]
    ends = [i for i in ends if 0 < i < len(words) and i not in glued] + [len(words)]
    out: list[tuple[int, int]] = []
    start = 0
    for end in ends:
        if fits(" ".join(words[start:end])):
            out.append((start, end))
            start = end
            continue
        while start < end:  # the longest run from start that fits (at least one word)
            cut, size = start + 1, 2
            bad = end + 1  # the shortest run known not to fit, as its end
            while start + size <= end:
                if not fits(" ".join(words[start : start + size])):
                    bad = start + size
                    break
                cut, size = start + size, size * 2
            if bad > end and cut < end:  # the rest may fit
                if fits(" ".join(words[start:end])):
                    cut = end
                else:
                    bad = end
            lo, hi = cut + 1, bad - 1
            while lo <= hi:
                mid = (lo + hi) // 2
                if fits(" ".join(words[start:mid])):
                    cut, lo = mid, mid + 1
                else:
                    hi = mid - 1
            if cut in glued:  # the last cut before it that is free, if there is one
                cut = next((c for c in range(cut - 1, start, -1) if c not in glued), cut)
            out.append((start, cut))
            start = cut
    return out
