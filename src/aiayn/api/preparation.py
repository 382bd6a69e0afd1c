"""Text preparation: what a translate request reads before any search. Its texts composed
(NFC), its prefixes, the strings each translation must hold (a glossary's terms, spans kept
verbatim, constraints: ``aiayn.api.terms``) as target tokens, and the placeholder pieces a
translation may write only inside them; for a document or a page, its passages cut into
sentences that fit the model."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aiayn.api.terms import (
    GlossaryLike,
    Held,
    constraint_ids,
    glossary_terms,
    less_prefix,
    stray_sigils,
    text_constraints,
)
from aiayn.data.terminology import check_patterns
from aiayn.errors import OptionError
from aiayn.infer import translate as decoding


def text_list(texts, name: str = "texts") -> list[str]:
    """``texts`` as a list of strings; a bare string is an error (it is not a list of texts)."""
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise OptionError(f'{name} must be a list of strings, e.g. ["Guten Morgen."]', name)
    return list(texts)


def prefix_list(prefix: Sequence[str] | None, texts: list[str]) -> list[str] | None:
    """``prefix`` as a list of strings, one per text ('' for none), or None when unset."""
    if prefix is None:
        return None
    prefixes = text_list(prefix, "prefix")
    if len(prefixes) != len(texts):
        raise OptionError(
            f"prefix: {len(prefixes)} prefixes for {len(texts)} texts; give one per text "
            "('' for none)",
            "prefix",
        )
    return prefixes


@dataclass(frozen=True)
class Prepared:
    """A translate request's texts as the search reads them. ``sources``: the texts composed
    (NFC); ``prefixes``: one per text, or None; ``wanted``: per text, the strings its
    translation must hold (None when no text has any); ``held``: their target tokens, as the
    constrained search places them; ``banned``: per text, the tokens of placeholder
    characters it may write only inside a string it holds."""

    sources: list[str]
    prefixes: list[str] | None = None
    wanted: list[list[Held]] | None = None
    held: list[list[list[int]]] | None = None
    banned: list[frozenset[int]] | None = None


def prepare(
    texts: Sequence[str],
    tokenizer,
    languages: tuple[str, str] | None,
    *,
    prefix: Sequence[str] | None = None,
    glossary: GlossaryLike | None = None,
    constraints: Sequence[Sequence[str]] | None = None,
    keep: Sequence[str] | None = None,
) -> Prepared:
    """``texts`` ready for the search (``Prepared``), every option checked; ``languages``
    (source, target) choose a glossary's pair. A term a text's prefix holds is met (not
    placed again after it)."""
    texts = text_list(texts)
    prefixes = prefix_list(prefix, texts)
    wanted = text_constraints(texts, glossary_terms(glossary, languages), constraints, keep)
    if wanted is not None and prefixes is not None:
        wanted = less_prefix(wanted, prefixes)  # a term the prefix holds is met
        wanted = wanted if any(wanted) else None
    held = banned = None
    if wanted is not None:
        held = [constraint_ids(tokenizer, w) for w in wanted]
        sigils = decoding.sigil_tokens(tokenizer)  # a placeholder's pieces nowhere but in it
        banned = [
            frozenset().union(*(sigils[c] for c in stray_sigils(t, w)))
            for t, w in zip(texts, wanted, strict=True)
        ]
    # the model reads composed text (NFC), as its corpora were written: "a" + U+0308 is
    # "ä" (kept spans come from the text as given, verbatim)
    sources = [unicodedata.normalize("NFC", t) for t in texts]
    return Prepared(sources, prefixes, wanted, held, banned)


def page_sentences(
    documents: Sequence[str],
    names: Sequence[str] | None,
    fits: Callable[[str], bool],
    keep: Sequence[str] | None,
):
    """The sentences of HTML ``documents`` to translate (``aiayn.data.markup.read``);
    ``names``: what errors call each document (by default "html", or "document k")."""
    from aiayn.data import markup

    documents = text_list(documents, "documents")
    if names is None:
        names = (
            ["html"]
            if len(documents) == 1
            else [f"document {k + 1}" for k in range(len(documents))]
        )
    return markup.read(documents, names, fits, _patterns(keep))


def document_sentences(
    path: Path, out: Path, limits, fits: Callable[[str], bool], keep: Sequence[str] | None
):
    """The document ``path`` opened (within ``limits``) and its sentences to translate, once
    ``out`` is checked: a file of the same format that is not ``path`` itself."""
    from aiayn import documents

    if documents.format_for(out.name) is not documents.format_for(path.name):
        raise OptionError(
            f"out: {out.name} is not a {path.suffix or 'file without an ending'} like the "
            f"input {path.name}: a document is written back in its own format",
            "out",
        )
    if _same_file(path, out):
        raise OptionError(
            f"out: {out} is the input {path} itself: the translation would replace the "
            "document; write it to another file",
            "out",
        )
    opened = documents.read_file(path, limits)
    return opened, documents.sentences(opened, fits, _patterns(keep))


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file (a link to it, another spelling of its path)."""
    try:
        return a.resolve() == b.resolve() or (b.exists() and a.samefile(b))
    except OSError:
        return False


def _patterns(keep: Sequence[str] | None) -> list[str] | None:
    """``keep`` checked (an error names a bad expression) before a document is cut by it."""
    return check_patterns(keep) if keep is not None else None
