"""Glossaries on the server: the one ``aiayn serve --glossary FILE`` names (its terms for
each model's language pair) and a request's own ``glossary`` object, merged (the request's
term wins) into the ``Terms`` a translation holds (``aiayn.data.terminology``)."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from starlette.concurrency import run_in_threadpool

from aiayn.data.terminology import Glossary, GlossaryError, Terms, term_key, term_table
from aiayn.serve.errors import ServeError
from aiayn.serve.models import ServedModel
from aiayn.serve.redact import without_paths


def request_terms(model: ServedModel, given: Mapping | None, glossary: Glossary | None):
    """The terms a request's translations hold: the server's ``glossary`` (read once at
    start; None: none) for ``model``'s languages, with the request's ``given`` terms over
    them (``{"Schraube": "bolt"}``, checked by the request's schema first): a request's term
    replaces the server's however either is written ("schraube", "SCHRAUBE"). A bad request
    glossary is a 422 naming the field; a server glossary giving one term two targets in
    this language pair, a 500 naming its file and lines."""
    source, target = model.languages or ("", "")
    pair = (source.lower(), target.lower())
    served = glossary is not None and pair in glossary.pairs
    try:
        if not given:
            return glossary.terms(*pair) if served else None  # made once a pair
        server = glossary.table(*pair) if served else {}
    except GlossaryError as e:
        message = f"the server's glossary: {without_paths(str(e))}"  # its name, not its path
        raise ServeError(500, message, "glossary") from None
    if model.engines["other"] == "ctranslate2":  # aiayn serve --engine ctranslate2
        raise ServeError(
            422,
            "glossary: this server decodes with CTranslate2 (aiayn serve --engine ctranslate2), "
            "which has no constrained search: it takes no glossary",
            "glossary",
        )
    own = _given(given)
    replaced = {term_key(s) for s in own}
    table = {s: t for s, t in server.items() if term_key(s) not in replaced}
    table.update(own)
    return _terms(tuple(sorted(table.items())))


async def terms_for(model: ServedModel, given: Mapping | None, glossary: Glossary | None):
    """``request_terms``, off the event loop where a request's terms join the server's: their
    expression is made anew, in time growing with the server's glossary (a second for
    100,000 terms, every other client waiting)."""
    if given and glossary is not None:
        return await run_in_threadpool(request_terms, model, given, glossary)
    return request_terms(model, given, glossary)


def check_glossary(glossary: Glossary, model) -> None:
    """The server's ``glossary`` usable for ``model``'s languages (a served model, loaded or
    not: its registry entry; a term given two targets there fails the start, naming its file
    and line); other pairs are not its concern. Its terms are made now, at start (100,000
    terms' expression takes seconds: the first request would have made them on the event
    loop)."""
    if model.is_translator and model.languages:
        pair = tuple(code.lower() for code in model.languages)
        if pair in glossary.pairs:
            glossary.terms(*pair)


def _given(given: Mapping) -> dict[str, str]:
    try:
        return term_table(given, "glossary")
    except GlossaryError as e:
        raise ServeError(422, str(e), "glossary") from None


@functools.lru_cache(maxsize=64)
def _terms(items: tuple[tuple[str, str], ...]) -> Terms:
    """Terms made once for the same table (a server glossary's expression is compiled once,
    not per request)."""
    return Terms(dict(items))


def terms_key(terms: Terms | None) -> int | None:
    """What batches requests with the same terms together: the one ``Terms`` object made
    for a table (alive while a request holding it waits, so its id names it alone)."""
    return None if terms is None else id(terms)
