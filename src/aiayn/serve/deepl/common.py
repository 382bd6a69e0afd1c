"""What DeepL's routes share: its language codes over the served languages, a request's fields
as DeepL reads them (JSON or a form, and the query string), the caller's stores and the
characters it is billed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from aiayn.serve.access import Caller, log
from aiayn.serve.entry import Entry
from aiayn.serve.errors import ServeError, is_form
from aiayn.serve.inputs import LANGUAGE_NAMES
from aiayn.serve.keys import KeyStoreUnavailable
from aiayn.serve.languages import translators
from aiayn.serve.registry import Registry
from aiayn.serve.request_fields import FORM_LIMITS

# DeepL's target codes for a language it tells apart by region (its names for them)
VARIANTS = {
    "en": {"EN-GB": "English (British)", "EN-US": "English (American)"},
    "pt": {"PT-BR": "Portuguese (Brazilian)", "PT-PT": "Portuguese (European)"},
}


def pairs(registry: Registry) -> list[tuple[str, str, Entry]]:
    """(source, target, model) of each served translator (loaded or not: ``Registry.holding``
    loads it), its codes in lower case."""
    return [(m.languages[0].lower(), m.languages[1].lower(), m) for m in translators(registry)]


def name_of(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code.upper())


def target_codes(code: str) -> dict[str, str]:
    """DeepL's target codes for the served language ``code`` with their names: ``EN-GB`` and
    ``EN-US`` for ``en``, ``PT-BR`` and ``PT-PT`` for ``pt``, else the code in upper case."""
    return VARIANTS.get(code, {code.upper(): name_of(code)})


def language_of(given: str, served: list[str]) -> str | None:
    """The served code (of ``served``) that DeepL's code ``given`` names, in any case: the code
    itself or a regional variant DeepL lists for it (``EN-US`` for ``en``); None if none."""
    code = given.strip().lower()
    return next(
        (
            language
            for language in served
            if code == language or code.upper() in target_codes(language)
        ),
        None,
    )


def languages_of(
    served: list[tuple[str, str, Entry]], target_lang: str, source_lang: str | None
) -> tuple[str, str | None]:
    """The served target and source (None: not given) a request's DeepL codes name: a target
    a served translator translates into, a source one of them reads into it (or the target
    itself: the text comes back as it came); 400 naming the served codes otherwise."""
    target = language_of(target_lang, list(dict.fromkeys(t for _, t, _ in served)))
    if target is None:
        codes = ", ".join(
            c for t in dict.fromkeys(t for _, t, _ in served) for c in target_codes(t)
        )
        raise ServeError(
            400, f"target_lang: {target_lang!r} is not served; served: {codes}", "target_lang"
        )
    if source_lang is None:
        return target, None
    readable = [s for s, t, _ in served if t == target] + [target]
    source = language_of(source_lang, readable)
    if source is None:
        raise ServeError(
            400,
            f"source_lang: {source_lang!r} is not translated into {target_lang.upper()} here; "
            f"give one of {', '.join(dict.fromkeys(s.upper() for s in readable))} (or none)",
            "source_lang",
        )
    return target, source


def check_formality(formality: str | None, target_lang: str) -> None:
    """No served language has formality: ``more`` and ``less`` are refused, as DeepL refuses
    them for a target language without it (the ``prefer_`` options fall back to the default)."""
    if formality in ("more", "less"):
        raise ServeError(
            400,
            f"formality: {formality!r} is not supported for target_lang {target_lang.upper()} "
            f"(no served language has formality; prefer_{formality} falls back to the default)",
            "formality",
        )


def owner(caller: Caller) -> str:
    """Whose glossaries and documents a request sees: its API key's ("" without keys)."""
    return caller.key.digest if caller.key is not None else ""


async def request_fields(request: Request) -> dict:
    """A DeepL request's fields as DeepL reads them: its JSON object or its form (a field
    given more than once, a list), with the query string's fields where the body has none."""
    data: dict = {}
    pairs_: list[tuple[str, object]] = []
    if is_form(request.scope):
        form = await request.form(**FORM_LIMITS.get(request.scope["path"], {}))
        pairs_ = list(form.multi_items())
    elif request.method in ("POST", "PUT", "PATCH"):
        body = await request.body()
        if body.strip():  # JSON, as JsonBody checked it
            value = json.loads(body)
            if not isinstance(value, dict):
                raise ServeError(400, "body: must be a JSON object of fields", "body")
            data = value
    given = set(data) | {k for k, _ in pairs_}
    pairs_ += [(k, v) for k, v in request.query_params.multi_items() if k not in given]
    grouped: dict[str, list] = {}
    for key, value in pairs_:
        grouped.setdefault(key, []).append(value)
    return {**data, **{k: v[0] if len(v) == 1 else v for k, v in grouped.items()}}


async def charge(request: Request, caller: Caller, characters: int) -> None:
    """Count ``characters`` against ``caller``'s API key this month: 456 past its quota, as
    DeepL answers (without keys nothing is counted)."""
    usage, key = request.app.state.usage, caller.key
    if usage is None or key is None:
        return
    try:
        charged = await run_in_threadpool(usage.charge, key, characters)
    except KeyStoreUnavailable as e:
        log.error("characters cannot be counted: %s", e)
        raise ServeError(
            503, "usage cannot be counted now; try again later", headers={"Retry-After": "5"}
        ) from None
    if not charged:
        raise ServeError(
            456,
            f"Quota exceeded: this request's {characters} characters would pass this API "
            f"key's {key.char_quota} characters this month",
        )


async def refund(usage, caller: Caller, characters: int) -> None:
    """Take back what ``charge`` counted for a translation that failed."""
    if usage is None or caller.key is None:
        return
    try:
        await run_in_threadpool(usage.refund, caller.key, characters)
    except KeyStoreUnavailable as e:  # counted, not translated: logged
        log.error("%d characters of key %s cannot be refunded: %s", characters, caller.key.id, e)


@asynccontextmanager
async def billed(request: Request, caller: Caller, characters: int) -> AsyncIterator[None]:
    """``charge`` for what the block translates, refunded if the block fails."""
    await charge(request, caller, characters)
    try:
        yield
    except BaseException:
        await refund(request.app.state.usage, caller, characters)
        raise
