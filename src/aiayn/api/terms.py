"""What a translation must hold, from a request: a glossary's terms found in each text, spans
kept verbatim (placeholders), and constraints given outright; as target strings per text
and as the target tokens the constrained search places (``aiayn.infer.constrained``)."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from aiayn.data.terminology import (
    Glossary,
    GlossaryError,
    Terms,
    check_patterns,
    placeholders,
    term_table,
)
from aiayn.errors import OptionError
from aiayn.infer.translate import SIGILS

GlossaryLike = Glossary | Terms | Mapping | str | Path


class Held(NamedTuple):
    """A string a translation must hold; ``attached``: written against the character before
    it in the source (``(%s)``), so it may be there in the translation too."""

    text: str
    attached: bool = False


def glossary_terms(
    glossary: GlossaryLike | None, languages: tuple[str, str] | None
) -> Terms | None:
    """The terms of ``glossary`` for ``languages`` (source, target): a ``Glossary``, a file
    (JSON or TSV, ``aiayn.data.terminology``), a mapping in LibreTranslate's layout
    (``{"de_en": {"Schraube": "bolt"}}``) or one of source terms to target terms
    (``{"Schraube": "bolt"}``, for the model's own languages), or ``Terms`` already made."""
    if glossary is None or isinstance(glossary, Terms):
        return glossary
    if isinstance(glossary, str | Path):
        glossary = Glossary.read(glossary)
    elif isinstance(glossary, Mapping):
        if not any(isinstance(v, Mapping) for v in glossary.values()):
            return Terms(term_table(glossary, "glossary"))
        glossary = Glossary.from_mapping(glossary)
    elif not isinstance(glossary, Glossary):
        raise OptionError(
            "glossary must be a file name, an aiayn.data.terminology.Glossary or a mapping "
            f'such as {{"de_en": {{"Schraube": "bolt"}}}}, got {type(glossary).__name__}',
            "glossary",
        )
    if languages is None:
        if len(glossary.pairs) == 1:
            return glossary.terms(*next(iter(glossary.pairs)))
        raise GlossaryError(
            f"{glossary.name}: the model does not say its languages (run.json), so a glossary "
            "for it holds one language pair"
        )
    return glossary.terms(*languages)


def text_constraints(
    texts: Sequence[str],
    terms: Terms | None,
    constraints: Sequence[Sequence[str]] | None,
    keep: Sequence[str] | None,
) -> list[list[Held]] | None:
    """Per text, the target strings its translation must hold: ``constraints[i]`` as given,
    the targets of the glossary's terms in it, and the spans ``keep`` (regular expressions)
    matches in it, each once per occurrence; None when no text has any."""
    if constraints is not None:
        if isinstance(constraints, str) or len(constraints) != len(texts):
            raise OptionError(
                f"constraints: one list of target strings per text ({len(texts)} texts)",
                "constraints",
            )
        for i, cs in enumerate(constraints):
            if isinstance(cs, str) or not all(isinstance(c, str) and c.strip() for c in cs):
                raise OptionError(
                    f"constraints[{i}]: a list of non-empty strings, got {cs!r}", "constraints"
                )
    patterns = check_patterns(keep) if keep is not None else []
    out = []
    for i, text in enumerate(texts):
        held = [Held(c.strip()) for c in constraints[i]] if constraints is not None else []
        if terms is not None:
            held += [Held(m.target) for m in _terms_outside_kept(terms, text, patterns)]
        if patterns:
            held += [
                Held(m.target, m.start > 0 and not text[m.start - 1].isspace())
                for m in placeholders(text, patterns)
            ]
        out.append(held)
    return out if any(out) else None


def _terms_outside_kept(terms: Terms, text: str, patterns: Sequence[str]):
    """The glossary's terms in ``text`` less those inside a span kept verbatim ("Name" in
    "{Name}", "Haus" in a URL): such a span is not translated, so its words ask for no
    target (positions in the composed text, where ``Terms.find`` matches)."""
    found = terms.find(text)
    if not found or not patterns:
        return found
    kept = placeholders(unicodedata.normalize("NFC", text), patterns)
    return [m for m in found if not any(k.start < m.end and m.start < k.end for k in kept)]


def constraint_ids(tokenizer, held: Sequence[Held]) -> list[list[int]]:
    """Each string's target tokens, as the search must place them: the tokenizer's pieces of
    the string alone (a word of its own), less a lone word-boundary piece ("▁") before it if
    it is ``attached`` to the word before it (``(%s)``); the tokens decode to the string."""
    out = []
    for h, ids in zip(held, tokenizer.encode_target([h.text for h in held]), strict=True):
        if h.attached and len(ids) > 1 and tokenizer.id_to_piece(ids[0]) == "\u2581":
            ids = ids[1:]
        out.append(ids)
    return out


def less_prefix(wanted: list[list[Held]], prefixes: Sequence[str]) -> list[list[Held]]:
    """``wanted`` (per text) less what each text's prefix already holds: the search places
    its constraints after the prefix, so a term the prefix holds ("The bolt" for "bolt") was
    placed a second time ("The bolt is bolt."). Each occurrence in a prefix meets one, as a
    whole word where the string begins or ends with a letter or digit."""
    out = []
    for held, prefix in zip(wanted, prefixes, strict=True):
        left = Counter()
        for h in dict.fromkeys(held):
            head = r"(?<!\w)" if h.text[:1].isalnum() else ""
            tail = r"(?!\w)" if h.text[-1:].isalnum() else ""
            left[h] = len(re.findall(head + re.escape(h.text) + tail, prefix)) if prefix else 0
        kept = []
        for h in held:
            if left[h] > 0:
                left[h] -= 1
            else:
                kept.append(h)
        out.append(kept)
    return out


def stray_sigils(text: str, held: Sequence[Held]) -> set[str]:
    """The characters placeholders are made of (``SIGILS``: ``%{}$<>``) that the strings
    ``held`` in ``text`` hold and the rest of ``text`` does not: a translation may write them
    only inside those strings (a lone "%" beside the "%s" kept would be read as a
    conversion). "50 % von %s" keeps "%" free."""
    sigils = {c for h in held for c in h.text if c in SIGILS}
    if not sigils:
        return set()
    rest = text
    for h in held:
        rest = rest.replace(h.text, " ", 1)
    return {c for c in sigils if c not in rest}
