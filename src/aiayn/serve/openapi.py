"""The server's OpenAPI document, saying what the server answers: every route's error statuses
with the error body's schema, and the limits this server was started with (texts per request,
characters per text, beam, new tokens) and the models it serves, so that a client generated
from ``/openapi.json`` sends what is accepted and expects what comes back.

FastAPI documents the request bodies from ``aiayn.serve.schemas``; this module adds, per
served set of models and ``ServeConfig``:

* the error answers of each route: 400 (a body that is not JSON), 404 (a model not served),
  413 (a body over ``--max-body-bytes``), 415 (a body that is not JSON or a form), 422 (a
  field out of range, named), 500 (an internal error, or models that failed to load) and 503
  (loading, or a full queue), with OpenAI's error body, or LibreTranslate's on its routes;
* the limits as JSON Schema constraints (``maxItems``, ``maxLength``, ``maximum``), and beam's
  bound on ``nbest``;
* ``model`` as one of the served models that fit the route: optional where only one fits,
  required where several do (null picks the only one);
* LibreTranslate's ``source`` and ``target`` as the served languages;
* ``glossary`` as none (an empty object or null) where every translator decodes with
  CTranslate2 alone, which has no constrained search.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

import aiayn
from aiayn.serve.access import AccessConfig
from aiayn.serve.config import FrontendConfig, ServeConfig
from aiayn.serve.errors import LIBRETRANSLATE_PATHS, is_deepl
from aiayn.serve.file_store import STORED
from aiayn.serve.registry import DECODER, ENCODER, TRANSLATOR


class ErrorDetail(BaseModel):
    message: str = Field(description="what is wrong, naming the field at fault")
    type: str = Field(description="invalid_request_error, overloaded_error or server_error")
    param: str | None = Field(description="the field at fault, when one is")
    code: int = Field(description="the HTTP status")


class ErrorResponse(BaseModel):
    """OpenAI's error body (every route but LibreTranslate's)."""

    error: ErrorDetail


class LibreTranslateError(BaseModel):
    """LibreTranslate's error body."""

    error: str


class DeepLError(BaseModel):
    """DeepL's error body."""

    message: str = Field(description="what is wrong, naming the field at fault")


STATUSES = {
    400: "the body is not valid JSON (or not a UTF-8 form); on LibreTranslate's routes, any "
    "invalid request (a field missing or out of range, a language not served, a limit)",
    401: "/metrics without its bearer token (--metrics-auth-token)",
    403: "an API key that is not in the server's database; /suggest without --suggestions",
    429: "over a request limit (--req-limit, --hourly-req-limit, --daily-req-limit, or the API "
    "key's), or too many wrong API keys from the client's address (--key-failures-limit): "
    "retry after Retry-After",
    404: "no such model is served",
    413: "the body is over the server's --max-body-bytes",
    415: "the body is neither JSON nor (LibreTranslate's routes) a form",
    422: "a field is missing, of the wrong type or out of range: the message names it",
    500: "an internal error, or the models failed to load",
    503: "the models are still loading, or the model's queue is full: retry after Retry-After",
}
POST_STATUSES = (400, 404, 413, 415, 422, 500, 503)
# DeepL's routes: its statuses, in its words
DEEPL_STATUSES = {
    400: "a field is missing or invalid, a language not served, a body not JSON or a form: "
    "the message names it",
    403: "no API key, or one not in the server's database (Authorization: DeepL-Auth-Key KEY)",
    404: "no such glossary or document (of this API key), or style rule",
    413: "the body is over --max-body-bytes, or its texts over --max-texts or --max-chars",
    414: "the path and query string are over 8192 bytes: send the fields in the body",
    415: "the body is neither JSON nor a form; or the glossary entries are asked in another "
    "format than TSV",
    429: "over a request limit (--req-limit ..., or the API key's): retry after Retry-After",
    456: "the API key's characters this month (aiayn keys add --char-quota) are spent",
    500: "an internal error, or the models failed to load",
    503: "the models are still loading, the queue is full, the document is not translated "
    "yet: retry after Retry-After",
}
# the family a route's model must be of ("classifier": encoder-only with a head)
ROUTE_FAMILIES = {
    "/v1/translate": TRANSLATOR,
    "/v1/attention": TRANSLATOR,
    "/v1/completions": DECODER,
    "/v1/embeddings": ENCODER,
    "/v1/classify": "classifier",
}
TEXT_FIELDS = {"text", "input", "q", "prompt"}


def install_openapi(app: FastAPI, registry) -> None:
    """Make ``app.openapi`` build the document described above, once, from ``registry``'s
    models and limits."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=aiayn.__version__,
                summary=app.summary,
                routes=app.routes,
            )
            document(
                schema,
                registry.config,
                served_models(registry),
                app.state.gate.access,
                app.state.frontend,
            )
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def served_models(registry) -> list[dict]:
    """Name, family and languages of each served model, its vocabulary, the most token ids
    it reads (a prompt's context, an encoder's text) and d_model, from the loaded models or,
    while they load, from their directories."""
    from aiayn.api.generator import context_length
    from aiayn.api.load import kind
    from aiayn.modeldir import ModelDir

    out = []
    for spec in registry.specs:
        loaded = registry.models.get(spec.name)
        if loaded is not None:
            family = "classifier" if loaded.is_classifier else loaded.family
            languages, config = loaded.languages, loaded.config
            tokens = loaded.context if family == DECODER else config.max_len - 1
        else:
            directory = ModelDir(spec.path)
            config = directory.config
            family = "classifier" if kind(config) == "encoder-only classifier" else config.family
            data = directory.run.get("data", {})
            languages = spec.languages or (
                (data["src_lang"], data["tgt_lang"])
                if family == TRANSLATOR and "src_lang" in data
                else None
            )
            if family == DECODER:
                tokens = context_length(config, directory.run)
            else:
                tokens = config.max_len - 1
        # CTranslate2 alone has no constrained search: such a translator takes no glossary
        terms = spec.engine != "ctranslate2"
        out.append(
            {
                "name": spec.name,
                "family": family,
                "languages": languages,
                "terms": terms,
                "vocab_size": config.vocab_size,
                "tokens": tokens,
                "d_model": config.d_model,
            }
        )
    return out


def fits(model: dict, family: str) -> bool:
    if family == ENCODER:  # a classifier's encoder embeds too
        return model["family"] in (ENCODER, "classifier")
    return model["family"] == family


def document(
    schema: dict,
    config: ServeConfig,
    models: list[dict],
    access: AccessConfig | None = None,
    frontend: FrontendConfig | None = None,
) -> None:
    """Add the error answers, the limits, the models and the languages to ``schema``; the
    bearer-key security scheme only where ``access`` requires keys."""
    access, frontend = access or AccessConfig(), frontend or FrontendConfig()
    if not access.checks_keys:  # no key is asked for: no scheme (a client would send one)
        schema.get("components", {}).pop("securitySchemes", None)
    else:  # DeepL's clients send theirs in their own scheme
        schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
        schemes["DeepL-Auth-Key"] = {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "DeepL-Auth-Key KEY (an API key: aiayn keys add), on DeepL's "
            "routes; or the auth_key field",
        }
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for model in (ErrorDetail, ErrorResponse, LibreTranslateError, DeepLError):
        body = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(body.pop("$defs", {}))
        components[model.__name__] = body
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            guarded = "security" in operation  # declares aiayn.serve.access.Guarded
            if not access.checks_keys:
                operation.pop("security", None)
            if is_deepl(path):
                _document_deepl_errors(path, method, operation, access)
                if guarded and access.api_keys:
                    operation["security"] = [{"DeepL-Auth-Key": []}]
            else:
                _document_errors(path, method, operation, guarded, access)
            for parameter in operation.get("parameters", []):
                if path.startswith("/download_file/") and parameter.get("name") == "name":
                    pattern = {"pattern": f"^{STORED.pattern}$"}  # the names the store makes
                    parameter["schema"] = {**parameter["schema"], **pattern}
                if parameter.get("name") == "model_id":  # GET /v1/models/{model_id}
                    parameter["schema"] = {
                        **parameter["schema"],
                        "enum": [m["name"] for m in models],
                    }
            body = operation.get("requestBody", {}).get("content", {})
            for media_type, media in body.items():
                if media_type != "application/json" and _nullable(media["schema"], components):
                    # a form has no null: its own schema, without the JSON body's nulls
                    media["schema"] = _without_nulls(_request_schema(media["schema"], components))
                target = _request_schema(media["schema"], components)
                _constrain(target, path, config, models, frontend)
                if is_deepl(path):
                    _constrain_deepl(target, path, models)
    for name in ("HTTPValidationError", "ValidationError"):  # FastAPI's 422, not ours
        components.pop(name, None)


def _document_errors(
    path: str, method: str, operation: dict, guarded: bool, access: AccessConfig
) -> None:
    downloads = path.startswith("/download_file/")
    lt = path in LIBRETRANSLATE_PATHS or downloads
    body = "LibreTranslateError" if lt else "ErrorResponse"
    if method == "post":
        statuses = POST_STATUSES
        if lt:  # LibreTranslate answers 400 where aiayn's routes answer 422
            statuses = tuple(s for s in statuses if s != 422)
        if guarded and access.checks_keys:
            statuses += (403,)
        if guarded and (access.limited or access.checks_keys):
            statuses += (429,)
        if path in ("/suggest", "/translate_file"):  # turned off (--suggestions, files)
            statuses += (403,)
        statuses = tuple(dict.fromkeys(statuses))
    elif downloads:  # a name not the store's (400), or no longer in it (404)
        statuses = (400, 404, 500, 503)
    elif "{" in path:
        statuses = (404, 422, 500, 503)
    elif path == "/health":
        statuses = (500, 503)  # answered with the health body, not an error body
    else:
        statuses = (500, 503)
    responses = operation.setdefault("responses", {})
    if path == "/v1/completions":  # stream: true answers server-sent events
        ok = responses.get("200", {}).setdefault("content", {})
        ok["text/event-stream"] = {  # each event, as OpenAPI 3.2 describes one
            "schema": {
                "type": "object",
                "properties": {
                    "data": {"type": "string", "description": "a CompletionResponse's JSON"},
                    "event": {"type": "string"},
                },
                "required": ["data"],
            }
        }
    for status in statuses:
        schema = {"$ref": f"#/components/schemas/{body}"}
        if path == "/health":
            schema = {"type": "object", "properties": {"status": {"type": "string"}}}
        responses[str(status)] = {
            "description": STATUSES[status],
            "content": {"application/json": {"schema": schema}},
        }


def _document_deepl_errors(path: str, method: str, operation: dict, access: AccessConfig):
    """DeepL's statuses for one of its routes, with its error body (FastAPI's 422 goes: DeepL
    answers 400)."""
    statuses = [400, 414, 500, 503]
    if access.api_keys:
        statuses.append(403)
    if access.limited or access.api_keys:
        statuses.append(429)
    if method in ("post", "put", "patch"):
        statuses += [413, 415]
    if "{" in path or path in ("/v2/translate", "/v2/document"):  # glossaries, documents
        statuses.append(404)
    if access.api_keys and path in ("/v2/translate", "/v2/document"):
        statuses.append(456)
    if path.endswith("/entries") and path.startswith("/v2/"):
        statuses.append(415)  # entries asked in another format than TSV
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)
    for status in sorted(set(statuses)):
        responses[str(status)] = {
            "description": DEEPL_STATUSES[status],
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/DeepLError"}}
            },
        }


def _constrain_deepl(schema: dict, path: str, models: list[dict]) -> None:
    """DeepL's language fields as the served languages in its codes, and its options as this
    server takes them (what it refuses for a language without it left out)."""
    from aiayn.serve.deepl.common import target_codes

    properties = schema.get("properties", {})
    pairs = [
        (m["languages"][0].lower(), m["languages"][1].lower(), m["terms"])
        for m in models
        if m["family"] == TRANSLATOR and m["languages"]
    ]
    if path in ("/v2/translate", "/v2/document") and "target_lang" in properties:
        targets = [c for t in dict.fromkeys(t for _, t, _ in pairs) for c in target_codes(t)]
        properties["target_lang"] = {**properties["target_lang"], "enum": targets}
        sources = list(dict.fromkeys(s.upper() for s, _, _ in pairs))
        field = properties["source_lang"]
        if "anyOf" in field:
            field["anyOf"] = [{"type": "string", "enum": sources}, {"type": "null"}]
        else:
            properties["source_lang"] = {**field, "enum": sources}
        for name, refused in (
            ("formality", ("more", "less")),
            ("model_type", ("quality_optimized",)),
        ):
            field = properties.get(name, {})
            for option in field.get("anyOf", [field]):
                if "enum" in option:
                    option["enum"] = [v for v in option["enum"] if v not in refused]
        for name in ("style_id", "translation_memory_id", "custom_instructions"):
            properties.pop(name, None)  # none exists here: any is refused
    glossary = [(s, t) for s, t, terms in pairs if terms]
    if path.startswith(("/v2/glossaries", "/v3/glossaries")):
        fields = [properties]
        if "dictionaries" in properties:
            field = properties["dictionaries"]
            fields = [o["items"]["properties"] for o in field.get("anyOf", [field]) if "items" in o]
        for field in fields:
            for name, codes in (
                ("source_lang", [s for s, _ in glossary]),
                ("target_lang", [t for _, t in glossary]),
            ):
                if name in field and codes:  # none (CTranslate2 alone): any is refused
                    field[name] = {**field[name], "enum": list(dict.fromkeys(codes))}


def _nullable(schema: dict, components: dict) -> bool:
    """Whether a body's schema has a field that may be null (besides ``api_key``, which a
    form leaves out)."""
    properties = _request_schema(schema, components).get("properties", {})
    return any(
        {"type": "null"} in field.get("anyOf", [])
        for name, field in properties.items()
        if name not in ("api_key", "glossary")
    )


def _without_nulls(schema: dict) -> dict:
    """A copy of ``schema`` whose fields that may be null (in JSON: ``"format": null``) may not."""
    schema = copy.deepcopy(schema)
    for name, field in schema.get("properties", {}).items():
        options = [o for o in field.get("anyOf", []) if o != {"type": "null"}]
        if name not in ("api_key", "glossary") and len(options) < len(field.get("anyOf", [])):
            field.pop("anyOf")
            field.update(options[0]) if len(options) == 1 else field.update(anyOf=options)
    return schema


def _request_schema(schema: dict, components: dict) -> dict:
    """The schema to constrain: a component (copied per route by the caller) or inline."""
    ref = schema.get("$ref")
    if ref:
        name = ref.rsplit("/", 1)[-1]
        return components[name]
    return schema


def _constrain(
    schema: dict, path: str, config: ServeConfig, models: list[dict], frontend: FrontendConfig
) -> None:
    properties = schema.get("properties", {})
    fitting = [m for m in models if fits(m, ROUTE_FAMILIES.get(path, ""))]
    for name in TEXT_FIELDS & set(properties):
        field = properties[name]
        single = field.get("type") == "string"  # a text, not "a text or a list of texts"
        properties[name] = _texts(field, config, single=single, models=fitting)
    if "dimensions" in properties and fitting:  # an encoder's d_model, nothing else
        sizes = sorted({m["d_model"] for m in fitting})
        properties["dimensions"] = {
            **properties["dimensions"],
            "anyOf": [{"type": "integer", "enum": sizes}, {"type": "null"}],
        }
    if "prefix" in properties:
        properties["prefix"] = {**properties["prefix"], "maxLength": config.max_chars}
    for name, limit in (
        ("beam", config.max_beam),
        ("nbest", config.max_beam),
        ("alternatives", _alternatives_limit(config, frontend)),
        ("max_len_offset", config.max_new_tokens),
        ("max_tokens", config.max_new_tokens),
    ):
        if name in properties:
            properties[name]["maximum"] = limit
            if isinstance(properties[name].get("default"), int):  # a default over it is cut
                properties[name]["default"] = min(properties[name]["default"], limit)
    if "nbest" in properties and "beam" in properties:  # nbest <= beam (default 1)
        schema["anyOf"] = [
            {
                "properties": {"beam": {"const": beam}, "nbest": {"maximum": beam}},
                "required": ["beam"],
            }
            for beam in range(1, config.max_beam + 1)
        ] + [{"not": {"required": ["beam"]}, "properties": {"nbest": {"maximum": 1}}}]
    family = ROUTE_FAMILIES.get(path)
    if family is not None and "model" in properties:
        names = [m["name"] for m in models if fits(m, family)]
        if len(names) > 1:
            properties["model"] = {
                "type": "string",
                "enum": names,
                "description": f"one of the served models that fit {path}: required, since "
                f"{len(names)} do",
            }
            schema["required"] = sorted({*schema.get("required", []), "model"})
        else:
            properties["model"] = {
                "anyOf": [{"type": "string", "enum": names}, {"type": "null"}],
                "default": None,
                "description": "the served model (null or absent: the only one that fits)",
            }
    if path == "/v1/classify":  # a class of nothing is no answer
        _each_text(properties["input"], {"pattern": r"\S"})
    if path in ("/detect", "/suggest"):  # an empty text is a missing one, as LibreTranslate
        for name in ("q", "s"):  # reads it (a form cannot tell "" from [""])
            if name in properties:
                _each_text(properties[name], {"minLength": 1})
    if path == "/translate" and "format" in properties:  # html: no prefix
        schema["anyOf"] = [
            {"not": {"required": ["format"]}},
            {"properties": {"format": {"const": "text"}}},
            {"properties": {"prefix": {"maxLength": 0}}},
        ]
    translators = [m for m in models if m["family"] == TRANSLATOR]
    if "glossary" in properties and translators and not any(m["terms"] for m in translators):
        glossary = {  # every translator decodes with CTranslate2 alone
            **properties["glossary"],
            "description": "none: this server decodes with CTranslate2 (aiayn serve --engine "
            "ctranslate2), which has no constrained search; an empty object or null only",
        }
        if "anyOf" in glossary:  # JSON (a form's is JSON text, read by the server)
            glossary["anyOf"] = [{"type": "object", "maxProperties": 0}, {"type": "null"}]
        properties["glossary"] = glossary
    pairs = [tuple(m["languages"]) for m in translators if m["languages"]]
    if path in ("/translate", "/translate_file") and "target" in properties:
        properties["source"] = {
            **properties["source"],
            "enum": ["auto", *dict.fromkeys(a for a, _ in pairs)],
        }
        same = [a for a, _ in pairs] if path == "/translate" else []  # a text in it: as it is
        properties["target"] = {
            **properties["target"],
            "enum": list(dict.fromkeys([*(b for _, b in pairs), *same])),
        }


def _alternatives_limit(config: ServeConfig, frontend: FrontendConfig) -> int:
    limit = config.max_beam - 1
    return limit if frontend.alternatives_limit == -1 else min(limit, frontend.alternatives_limit)


def _texts(field: dict, config: ServeConfig, single: bool, models: list[dict]) -> dict:
    """A text field: a string of at most ``max_chars`` characters, or (unless ``single``) a
    list of 1 to ``max_texts`` of them; where the field takes token ids (OpenAI's prompt and
    input), also a list of ids every one of ``models`` reads, or 1 to ``max_texts`` such
    lists; null where the field may be null."""
    text = {"type": "string", "maxLength": config.max_chars}
    out = {k: v for k, v in field.items() if k not in ("anyOf", "type", "items")}
    if single:
        return {**out, **text}
    texts = {"type": "array", "items": copy.deepcopy(text), "minItems": 1}
    texts["maxItems"] = config.max_texts
    options = field.get("anyOf", [])
    if any(o.get("items", {}).get("type") == "integer" for o in options) and models:
        ids = {
            "type": "array",
            "items": {
                "type": "integer",
                "minimum": 0,
                "maximum": min(m["vocab_size"] for m in models) - 1,
            },
            "minItems": 1,
            "maxItems": min(m["tokens"] for m in models),
        }
        lists = {"type": "array", "items": ids, "minItems": 1, "maxItems": config.max_texts}
        texts = [texts, ids, lists]
    else:
        texts = [texts]
    null = [{"type": "null"}] if {"type": "null"} in options else []
    return {**out, "anyOf": [text, *texts, *null]}


def _each_text(field: dict, constraint: dict) -> None:
    """Add ``constraint`` to each string of a text field built by ``_texts``."""
    for option in field.get("anyOf", [field]):
        (option["items"] if option.get("type") == "array" else option).update(constraint)
