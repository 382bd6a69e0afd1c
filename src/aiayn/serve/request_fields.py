"""What the guard (``aiayn.serve.access``) reads of a request before any route does: the
fields of its body (JSON or, on LibreTranslate's routes, a form, with the query string's),
a DeepL key, a DeepL URL's length, and its cost against the request limits (``texts_in``)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from fastapi import Request

from aiayn.serve.errors import LIBRETRANSLATE_PATHS, PARSED_JSON, ServeError, is_form, query_fields

# a route's limits on its form (Starlette's defaults elsewhere: 1000 files, 1000 fields)
FORM_LIMITS = {
    "/translate_file": {"max_files": 1, "max_fields": 16},
    "/v2/document": {"max_files": 1, "max_fields": 32},  # DeepL's upload
}


async def body_fields(request: Request) -> dict:
    """The fields of a request's body (JSON or, on LibreTranslate's routes, a form); {} for
    a body that is not an object, which the route then refuses."""
    if request.method not in ("POST", "PUT", "PATCH"):
        return {}
    pairs = None
    if is_form(request.scope):
        await request.body()  # kept by the request: the route reads it again
        # parsed once (the request keeps it for the route): with the route's own limits
        form = await request.form(**FORM_LIMITS.get(request.scope["path"], {}))
        pairs = [(k, v) for k, v in form.multi_items() if isinstance(v, str)]
    elif request.scope["path"] in LIBRETRANSLATE_PATHS and PARSED_JSON not in request.scope:
        pairs = []  # no body: the query string's fields alone
    if pairs is not None:  # and the query string's, as LibreTranslate reads them
        given = {k for k, _ in pairs}
        pairs += [(k, v) for k, v in query_fields(request.scope) if k not in given]
        fields: dict = {}
        for name, value in pairs:
            fields.setdefault(name, []).append(value)
        return {k: v if len(v) > 1 else v[0] for k, v in fields.items()}
    if PARSED_JSON in request.scope:  # JsonBody's, on LibreTranslate's routes
        data = request.scope[PARSED_JSON]
    else:
        body = await request.body()  # kept by the request: the route reads it again
        try:
            data = json.loads(body) if body.strip() else None
        except ValueError:  # JsonBody answers it
            return {}
    return data if isinstance(data, dict) else {}


MAX_URL = 8192  # bytes of a DeepL route's path and query string (414 above)


def check_url(request: Request) -> None:
    """A DeepL route's URL within ``MAX_URL`` bytes: 414 above, as DeepL refuses one."""
    scope = request.scope
    if len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") > MAX_URL:
        raise ServeError(
            414, f"URI too long: over {MAX_URL} bytes; send the fields in the body (POST)"
        )


def deepl_key(request: Request) -> str | None:
    """The key of ``Authorization: DeepL-Auth-Key KEY`` (DeepL's clients), or None."""
    scheme, _, value = request.headers.get("authorization", "").strip().partition(" ")
    return (value.strip() or None) if scheme.lower() == "deepl-auth-key" else None


@dataclass(frozen=True)
class Cost:
    """What a request counts as against the request limits: ``texts`` requests, read from
    ``field`` (``how``: the count's make-up, for the message where it is a product)."""

    texts: int
    field: str = "q"
    how: str = ""


def texts_in(fields: dict) -> Cost:
    """What a request costs against the request limits: the texts a model decodes for it,
    at least 1, every route by this one rule. A list of texts (``q``, ``text``, ``input``,
    ``prompt``) counts each, as LibreTranslate counts a batch; so does a list of token id
    lists (one list of ids is one input); a completion's ``n`` choices count each, prompts
    times n."""
    name = next((n for n in ("q", "text", "input", "prompt") if n in fields), "q")
    texts = _inputs(fields.get(name))
    n = fields.get("n") if name == "prompt" else None
    if isinstance(n, int) and not isinstance(n, bool) and n > 1:
        return Cost(texts * n, "n", f" ({texts} prompts x n {n})")
    return Cost(texts, name)


def _inputs(value) -> int:
    """The inputs in a field as ``inputs.texts_or_ids`` reads it: a text or one list of
    token ids is one; a list of texts or of token id lists, each."""
    if not isinstance(value, list) or not value:
        return 1
    if isinstance(value[0], (str, list)):
        return len(value)
    return 1  # a list of token ids
