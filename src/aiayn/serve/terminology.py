"""Glossaries on the server: the one ``aiayn serve --glossary FILE`` names (its terms for
each model's language pair) and a request's own ``glossary`` object, merged (the request's
term wins) into the ``Terms`` a translation holds (``aiayn.data.terminology``)."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from aiayn.data.terminology import Glossary, GlossaryError, Terms, term_table
from aiayn.serve.errors import ServeError
from aiayn.serve.models import ServedModel


@functools.cache
def server_glossary(path: str) -> Glossary:
    """The glossary file ``aiayn serve --glossary`` names, read once."""
    return Glossary.read(path)


def request_terms(model: ServedModel, given: Mapping | None, path: str) -> Terms | None:
    """The terms a request's translations hold: the server's glossary (``path``; "" for
    none) for ``model``'s languages, with the request's ``given`` terms over them
    (``{"Schraube": "bolt"}``, checked by the request's schema first). A bad request
    glossary is a 422 naming the field."""
    source, target = model.languages or ("", "")
    if not given:
        return _server_terms(path, source.lower(), target.lower()) if path else None
    table: dict[str, str] = {}
    if path:
        table.update(server_glossary(path).pairs.get((source.lower(), target.lower()), {}))
    table.update(_given(given, source, target))
    return _terms(tuple(sorted(table.items())))


@functools.cache
def _server_terms(path: str, source: str, target: str) -> Terms | None:
    table = server_glossary(path).pairs.get((source, target))
    return Terms(table) if table else None


def _given(given: Mapping, source: str, target: str) -> dict[str, str]:
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
