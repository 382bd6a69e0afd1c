"""Which languages the server translates, and which model answers a LibreTranslate request:
the languages it lists, a text's language found among them (``aiayn.serve.detect``) under
``source: "auto"``, the model of a pair, and LibreTranslate's refusals of the rest (its
status codes and messages)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from aiayn.serve.access import Caller
from aiayn.serve.detect import detect
from aiayn.serve.errors import ServeError
from aiayn.serve.inputs import LANGUAGE_NAMES, texts_of
from aiayn.serve.models import ServedModel
from aiayn.serve.registry import Registry


def translators(registry: Registry) -> list[ServedModel]:
    """The translators with known languages, once the models are loaded."""
    registry.require_ready()
    return [m for m in registry.models.values() if m.is_translator and m.languages]


def served_languages(registry: Registry) -> list[str]:
    """Every language a translator here reads or writes, in ``/languages``' order: what
    ``/detect`` and ``source: "auto"`` tell apart (as LibreTranslate detects among the
    languages it has installed)."""
    return list(dict.fromkeys(code for m in translators(registry) for code in m.languages))


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


def pick_translator(registry: Registry, source: str, target: str) -> ServedModel:
    """The model translating ``source`` into ``target`` ('auto': the only one into it, where
    no language could be detected); LibreTranslate's answers for a language not served and
    a pair not served."""
    served = translators(registry)
    codes = {code for m in served for code in m.languages}
    for code in (source, target):
        if code not in codes and not (code == source == "auto"):
            raise ServeError(
                400, f"{code} is not supported", "source" if code == source else "target"
            )
    fits = [m for m in served if m.languages[1] == target and source in ("auto", m.languages[0])]
    if not fits:
        raise ServeError(
            400,
            f"{language_name(target)} ({target}) is not available as a target language from "
            f"{language_name(source)} ({source})",
            "target",
        )
    sources = list(dict.fromkeys(m.languages[0] for m in fits))
    if source == "auto" and len(sources) > 1:
        raise ServeError(
            400,
            f"source: 'auto' cannot choose among {', '.join(sources)} (no language was "
            "found in the text); name the source",
            "source",
        )
    return fits[0]


async def detected_sources(req, registry: Registry, caller: Caller, texts: list[str]) -> list:
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


def model_for(registry: Registry, source: str | None, target: str) -> ServedModel | None:
    """The model translating ``source`` into ``target`` (``pick_translator``), or None where
    a text comes back as it came: it is in ``target`` already, or has nothing to translate
    (``source`` None)."""
    if source is None or same_language(registry, source, target) is not None:
        return None
    return pick_translator(registry, source, target)
