"""DeepL's glossary routes over the key's stored glossaries (``aiayn.serve.glossaries``):
``/v2/glossaries`` (one language pair a glossary: create, list, get, entries as TSV, delete)
and ``/v3/glossaries`` (a dictionary per pair; the routes DeepL's current ``DeepLClient``
calls), two views of the same store. A glossary of another API key is not found (404)."""

from __future__ import annotations

import datetime as dt
import re

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from aiayn.data.terminology import GlossaryError
from aiayn.serve.access import Caller, Guarded
from aiayn.serve.deepl.common import language_of, owner, pairs, request_fields
from aiayn.serve.deepl.fields import (
    DictionaryEntries,
    GlossaryPatch,
    GlossaryRequest,
    MultilingualGlossaryRequest,
    json_body,
)
from aiayn.serve.errors import ServeError, validation_message
from aiayn.serve.glossaries import Entries, GlossaryInfo, entries_tsv, read_entries
from aiayn.serve.inputs import form_or_json
from aiayn.serve.registry import Registry
from aiayn.serve.routes import Models

router = APIRouter()
TSV = "text/tab-separated-values"
_PAIR_QUERY = {
    "source_lang": Query(None, description="the dictionary's source language"),
    "target_lang": Query(None, description="the dictionary's target language"),
}


def _time(seconds: float) -> str:
    """DeepL's creation_time: ISO 8601 in UTC with milliseconds (2021-08-03T14:16:18.329Z)."""
    moment = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _v2(info: GlossaryInfo) -> dict:
    (dictionary,) = info.dictionaries
    return {
        "glossary_id": info.id,
        "name": info.name,
        "ready": True,
        "source_lang": dictionary.source,
        "target_lang": dictionary.target,
        "creation_time": _time(info.created),
        "entry_count": dictionary.count,
    }


def _v3(info: GlossaryInfo) -> dict:
    return {
        "glossary_id": info.id,
        "name": info.name,
        "dictionaries": [
            {"source_lang": d.source, "target_lang": d.target, "entry_count": d.count}
            for d in info.dictionaries
        ],
        "creation_time": _time(info.created),
    }


_INDEXED = re.compile(r"(\w+)\[(\d{1,3})\]\.(\w+)")


def _nested(fields: dict) -> dict:
    """A form's ``dictionaries[0].source_lang`` fields (deepl-node's way of sending a list
    of objects) as the list ``dictionaries`` of objects, as JSON gives it."""
    out: dict = {}
    lists: dict[str, dict[int, dict]] = {}
    for name, value in fields.items():
        match = _INDEXED.fullmatch(name)
        if match is None:
            out[name] = value
        else:
            field, index, key = match[1], int(match[2]), match[3]
            lists.setdefault(field, {}).setdefault(index, {})[key] = value
    for field, items in lists.items():
        if field not in out:
            out[field] = [items[i] for i in sorted(items)]
    return out


async def _body(request: Request, schema: type[BaseModel]):
    fields = _nested(await request_fields(request))
    try:
        return schema.model_validate(fields)
    except ValidationError as e:
        _, message, param = validation_message(e.errors())
        raise ServeError(400, message, param) from None


def _pair(registry: Registry, source: str, target: str) -> tuple[str, str]:
    """A glossary's language pair in the served codes (lower case): one of a served translator
    that places terms; 400 otherwise, naming the pairs."""
    served = [(s, t) for s, t, m in pairs(registry) if m.spec.engine != "ctranslate2"]
    s = language_of(source, [a for a, _ in served])
    t = language_of(target, [b for _, b in served])
    if (s, t) not in served:
        have = ", ".join(f"{a}-{b}" for a, b in served) or "none"
        raise ServeError(
            400,
            f"Unsupported glossary source and target language pair: {source}-{target}; "
            f"glossaries are made for: {have}",
            "source_lang",
        )
    return s, t


def _entries(entries: str, entries_format: str, where: str = "entries") -> Entries:
    try:
        return read_entries(entries, entries_format, where)
    except GlossaryError as e:
        raise ServeError(400, f"Invalid glossary entries provided: {e}", "entries") from None


def _dictionaries(registry: Registry, given: list[DictionaryEntries]):
    out, seen = [], set()
    for i, d in enumerate(given):
        source, target = _pair(registry, d.source_lang, d.target_lang)
        if (source, target) in seen:
            raise ServeError(
                400, f"dictionaries[{i}]: a second dictionary for {source}-{target}", "dictionaries"
            )
        seen.add((source, target))
        out.append((source, target, _entries(d.entries, d.entries_format, f"dictionaries[{i}]")))
    return out


async def _create(request: Request, caller: Caller, name: str, dictionaries) -> GlossaryInfo:
    store = request.app.state.glossaries
    try:
        return await run_in_threadpool(store.create, owner(caller), name, dictionaries)
    except ValueError as e:  # the key's glossaries at their limit
        raise ServeError(400, str(e), "name") from None


async def _found(request: Request, caller: Caller, glossary: str) -> GlossaryInfo:
    info = await run_in_threadpool(request.app.state.glossaries.get, owner(caller), glossary)
    if info is None:
        raise ServeError(404, f"Glossary not found: {glossary}", "glossary_id")
    return info


def _one_pair(info: GlossaryInfo) -> None:
    """A glossary read through /v2 holds one language pair."""
    if len(info.dictionaries) != 1:
        raise ServeError(
            400,
            f"glossary {info.id} holds {len(info.dictionaries)} language pairs: read it "
            "through /v3/glossaries",
            "glossary_id",
        )


@router.post("/v2/glossaries", status_code=201, openapi_extra=form_or_json(GlossaryRequest))
async def create_glossary(request: Request, registry: Models, caller: Guarded):
    """A glossary of one language pair, from TSV or CSV entries."""
    req = await _body(request, GlossaryRequest)
    source, target = _pair(registry, req.source_lang, req.target_lang)
    entries = _entries(req.entries, req.entries_format)
    return _v2(await _create(request, caller, req.name, [(source, target, entries)]))


@router.get("/v2/glossaries")
async def list_glossaries(request: Request, caller: Guarded):
    """The caller's glossaries of one language pair each."""
    found = await run_in_threadpool(request.app.state.glossaries.all, owner(caller))
    return {"glossaries": [_v2(info) for info in found if len(info.dictionaries) == 1]}


@router.get("/v2/glossaries/{glossary_id}")
async def get_glossary(glossary_id: str, request: Request, caller: Guarded):
    info = await _found(request, caller, glossary_id)
    _one_pair(info)
    return _v2(info)


@router.get(
    "/v2/glossaries/{glossary_id}/entries",
    response_class=Response,
    responses={200: {"content": {TSV: {"schema": {"type": "string"}}}}},
)
async def glossary_entries(glossary_id: str, request: Request, caller: Guarded):
    """The entries as TSV (``Accept: text/tab-separated-values``; 415 for another type)."""
    accept = request.headers.get("accept", "*/*")
    wanted = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    if not wanted & {TSV, "text/*", "*/*", ""}:
        raise ServeError(415, f"Accept: {accept}; the entries are given as {TSV}", "Accept")
    info = await _found(request, caller, glossary_id)
    _one_pair(info)
    (d,) = info.dictionaries
    entries = await run_in_threadpool(
        request.app.state.glossaries.entries, owner(caller), info.id, d.source, d.target
    )
    return Response(entries_tsv(entries or []), media_type=f"{TSV}; charset=utf-8")


@router.delete("/v2/glossaries/{glossary_id}", status_code=204, response_class=Response)
async def delete_glossary(glossary_id: str, request: Request, caller: Guarded):
    store = request.app.state.glossaries
    if not await run_in_threadpool(store.delete, owner(caller), glossary_id):
        raise ServeError(404, f"Glossary not found: {glossary_id}", "glossary_id")
    return Response(status_code=204)


@router.post(
    "/v3/glossaries", status_code=201, openapi_extra=json_body(MultilingualGlossaryRequest)
)
async def create_multilingual(request: Request, registry: Models, caller: Guarded):
    """A glossary of a dictionary per language pair."""
    req = await _body(request, MultilingualGlossaryRequest)
    dictionaries = _dictionaries(registry, req.dictionaries)
    return _v3(await _create(request, caller, req.name, dictionaries))


@router.get("/v3/glossaries")
async def list_multilingual(request: Request, caller: Guarded):
    found = await run_in_threadpool(request.app.state.glossaries.all, owner(caller))
    return {"glossaries": [_v3(info) for info in found]}


@router.get("/v3/glossaries/{glossary_id}")
async def get_multilingual(glossary_id: str, request: Request, caller: Guarded):
    return _v3(await _found(request, caller, glossary_id))


@router.get("/v3/glossaries/{glossary_id}/entries")
async def multilingual_entries(
    glossary_id: str,
    request: Request,
    caller: Guarded,
    source_lang: str | None = _PAIR_QUERY["source_lang"],
    target_lang: str | None = _PAIR_QUERY["target_lang"],
):
    """The entries (TSV) of the dictionary for ``source_lang`` and ``target_lang`` (both
    absent: of every dictionary)."""
    info = await _found(request, caller, glossary_id)
    wanted = _wanted(info, source_lang, target_lang)
    store = request.app.state.glossaries
    out = []
    for d in wanted:
        entries = await run_in_threadpool(store.entries, owner(caller), info.id, d.source, d.target)
        out.append(
            {
                "source_lang": d.source,
                "target_lang": d.target,
                "entries": entries_tsv(entries or []),
                "entries_format": "tsv",
            }
        )
    return {"dictionaries": out}


def _wanted(info: GlossaryInfo, source: str | None, target: str | None):
    """The dictionaries of ``info`` a request names by its pair (both absent: all); 404 for
    a pair the glossary has not."""
    if source is None and target is None:
        return list(info.dictionaries)
    if source is None or target is None:
        missing = "source_lang" if source is None else "target_lang"
        raise ServeError(400, f"{missing}: required with the other", missing)
    codes = [d.source for d in info.dictionaries], [d.target for d in info.dictionaries]
    s, t = language_of(source, codes[0]), language_of(target, codes[1])
    found = info.dictionary(s, t) if s and t else None
    if found is None:
        raise ServeError(
            404,
            f"Glossary dictionary not found: glossary {info.id} has no {source}-{target}",
            "source_lang",
        )
    return [found]


@router.patch("/v3/glossaries/{glossary_id}", openapi_extra=json_body(GlossaryPatch))
async def patch_multilingual(glossary_id: str, request: Request, registry: Models, caller: Guarded):
    """A new name, and entries merged into one pair's dictionary (made if it has none)."""
    req = await _body(request, GlossaryPatch)
    info = await _found(request, caller, glossary_id)
    store = request.app.state.glossaries
    for source, target, entries in _dictionaries(registry, req.dictionaries or []):
        try:
            await run_in_threadpool(
                store.put, owner(caller), info.id, source, target, entries, True
            )
        except GlossaryError as e:
            raise ServeError(400, f"Invalid glossary entries provided: {e}", "entries") from None
    if req.name is not None:
        await run_in_threadpool(store.rename, owner(caller), info.id, req.name)
    return _v3(await _found(request, caller, info.id))


@router.put("/v3/glossaries/{glossary_id}/dictionaries", openapi_extra=json_body(DictionaryEntries))
async def replace_dictionary(glossary_id: str, request: Request, registry: Models, caller: Guarded):
    """One pair's dictionary replaced by the given entries (made if the glossary has none)."""
    req = await _body(request, DictionaryEntries)
    info = await _found(request, caller, glossary_id)
    ((source, target, entries),) = _dictionaries(registry, [req])
    store = request.app.state.glossaries
    await run_in_threadpool(store.put, owner(caller), info.id, source, target, entries, False)
    return {"source_lang": source, "target_lang": target, "entry_count": len(entries)}


@router.delete(
    "/v3/glossaries/{glossary_id}/dictionaries", status_code=204, response_class=Response
)
async def delete_dictionary(
    glossary_id: str,
    request: Request,
    caller: Guarded,
    source_lang: str | None = _PAIR_QUERY["source_lang"],
    target_lang: str | None = _PAIR_QUERY["target_lang"],
):
    """The dictionary of one language pair (both named) removed from the glossary."""
    info = await _found(request, caller, glossary_id)
    if source_lang is None and target_lang is None:
        raise ServeError(400, "source_lang and target_lang: both required", "source_lang")
    (d,) = _wanted(info, source_lang, target_lang)
    store = request.app.state.glossaries
    await run_in_threadpool(store.delete_dictionary, owner(caller), info.id, d.source, d.target)
    return Response(status_code=204)


@router.delete("/v3/glossaries/{glossary_id}", status_code=204, response_class=Response)
async def delete_multilingual(glossary_id: str, request: Request, caller: Guarded):
    return await delete_glossary(glossary_id, request, caller)
