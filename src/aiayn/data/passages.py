"""Plain texts through a sentence-level model: each text's lines kept (line breaks, blank lines,
each line's leading and trailing white space) and each line cut into the sentences the model
reads (``aiayn.data.markup.pieces``, as documents are cut), their translations joined back.

A model trained on sentences, given a paragraph or several lines as one text, drops or invents
whole sentences; LibreTranslate's ``/translate`` takes paragraphs and lines, and answers each
line translated sentence by sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from aiayn.data.markup import pieces
from aiayn.data.markup.document import kept_joins

_ENDS = ".!?\u2026"  # where a sentence may end (pieces decides whether one does)


class Passages:
    """``texts`` (the sentences to translate, in order) cut from ``passages``: every line of
    a passage with a word (``translatable``) cut into sentences that each ``fits`` the model
    (a sentence that does not is cut again at its last word that fits); other lines (blank,
    an emoji, a number) are kept as they are; a span ``keep`` matches (regular expressions:
    ``{% trans 'Hallo!' %}``) is not cut where another cut may be made. ``split``: the
    model's own sentence splitter (a line -> its sentences, e.g. the one an Argos Translate
    package carries), which then says where a line's sentences end (where its sentences are
    not made of the line's words, as cut at white space, aiayn's own cuts are made instead).
    ``first[i]``: whether sentence i begins its passage; ``passage[i]``: the index of its
    passage. ``join`` gives the passages back from the sentences' translations."""

    def __init__(
        self,
        passages: Sequence[str],
        fits: Callable[[str], bool],
        translatable: Callable[[str], bool] = lambda line: True,
        keep: Sequence[str] | None = None,
        split: Callable[[str], list[str]] | None = None,
    ) -> None:
        self.texts: list[str] = []
        self.first: list[bool] = []
        self.passage: list[int] = []
        # per passage, per line: (kept text before, sentences, kept text after)
        self._plans: list[list[tuple[str, int, str]]] = []
        for index, passage in enumerate(passages):
            plan = []
            begun = False  # whether a line of this passage has sentences already
            for line in passage.splitlines(keepends=True):
                lead, body, trail = edges(line)
                if not body or not translatable(body):
                    plan.append((line, 0, ""))
                    continue
                words = body.split()
                # a sentence end before the line's last word (the body ends with that word)
                head = body[: len(body) - len(words[-1])]
                ends = any(c in head for c in _ENDS)
                if not ends and fits(" ".join(words)):
                    ranges = [(0, len(words))]  # one sentence (most texts): pieces' answer
                else:
                    glued = kept_joins(words, keep) if keep else frozenset()
                    ends = sentence_ends(words, split(body)) if split is not None else None
                    ranges = pieces(words, fits, glued, ends)
                self.first.extend(not begun and k == 0 for k in range(len(ranges)))
                self.passage.extend([index] * len(ranges))
                begun = True
                self.texts.extend(" ".join(words[a:b]) for a, b in ranges)
                plan.append((lead, len(ranges), trail))
            self._plans.append(plan)

    def join(self, translations: Sequence[str]) -> list[str]:
        """The passages with each sentence replaced by its translation (``translations[i]``
        for ``texts[i]``): a line's sentences joined by single spaces (each translation
        without white space at its ends, its line breaks made spaces: a line stays one line;
        the white space inside it kept, as Argos Translate keeps it), between the line's own
        leading and trailing white space."""
        if len(translations) != len(self.texts):
            raise ValueError(f"{len(translations)} translations for {len(self.texts)} texts")
        done = iter(translations)
        out = []
        for plan in self._plans:
            parts = []
            for before, n, after in plan:
                sentences = (" ".join(next(done).splitlines()).strip() for _ in range(n))
                parts.append(before + " ".join(s for s in sentences if s) + after)
            out.append("".join(parts))
        return out


def edges(text: str) -> tuple[str, str, str]:
    """``text``'s leading white space, what lies between, and its trailing white space (a
    line's: with its line break). String methods, not an expression: white space inside a
    long text makes ``(\\s*)(.*?)(\\s*)$`` backtrack in time growing with its square."""
    rest = text.lstrip()
    body = rest.rstrip()
    return text[: len(text) - len(rest)], body, rest[len(body) :]


def sentence_ends(words: Sequence[str], sentences: Sequence[str]) -> list[int] | None:
    """Where ``sentences`` (a splitter's, of the text of ``words``) end among ``words`` (``i``:
    after word ``i - 1``), or None where they are not made of whole words, in order."""
    ends, at = [], 0
    for sentence in sentences:
        mine = sentence.split()
        if not mine:
            continue
        if list(words[at : at + len(mine)]) != mine:
            return None
        at += len(mine)
        ends.append(at)
    return ends[:-1] if at == len(words) else None
