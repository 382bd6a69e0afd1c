"""Which languages the server translates, and how a LibreTranslate request's texts reach
their target: the languages it lists, each text's language found among them
(``aiayn.serve.detect``) under ``source: "auto"``, and the route from that language to the
target (``aiayn.serve.pairs``: a pair served directly or through a pivot), or none where a
text comes back as it came."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from aiayn.serve.access import Caller
from aiayn.serve.detect import detect
from aiayn.serve.entry import Entry
from aiayn.serve.errors import ServeError
from aiayn.serve.inputs import LANGUAGE_NAMES, texts_of
from aiayn.serve.pairs import Route, pick_route
from aiayn.serve.registry import Registry


def translators(registry: Registry) -> list[Entry]:
    """The translators with known languages (loaded or not), once the server is ready."""
    registry.require_ready()
    return [e for e in registry.entries.values() if e.is_translator and e.languages]


def served_languages(registry: Registry) -> list[str]:
    """Every language a translator here reads or writes, in ``/languages``' order: what
    ``/detect`` and ``source: "auto"`` tell apart (as LibreTranslate detects among the
    languages it has installed)."""
    registry.require_ready()
    return list(registry.pairs.codes)


def language_name(code: str) -> str:
    """The English name of ``code`` (the code itself where it has none here)."""
    return LANGUAGE_NAMES.get(code, code)


def same_language(registry: Registry, source: str, target: str) -> str | None:
    """The served language ``target`` where a text asked for in it already is in it (its
    ``source``, given or detected): LibreTranslate answers a text translated into its own
    language as it came."""
    if source == target and target in served_languages(registry):
        return target
    return None


def route_for(registry: Registry, source: str | None, target: str) -> Route | None:
    """The route translating ``source`` into ``target`` (``pick_route``: direct or through a
    pivot; LibreTranslate's 400 where there is none), or None where a text comes back as it
    came: it is in ``target`` already, or has nothing to translate (``source`` None)."""
    if source is None or same_language(registry, source, target) is not None:
        return None
    return pick_route(registry, source, target)


async def detected_sources(
    req, registry: Registry, caller: Caller, texts: list[str]
) -> list[tuple[str, float]]:
    """Each text's language and confidence (``aiayn.serve.detect``) among the languages this
    server lists, for a target it serves; the words of an HTML text, not its markup."""
    candidates = served_languages(registry)
    if req.target not in candidates:
        raise ServeError(400, f"{req.target} is not supported", "target")
    if req.format == "html":
        from aiayn.data import markup

        texts_of(req.q, "q", caller)  # the whole markup within --max-chars
        names = ["q"] if isinstance(req.q, str) else [f"q[{i}]" for i in range(len(texts))]

        def words(html: str, name: str) -> str:
            return " ".join(" ".join(s.words) for s in markup.parse(html, name).segments)

        try:
            texts = await run_in_threadpool(lambda: list(map(words, texts, names)))
        except markup.MarkupError as e:
            raise ServeError(400, str(e), "q") from None
    return await run_in_threadpool(detect, texts, candidates)


async def detected_source(registry: Registry, text: str, target: str) -> str:
    """The language ``text`` is in among the served ones, for a pair into ``target`` (what
    ``/suggest`` stores for ``source`` "auto"): the one found where it translates into
    ``target``; else (none found, or ``target`` itself) the one source that does
    (``pick_route``'s 'auto')."""
    candidates = served_languages(registry)
    if target in candidates:
        ((found, confidence),) = await run_in_threadpool(detect, [text], candidates)
        if confidence > 0 and found != target:
            return pick_route(registry, found, target).source
    return pick_route(registry, "auto", target).source
