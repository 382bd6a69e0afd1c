"""Glossaries on the server: the one ``aiayn serve --glossary FILE`` names (its terms for
each model's language pair) and a request's own ``glossary`` object, merged (the request's
term wins) into the ``Terms`` a translation holds (``aiayn.data.terminology``).

A request's terms are made off the event loop, one table at a time (``terms_for``): their
expression takes time growing with the terms' characters (a second for a megabyte, as long
for 100,000 short terms of a server's glossary), and Python compiles it holding the
interpreter's lock, so two threads compiling would take that lock from the event loop twice
as often and finish no sooner. The schema bounds a request's glossary (``MAX_TERMS``,
``MAX_GLOSSARY_CHARS`` in ``aiayn.serve.schemas``: a fifth of a second's compile); the
``Terms`` made are kept by a digest of their table (``TermsCache``), so a glossary sent again
is not compiled again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
import weakref
from collections import OrderedDict
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
    return MADE.terms(table)


async def terms_for(model: ServedModel, given: Mapping | None, glossary: Glossary | None):
    """``request_terms``; a request's own terms made off the event loop, one table at a time
    (the module's docstring), the others' requests answered meanwhile. Without them, the
    server's terms, made once as the model loaded (``check_glossary``)."""
    if not given:
        return request_terms(model, given, glossary)
    async with _one_at_a_time():
        return await run_in_threadpool(request_terms, model, given, glossary)


_TURNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> its Semaphore


def _one_at_a_time() -> asyncio.Semaphore:
    """The turn a request's terms wait for on this event loop (one table made at a time)."""
    loop = asyncio.get_running_loop()
    turn = _TURNS.get(loop)
    if turn is None:
        turn = _TURNS[loop] = asyncio.Semaphore(1)
    return turn


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


class TermsCache:
    """``Terms`` made for a table, kept by a SHA-256 digest of the table (its terms in
    order), the least recently used going first when there are more than ``entries`` or
    their terms have more than ``chars`` characters in all (the newest one is kept
    whatever its size: a server glossary of 100,000 terms that each request adds to)."""

    def __init__(self, entries: int = 64, chars: int = 2_000_000) -> None:
        self.entries, self.chars = entries, chars
        self._made: OrderedDict[bytes, tuple[Terms, int]] = OrderedDict()
        self._held = 0  # characters of the kept tables' terms
        self._lock = threading.Lock()

    def terms(self, table: Mapping[str, str]) -> Terms:
        items = sorted(table.items())
        digest = hashlib.sha256(json.dumps(items).encode()).digest()
        with self._lock:
            if digest in self._made:
                self._made.move_to_end(digest)
                return self._made[digest][0]
        terms = Terms(dict(items))  # the long part, without the lock
        # ``re`` keeps the last 512 expressions it compiled (a megabyte for a glossary at the
        # schema's limit): emptied, only this cache keeps a request's
        re.purge()
        size = sum(len(s) + len(t) for s, t in items)
        with self._lock:
            if digest in self._made:  # made meanwhile by another thread
                self._made.move_to_end(digest)
            else:
                self._made[digest] = (terms, size)
                self._held += size
            while len(self._made) > 1 and (
                len(self._made) > self.entries or self._held > self.chars
            ):
                _, (_, dropped) = self._made.popitem(last=False)
                self._held -= dropped
            return self._made[digest][0]

    def __len__(self) -> int:
        return len(self._made)


MADE = TermsCache()  # the Terms of requests' glossaries, for every application in the process


def terms_key(terms: Terms | None) -> int | None:
    """What batches requests with the same terms together: the one ``Terms`` object made
    for a table (alive while a request holding it waits, so its id names it alone)."""
    return None if terms is None else id(terms)
