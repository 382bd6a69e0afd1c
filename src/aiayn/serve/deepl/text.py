"""DeepL's text routes: ``/v2/translate``, ``/v2/languages``, ``/v2/glossary-language-pairs``
and ``/v2/usage``. A translation is the same call the other APIs make (``Translator.translate``
on the registry's queue, batched with their requests); DeepL's fields choose how texts are cut
(``split_sentences``), read (``tag_handling``: the inline-tag machinery of
``aiayn.data.markup``) and constrained (``glossary_id``: a stored glossary's terms at decode
time)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from fastapi import APIRouter, Query, Request
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from aiayn.data import markup
from aiayn.data.passages import Passages
from aiayn.data.terminology import term_key
from aiayn.serve.access import Caller, Guarded, log
from aiayn.serve.deepl.common import (
    billed,
    check_formality,
    languages_of,
    name_of,
    owner,
    pairs,
    request_fields,
    target_codes,
)
from aiayn.serve.deepl.fields import LanguagesRequest, TranslateRequest
from aiayn.serve.detect import detect
from aiayn.serve.entry import Entry
from aiayn.serve.errors import ServeError, validation_message
from aiayn.serve.inputs import form_or_json, has_words
from aiayn.serve.keys import KeyStoreUnavailable
from aiayn.serve.models import ServedModel
from aiayn.serve.registry import Registry
from aiayn.serve.routes import Models
from aiayn.serve.terminology import terms_for, terms_key
from aiayn.serve.usage import UNLIMITED, period

router = APIRouter()

# a span over every word of a text: no cut between its sentences (split_sentences 0), only
# where the model's length forces one
WHOLE = r"\S(?:[\s\S]*\S)?"
_LINE_BREAK = re.compile(r"\r\n|[\r\n\u2028\u2029\x0b\x0c\x1c-\x1e\x85]")
MAX_GLOSSARIES = 5  # glossary_ids per request, as DeepL takes them


def candidates(served: list[tuple[str, str, Entry]], target: str) -> list[str]:
    """The languages a text asked for in ``target`` without ``source_lang`` may be in: those
    the served translators into ``target`` read, then ``target`` itself (a text in it comes
    back as it came)."""
    return list(dict.fromkeys([*(s for s, t, _ in served if t == target), target]))


async def detect_sources(
    served: list[tuple[str, str, Entry]], texts: list[str], target: str, req: TranslateRequest
) -> list[str]:
    """The source language of each of ``texts``, asked for in ``target`` without one (DeepL's
    ``detected_source_language``): the language each is found in (``aiayn.serve.detect``)
    among ``candidates``; of a tagged text (``tag_handling``), its words, not its tags. A text
    without words is read in the first of them."""
    if req.tag_handling is not None:
        tags, parser = _tags(req)

        def words(text: str, name: str) -> str:
            return " ".join(" ".join(s.words) for s in parser(text, name, tags).segments)

        names = [f"text[{i}]" for i in range(len(texts))]
        try:
            texts = await run_in_threadpool(lambda: list(map(words, texts, names)))
        except markup.MarkupError as e:
            raise ServeError(400, str(e), "text") from None
    found = await run_in_threadpool(detect, texts, candidates(served, target))
    return [code for code, _ in found]


@router.post("/v2/translate", openapi_extra=form_or_json(TranslateRequest))
async def translate(request: Request, registry: Models, caller: Guarded):
    """DeepL's text translation: one translation of each ``text``, in order, with the
    language it was read as and the characters billed."""
    req = await _request(request)
    texts = _texts(req, caller)
    served = pairs(registry)
    target, source = languages_of(served, req.target_lang, req.source_lang)
    _check_options(req)
    table = await glossary_table(request, req, caller, source, target)
    sources = [source] * len(texts) if source else await detect_sources(served, texts, target, req)
    async with billed(request, caller, sum(map(len, texts))):
        out = list(texts)  # a text asked for in its own language comes back as it came
        for language in dict.fromkeys(sources):
            if language == target:
                continue
            entry = next(m for s, t, m in served if (s, t) == (language, target))
            indices = [i for i, s in enumerate(sources) if s == language]
            async with registry.holding(entry.name) as model:  # loaded if it is not
                terms = await terms_for(model, table, request.app.state.glossary)
                done = await _translate(req, model, [texts[i] for i in indices], registry, terms)
            for i, text in zip(indices, done, strict=True):
                out[i] = text
    translations = []
    for text, translated, language in zip(texts, out, sources, strict=True):
        item = {
            "detected_source_language": language.upper(),
            "text": translated,
            "billed_characters": len(text),
        }
        if req.model_type is not None:
            item["model_type_used"] = "latency_optimized"
        translations.append(item)
    return {"translations": translations}


async def _request(request: Request) -> TranslateRequest:
    fields = await request_fields(request)
    fields = {k: v for k, v in fields.items() if v != "" or k == "text"}  # empty: left out
    if "text" not in fields:
        raise ServeError(400, "Parameter 'text' not specified.", "text")
    if "target_lang" not in fields:
        raise ServeError(400, "Value for 'target_lang' not supported.", "target_lang")
    try:
        return TranslateRequest.model_validate(fields)
    except ValidationError as e:
        _, message, param = validation_message(e.errors())
        raise ServeError(400, message, param) from None


def _texts(req: TranslateRequest, caller: Caller) -> list[str]:
    """The texts within the limits: 413 past them, as DeepL answers a request too large."""
    texts = [req.text] if isinstance(req.text, str) else list(req.text)
    config = caller.config
    if not texts:
        raise ServeError(400, "Parameter 'text' not specified.", "text")
    if len(texts) > config.max_texts:
        raise ServeError(
            413, f"text: {len(texts)} texts; at most {config.max_texts} a request (--max-texts)",
            "text",
        )  # fmt: skip
    for i, text in enumerate(texts):
        if len(text) > config.max_chars:
            raise ServeError(
                413,
                f"text[{i}]: {len(text)} characters; at most {config.max_chars} a text "
                f"({caller.chars_by})",
                f"text[{i}]",
            )
    return texts


def _check_options(req: TranslateRequest) -> None:
    """DeepL's options this server has not, answered as DeepL answers them for a language
    without them."""
    check_formality(req.formality, req.target_lang)
    if req.model_type == "quality_optimized":
        raise ServeError(
            400,
            "model_type: quality_optimized is not available for this language pair (each "
            "pair has one model: latency_optimized; prefer_quality_optimized falls back to it)",
            "model_type",
        )
    if req.custom_instructions:
        raise ServeError(
            400,
            f"custom_instructions: not supported for target_lang {req.target_lang.upper()} "
            "on this server",
            "custom_instructions",
        )
    if req.style_id is not None:
        raise ServeError(404, "style_id: no such style rule (this server has none)", "style_id")
    if req.translation_memory_id is not None:
        raise ServeError(
            404,
            "translation_memory_id: no such translation memory (this server has none)",
            "translation_memory_id",
        )


async def glossary_table(
    request: Request, req, caller: Caller, source: str | None, target: str
) -> dict[str, str] | None:
    """The terms of the request's glossaries for its language pair, the first glossary's
    term where two give one (None: no glossary)."""
    ids = list(req.glossary_ids or [])
    if req.glossary_id is not None:
        if ids:
            raise ServeError(
                400, "glossary_id and glossary_ids cannot be used together", "glossary_ids"
            )
        ids = [req.glossary_id]
    if not ids:
        return None
    if len(ids) > MAX_GLOSSARIES:
        raise ServeError(400, f"glossary_ids: {len(ids)}; at most {MAX_GLOSSARIES}", "glossary_ids")
    if source is None:
        raise ServeError(
            400,
            "Use of a glossary requires the source_lang parameter to be specified",
            "source_lang",
        )
    store = request.app.state.glossaries
    table: dict[str, str] = {}
    taken: set[str] = set()
    for glossary in ids:
        entries = await run_in_threadpool(store.entries, owner(caller), glossary, source, target)
        if entries is None:
            found = await run_in_threadpool(store.get, owner(caller), glossary)
            if found is None:
                raise ServeError(404, f"Glossary not found: {glossary}", "glossary_id")
            raise ServeError(
                400,
                f"glossary {glossary} has no entries from {source.upper()} to "
                f"{target.upper()} (the request's language pair)",
                "glossary_id",
            )
        for term, translation in entries:
            if term_key(term) not in taken:
                taken.add(term_key(term))
                table[term] = translation
    return table


async def _translate(
    req: TranslateRequest, model: ServedModel, texts: list[str], registry: Registry, terms
) -> list[str]:
    """``texts`` translated by ``model``: plain, or with their tags (``tag_handling``)."""
    config = registry.config
    cut = [*(config.kept or ()), WHOLE] if req.split_sentences == "0" else config.kept
    if req.tag_handling is not None:
        return await _translate_tagged(req, model, texts, registry, terms, cut)
    if req.split_sentences in ("0", "nonewlines"):  # a line break is a space
        texts = [_LINE_BREAK.sub(" ", text) for text in texts]
    passages = await run_in_threadpool(_passages, model, texts, cut)
    options = dict(beam=config.beam, nbest=1)
    results = []
    if passages.texts:
        results = await registry.run(
            model,
            passages.texts,
            lambda items: model.translate(  # LibreTranslate's /translate call: one batch
                items, scores=False, prefix=None, glossary=terms, keep=config.kept, **options
            ),
            ("translate", "", tuple(sorted(options.items())), terms_key(terms)),
        )
    return passages.join([t.text for t in results])


def _fits(model: ServedModel) -> Callable[[str], bool]:
    counts: dict[str, int] = {}

    def fits(text: str) -> bool:
        if text not in counts:
            counts[text] = model.token_counts([text])[0]
        return counts[text] <= model.max_text_tokens

    return fits


def _passages(model: ServedModel, texts: list[str], cut: list[str] | None) -> Passages:
    """``texts`` cut into the sentences ``model`` reads (a word too long for it: 400)."""
    fits = _fits(model)
    passages = Passages(texts, fits, has_words, cut)
    for text in passages.texts:
        if not fits(text):  # one word over the limit (a sentence is cut between words)
            raise ServeError(
                400,
                f"text: {text[:40]!r} is longer than model {model.name} reads (its max_len "
                f"{model.config.max_len} tokens), with no space to cut it at",
                "text",
            )
    return passages


async def _translate_tagged(
    req: TranslateRequest, model: ServedModel, texts: list[str], registry: Registry, terms, cut
) -> list[str]:
    """``texts`` holding XML or HTML tags: their text translated sentence by sentence, each
    element around the words aligned to the words it enclosed (``aiayn.data.markup``)."""
    config = registry.config
    tags, parser = _tags(req)
    names = [f"text[{i}]" for i in range(len(texts))]
    try:
        sentences = await run_in_threadpool(
            markup.read, texts, names, _fits(model), cut, tags, parser, has_words
        )
    except markup.MarkupError as e:
        raise ServeError(400, str(e), "text") from None
    options = dict(beam=config.beam)
    results = []
    if sentences.texts:
        results = await registry.run(
            model,
            sentences.texts,
            lambda items: model.translate(  # LibreTranslate's HTML call: one batch
                items, scores=False, alignment=True, glossary=terms, keep=config.kept, **options
            ),
            ("translate-aligned", tuple(sorted(options.items())), terms_key(terms)),
        )
    return sentences.render([(t.text, t.alignment or ()) for t in results])


def _tags(req: TranslateRequest) -> tuple[markup.Tags, Callable]:
    """The request's rules over its tags (``tag_handling``: xml or html), and the parser
    that reads them."""
    from aiayn.data.markup import xml

    tags = markup.Tags(
        splitting=frozenset(t.lower() for t in req.splitting_tags or ()),
        non_splitting=frozenset(t.lower() for t in req.non_splitting_tags or ()),
        ignored=frozenset(t.lower() for t in req.ignore_tags or ()),
        xml=req.tag_handling == "xml",
        outline=req.outline_detection is not False,
    )
    return tags, xml.parse if req.tag_handling == "xml" else markup.parse


@router.get("/v2/languages")
async def languages(
    request: Request,
    registry: Models,
    caller: Guarded,
    type: Literal["source", "target"] | None = Query(
        None, description="source (default) or target"
    ),  # noqa: A002
):
    """DeepL's language list: ``type`` source (default) or target, in the query string or a
    form body (DeepL's Python client sends a GET with a form)."""
    return await _languages(request, registry)


@router.post(
    "/v2/languages",
    openapi_extra={
        "requestBody": {**form_or_json(LanguagesRequest)["requestBody"], "required": False}
    },
)
async def languages_post(request: Request, registry: Models, caller: Guarded):
    """``GET /v2/languages``, as a POST (``type`` in the body)."""
    return await _languages(request, registry)


async def _languages(request: Request, registry: Registry) -> list[dict]:
    fields = await request_fields(request)
    kind = fields.get("type", "source")
    if kind not in ("source", "target"):
        raise ServeError(
            400, "Parameter 'type' is invalid. 'source' and 'target' are valid values.", "type"
        )
    served = pairs(registry)
    if kind == "source":
        codes = dict.fromkeys(s for s, _, _ in served)
        return [{"language": code.upper(), "name": name_of(code)} for code in codes]
    targets = dict.fromkeys(t for _, t, _ in served)
    return [
        {"language": code, "name": name, "supports_formality": False}
        for target in targets
        for code, name in target_codes(target).items()
    ]


@router.get("/v2/glossary-language-pairs")
async def glossary_language_pairs(registry: Models, caller: Guarded):
    """The language pairs a glossary may have: those of the served translators that place
    terms (not those decoding with CTranslate2 alone)."""
    served = [
        {"source_lang": s, "target_lang": t}
        for s, t, m in pairs(registry)
        if m.spec.engine != "ctranslate2"
    ]
    unique = {(p["source_lang"], p["target_lang"]): p for p in served}
    return {"supported_languages": list(unique.values())}


@router.get("/v2/usage")
async def usage(request: Request, caller: Guarded):
    """The characters the caller's API key translated this month (UTC) on DeepL's routes,
    against its ``--char-quota``; without keys nothing is counted."""
    store, key = request.app.state.usage, caller.key
    if store is None or key is None:
        return {"character_count": 0, "character_limit": UNLIMITED}
    try:
        used = await run_in_threadpool(store.used, key)
    except KeyStoreUnavailable as e:
        log.error("usage cannot be read: %s", e)
        raise ServeError(503, "usage cannot be read now; try again later") from None
    _, start, end = period()
    return {
        "character_count": used,
        "character_limit": key.char_quota if key.char_quota is not None else UNLIMITED,
        "start_time": start.isoformat().replace("+00:00", "Z"),
        "end_time": end.isoformat().replace("+00:00", "Z"),
    }
