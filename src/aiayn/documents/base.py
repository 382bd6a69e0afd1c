"""What every document format shares: the error, the limits, the interface (``Opened``), and
``Runs``: a paragraph of formatted runs as a tree of inline elements for
``aiayn.data.markup``, and the runs' new texts read back from it."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol
from xml.etree import ElementTree

from aiayn.config.fields import _check_int
from aiayn.data.markup import Document
from aiayn.errors import UserError


class DocumentError(UserError):
    """A file that cannot be translated as it is: damaged, encrypted, too large, hostile (an
    archive that inflates past its limit, XML declaring entities), or not the format its
    name says. The message names the file and the problem."""


@dataclass(frozen=True)
class Limits:
    """What a document may take, whoever reads it (the server's are flags of ``aiayn
    serve``): the file's bytes, its archive's members and their bytes once inflated (an
    archive's declared sizes are never trusted), and the characters of its text."""

    max_bytes: int = 50_000_000
    max_inflated: int = 200_000_000
    max_members: int = 5000
    max_chars: int = 2_000_000

    def __post_init__(self) -> None:
        _check_int("max_bytes", self.max_bytes, 1)
        _check_int("max_inflated", self.max_inflated, 1)
        _check_int("max_members", self.max_members, 1)
        _check_int("max_chars", self.max_chars, 1)


class Opened(Protocol):
    """A document read by its format: ``documents``, the trees whose segments are
    translated (``aiayn.data.markup.Document``); once their translations are written into
    them, ``save`` gives the file's bytes. A format whose documents declare their language
    also has ``mark_language(code)``, called before ``save``."""

    documents: list[Document]

    def save(self) -> bytes: ...


class Format(Protocol):
    """One format: the name endings it takes (".docx") and how it opens bytes."""

    extensions: tuple[str, ...]
    media_type: str

    def open(self, data: bytes, name: str, limits: Limits) -> Opened: ...


def leaf(text: str, tag: str = "p") -> ElementTree.Element:
    """A tree of one block holding ``text`` (no markup)."""
    root = ElementTree.Element(tag)
    root.text = text
    return root


def tree_text(root: ElementTree.Element) -> str:
    """All the text of a tree, in order (its translation once written)."""
    return "".join(root.itertext())


@dataclass(frozen=True, eq=False)
class Point:
    """A point among a paragraph's runs (a line break, a tab, a field): an element ``tag``
    of the tree (``br``: a line break; ``img``: anything else that breaks the words around
    it), kept where the words around it went and never rewritten; ``text``: what it shows
    (a field's number), which the model never sees but which is spaced as a word is."""

    tag: str
    text: str = ""


class Runs:
    """A paragraph as runs of text, each with a formatting ``key`` (equal keys: the same
    formatting, a link's runs sharing its key), and points (``Point``) between them:
    adjacent runs of one key form a group, the group of the paragraph's most common key is
    plain text in the tree, every other group an inline element (``<span>``) around its
    text, a point its own element. ``root`` is the tree to translate; after the translation
    is written, ``texts`` gives each run its new text: a group's text to its first run, ""
    to the others (and to points); words the translation put outside every element go to
    the plain group there, or where there is none, to the group before (after, at the
    start)."""

    def __init__(self, runs: Sequence[tuple[str, Hashable] | Point]) -> None:
        self.n = len(runs)
        groups: list[tuple[Hashable, list[int]]] = []  # a point: its own group, key the Point
        for i, run in enumerate(runs):
            key = run if isinstance(run, Point) else run[1]
            if not isinstance(run, Point) and not run[0]:
                continue
            if groups and groups[-1][0] == key and not isinstance(key, Point):
                groups[-1][1].append(i)
            else:
                groups.append((key, [i]))
        weight: dict[Hashable, int] = {}
        for key, members in groups:
            if not isinstance(key, Point):
                weight[key] = weight.get(key, 0) + sum(len(runs[i][0]) for i in members)
        base = max(weight, key=weight.__getitem__) if weight else None
        self.root = ElementTree.Element("p")
        # slots: where text outside the elements lands (root.text, then each element's tail),
        # with the plain group there (None: none) and the text group before it (None: none)
        self._slots: list[tuple[ElementTree.Element, str, int | None, int | None]] = []
        self._spans: list[tuple[ElementTree.Element, int]] = []
        slot: tuple[ElementTree.Element, str] = (self.root, "text")
        plain: int | None = None
        before: int | None = None
        self._groups = [members for _, members in groups]
        for g, (key, members) in enumerate(groups):
            if isinstance(key, Point):
                self._slots.append((*slot, plain, before))
                point = ElementTree.SubElement(self.root, key.tag)
                point.text = key.text or None
                slot, plain = (point, "tail"), None
                continue
            text = "".join(runs[i][0] for i in members)
            if key == base:
                element, attr = slot
                setattr(element, attr, (getattr(element, attr) or "") + text)
                plain = g
            else:
                self._slots.append((*slot, plain, before))
                span = ElementTree.SubElement(self.root, "span")
                span.text = text
                self._spans.append((span, g))
                slot, plain = (span, "tail"), None
            before = g
        self._slots.append((*slot, plain, before))
        self._first = next(
            (g for g, (key, _) in enumerate(groups) if not isinstance(key, Point)), None
        )

    def texts(self) -> list[str]:
        """Each run's text, read back from the written tree."""
        out = [""] * self.n
        if self._first is None:
            return out
        by_group = [""] * len(self._groups)
        for span, g in self._spans:
            by_group[g] += span.text or ""
        for element, attr, plain, before in self._slots:
            text = getattr(element, attr) or ""
            if not text:
                continue
            if plain is not None:
                by_group[plain] += text
            elif before is not None:  # no plain group here: the group before
                by_group[before] += text
            else:  # or, at the start, the first
                by_group[self._first] = text + by_group[self._first]
        for members, text in zip(self._groups, by_group, strict=True):
            out[members[0]] = text
        return out
