"""What a request brings: its body (JSON or a form), its texts within the limits, its options.

Each check raises ``ServeError`` naming the field and the limit (with its flag). ``JsonBody``
checks every body before the routes read it: JSON in UTF-8, nested at most ``MAX_DEPTH``
levels, without lone surrogates (``"\\ud800"`` is valid JSON but no Unicode text).
"""

from __future__ import annotations

import codecs
import json
import re
import string
import sys
from typing import Any
from urllib.parse import parse_qsl

from fastapi import Request
from pydantic import BaseModel, ValidationError

from aiayn.serve.access import Caller
from aiayn.serve.config import ServeConfig
from aiayn.serve.errors import (
    LIBRETRANSLATE_PATHS,
    PARSED_JSON,
    ServeError,
    error_response,
    is_form,
    media_type,
    query_fields,
    replaying,
    validation_message,
)
from aiayn.serve.models import ServedModel

LANGUAGE_NAMES = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "fi": "Finnish", "fr": "French", "hu": "Hungarian",
    "it": "Italian", "ja": "Japanese", "ko": "Korean", "nl": "Dutch", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sv": "Swedish", "tr": "Turkish",
    "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip


def has_words(text: str) -> bool:
    """Whether ``text`` holds a letter outside URLs and e-mail addresses: a text without one
    (an emoji, a number, a URL) has nothing to translate, and a model given it invents words.

    What ``(?:[a-zA-Z][a-zA-Z0-9+.-]*://|www\\.)\\S+|\\S+@\\S+\\.\\w+`` would remove, found
    in time in proportion to each word (between white space): that expression, tried at each
    character, read a long word again from each one, in time growing with its square."""
    return any(_letter_outside_links(word) for word in text.split() if _has_letter(word))


def _has_letter(text: str) -> bool:
    return any(c.isalpha() for c in text)


def _letter_outside_links(word: str) -> bool:
    """Whether ``word`` (no white space) has a letter outside the URLs and e-mail addresses
    in it, as the expression of ``has_words`` finds them: leftmost first, a URL (``scheme://``
    after a letter, or ``www.``, and a character after) to the word's end, an address from
    where it is tried (the last "@" before the last "." followed by a word character) to
    the end of the word characters after that "."."""
    if "://" not in word and "www." not in word and "@" not in word:  # no link (most words)
        return _has_letter(word)
    at = 0
    if _link_start(word, 0) != 0:  # a URL there is tried first
        at = _mail_end(word) or 0  # an address from the start: none after it
    link = _link_start(word, at)
    return _has_letter(word[at : len(word) if link is None else link])


def _mail_end(word: str) -> int | None:
    """Where an address in ``word`` tried from its first character ends (None: none)."""
    dot = next(
        (d for d in range(len(word) - 2, 1, -1) if word[d] == "." and _word_char(word[d + 1])),
        None,
    )
    if dot is None or "@" not in word[1 : dot - 1]:
        return None
    end = dot + 1
    while end < len(word) and _word_char(word[end]):
        end += 1
    return end


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


_LETTERS = frozenset(string.ascii_letters)
_SCHEME = _LETTERS | frozenset(string.digits + "+.-")


def _link_start(word: str, at: int) -> int | None:
    """Where the first URL of ``word`` from ``at`` begins (None: none): ``www.``, or the
    first ASCII letter of the scheme run before ``://``, each with a character after."""
    starts = []
    www = word.find("www.", at)
    if www != -1 and www + 4 < len(word):
        starts.append(www)
    colon = word.find("://", at)
    while colon != -1:
        if colon + 3 < len(word):
            run = colon
            while run > at and word[run - 1] in _SCHEME:
                run -= 1
            letter = next((i for i in range(run, colon) if word[i] in _LETTERS), None)
            if letter is not None:
                starts.append(letter)
                break
        colon = word.find("://", colon + 3)
    return min(starts, default=None)


def texts_of(value: str | list[str], field: str, limits: ServeConfig | Caller) -> list[str]:
    """The texts of a request, within the per-request limits (a ``Caller``'s: the server's,
    with its API key's characters per text)."""
    config, chars_by = (
        (limits.config, limits.chars_by) if isinstance(limits, Caller) else (limits, "--max-chars")
    )
    texts = [value] if isinstance(value, str) else list(value)
    if not texts:
        raise ServeError(422, f"{field}: give at least one text", field)
    if len(texts) > config.max_texts:
        raise ServeError(
            422,
            f"{field}: {len(texts)} texts; at most {config.max_texts} per request (--max-texts)",
            field,
        )
    for i, text in enumerate(texts):
        if len(text) > config.max_chars:
            name = field if isinstance(value, str) else f"{field}[{i}]"
            raise ServeError(
                422,
                f"{name}: {len(text)} characters; at most {config.max_chars} per text ({chars_by})",
                name,
            )
    return texts


def check_tokens(model: ServedModel, texts: list[str], value, field: str) -> list[int]:
    """Token counts of ``texts``; a text the model cannot read whole is an error."""
    counts = model.token_counts(texts)
    for i, n in enumerate(counts):
        if n > model.max_text_tokens:
            name = field if isinstance(value, str) else f"{field}[{i}]"
            raise ServeError(
                422,
                f"{name}: {n} tokens; model {model.name} reads at most {model.max_text_tokens} "
                f"(its max_len {model.config.max_len}, with eos)",
                name,
            )
    return counts


def texts_or_ids(
    value: str | list[str] | list[int] | list[list[int]], field: str, limits: ServeConfig | Caller
) -> list[str] | list[list[int]]:
    """The inputs of an OpenAI request: texts (``texts_of``), or token id lists (one list of
    ids, or a list of them) within ``--max-texts``."""
    if not (isinstance(value, list) and value and not isinstance(value[0], str)):
        return texts_of(value, field, limits)
    lists = value if isinstance(value[0], list) else [value]
    config = limits.config if isinstance(limits, Caller) else limits
    if len(lists) > config.max_texts:
        raise ServeError(
            422,
            f"{field}: {len(lists)} token id lists; at most {config.max_texts} per request "
            "(--max-texts)",
            field,
        )
    return lists


def check_ids(model: ServedModel, lists: list[list[int]], value, field: str, limit: str) -> None:
    """Token id lists ``model`` can read: ids of its vocabulary, at most ``limit`` (the name
    of a ``ServedModel`` attribute: ``context``, ``max_text_tokens``) ids in a list."""
    vocab, most = model.config.vocab_size, getattr(model, limit)
    for i, ids in enumerate(lists):
        name = f"{field}[{i}]" if isinstance(value[0], list) else field
        bad = next((t for t in ids if t >= vocab), None)
        if bad is not None:
            raise ServeError(
                422, f"{name}: token id {bad} is not in model {model.name}'s vocabulary "
                f"(0 to {vocab - 1})", name,
            )  # fmt: skip
        if len(ids) > most:
            why = "its training context" if limit == "context" else "with eos"
            raise ServeError(
                422, f"{name}: {len(ids)} tokens; model {model.name} reads at most {most} ({why})",
                name,
            )  # fmt: skip


def check_beam(beam: int, config: ServeConfig, field: str = "beam") -> None:
    if beam > config.max_beam:
        message = f"{field}: {beam} is over the limit {config.max_beam} (--max-beam)"
        raise ServeError(422, message, field)


def check_prefix(prefix: str, config: ServeConfig) -> None:
    """A translation prefix is a text like another: at most ``--max-chars`` characters."""
    if len(prefix) > config.max_chars:
        raise ServeError(
            422,
            f"prefix: {len(prefix)} characters; at most {config.max_chars} (--max-chars)",
            "prefix",
        )


def default_within(req, field: str, limit: int) -> int:
    """``req.field``, or where the client left it out or sent null, its default cut to the
    server's ``limit`` (a default is never refused)."""
    value = getattr(req, field)
    if value is not None and field in req.model_fields_set:
        return value
    return min(type(req).model_fields[field].default, limit)


def check_output_length(max_len_offset: int, config: ServeConfig) -> None:
    """A translation may run ``max_len_offset`` tokens past its source: at most the server's
    ``--max-new-tokens``, as a completion (a model that never stops costs that many steps)."""
    if max_len_offset > config.max_new_tokens:
        raise ServeError(
            422,
            f"max_len_offset: {max_len_offset} is over the limit {config.max_new_tokens} "
            "(--max-new-tokens)",
            "max_len_offset",
        )


def rounded(weights) -> list:
    """Attention weights (H, Q, K) as nested lists with 4 decimals (a smaller answer)."""
    return ((weights * 1e4).round() / 1e4).tolist()


MAX_DEPTH = 64  # levels of JSON arrays and objects in a request body
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def parse_json(body: bytes) -> Any:
    """The JSON value of a request body. Bytes that are not UTF-8, bad syntax, nesting deeper
    than ``MAX_DEPTH`` (400) or a string holding a lone surrogate (422) raise ``ServeError``
    naming the byte, the line and column, or the field."""
    body = body.removeprefix(codecs.BOM_UTF8)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        line = body.count(b"\n", 0, e.start) + 1
        column = e.start - (body.rfind(b"\n", 0, e.start) + 1) + 1
        raise ServeError(
            400,
            f"body: not UTF-8: byte 0x{body[e.start]:02x} at position {e.start} (line {line}, "
            f"column {column}); send JSON in UTF-8",
            "body",
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        message = f"body: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})"
        raise ServeError(400, message, "body") from None
    except ValueError:  # an integer past Python's limit of digits (its message: Python's advice)
        limit = sys.get_int_max_str_digits()
        message = f"body: a number in the JSON body is too long (over {limit} digits)"
        raise ServeError(400, message, "body") from None
    except RecursionError:
        message = f"body: JSON nested too deeply; at most {MAX_DEPTH} levels"
        raise ServeError(400, message, "body") from None
    # JSON text can only spell a lone surrogate as an escape: without one, check the depth only
    check_json_value(data, texts=_SURROGATE_ESCAPE.search(text) is not None)
    return data


def check_json_value(data: Any, texts: bool = True) -> None:
    """Refuse nesting past ``MAX_DEPTH`` and strings (values or keys) with a lone surrogate,
    naming the field (``q[1]``, ``messages[0].content``); ``texts`` False skips the strings."""
    stack: list[tuple[str, Any, int]] = [("", data, 0)]
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, str):
            _check_text(path or "body", value)
            continue
        if depth >= MAX_DEPTH:
            message = f"body: JSON nested over {MAX_DEPTH} levels (at {path or 'body'})"
            raise ServeError(400, message, "body")
        kinds = (dict, list, str) if texts else (dict, list)
        if isinstance(value, list):
            pairs = [
                (f"{path or 'body'}[{i}]", v) for i, v in enumerate(value) if isinstance(v, kinds)
            ]
        elif isinstance(value, dict):
            pairs = []
            for key, v in value.items():
                name = f"{path}.{key}" if path else key
                if texts:
                    _check_text(f"{name} (the name)", key, name)
                if isinstance(v, kinds):
                    pairs.append((name, v))
        else:  # null, a number or a boolean: only the whole body can be one
            continue
        stack.extend((name, v, depth + 1) for name, v in reversed(pairs))


def _check_text(name: str, text: str, param: str | None = None) -> None:
    if text.isascii() or not (found := _SURROGATE.search(text)):
        return
    raise ServeError(  # error_body writes any lone surrogate of the name escaped
        422,
        f"{name}: {found.group()!r} at position {found.start()} is a lone surrogate, not a "
        "Unicode character (a UTF-16 half without its pair)",
        param or name,
    )


class JsonBody:
    """ASGI middleware: a request body must be JSON as ``parse_json`` takes it (LibreTranslate's
    routes also take forms); anything else is answered 400, 415 or 422 naming the problem
    before a route reads the body, which is then replayed to the application; on
    LibreTranslate's routes with its value too (the scope's ``PARSED_JSON``: the access check
    and the route parse it no more). ``is_form`` decides what is a form."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        if is_form(scope):
            return await self.app(scope, receive, send)
        media = media_type(scope)
        libretranslate = scope["path"] in LIBRETRANSLATE_PATHS
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            if body.strip():
                is_json = media == "application/json" or (
                    media.startswith("application/") and media.endswith("+json")
                )
                if not is_json and not libretranslate:
                    raise ServeError(
                        415,
                        f"body: Content-Type {media or '(none)'}; send JSON with "
                        "Content-Type: application/json",
                        "body",
                    )
                data = parse_json(body)
                if libretranslate:  # the routes that read it (the others' models parse it)
                    scope[PARSED_JSON] = data
        except ServeError as e:
            response = error_response(scope["path"], e.status, e.message, e.param)
            return await response(scope, receive, send)
        return await self.app(scope, replaying(body, receive), send)


async def libretranslate_body(
    request: Request, schema: type[BaseModel], empty_q: bool = False
) -> BaseModel:
    """A LibreTranslate body, JSON or form-encoded (as its clients send it), with the fields
    of the query string where the body is not JSON (``query_fields``), read as LibreTranslate
    reads them: a language code in any case, an empty or null field missing (an empty ``q``
    is a text only where ``empty_q``: it translates to the empty text), a null format text."""
    if PARSED_JSON in request.scope:  # JsonBody parsed and checked it
        pairs = None
        data = request.scope[PARSED_JSON]
    elif media_type(request.scope) == "multipart/form-data" and is_form(request.scope):
        form = await request.form()
        pairs = [(k, v) for k, v in form.multi_items() if isinstance(v, str)]
    elif is_form(request.scope):
        body = await request.body()
        try:
            pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, errors="strict")
        except ValueError as e:  # UnicodeDecodeError: not UTF-8
            raise ServeError(400, f"body: a form that is not UTF-8 ({e})", "body") from None
    else:  # no body: the query string's fields alone
        pairs = []
    if pairs is not None:
        given = {k for k, _ in pairs}
        pairs = pairs + [(k, v) for k, v in query_fields(request.scope) if k not in given]
        data: dict = {}
        for key, value in pairs:
            data.setdefault(key, []).append(value)
        data = {k: v if len(v) > 1 else v[0] for k, v in data.items()}
        check_json_value(data)
    if not isinstance(data, dict):
        raise ServeError(400, "Invalid JSON format", "body")
    for name, field in schema.model_fields.items():  # LibreTranslate's words for a missing one
        if not (field.is_required() or (name in ("source", "target") and name in data)):
            continue  # absent: its default
        value = data.get(name)
        if name == "q" and isinstance(value, list) and "" in value and not empty_q:
            value = ""  # a list with an empty text: nothing to detect in it
        if value in (None, [], "") and not (empty_q and name == "q" and value == ""):
            raise ServeError(400, f"Invalid request: missing {name} parameter", name)
    if "format" in schema.model_fields and data.get("format") not in (None, "", "text", "html"):
        raise ServeError(400, f"{data['format']} format is not supported", "format")
    if data.get("format") in ("", None) and "format" in data:
        data = {**data, "format": "text"}
    for name in ("source", "target"):  # "DE" is "de", as LibreTranslate reads a code
        if name in schema.model_fields and isinstance(data.get(name), str):
            data = {**data, name: data[name].lower()}
    try:  # a form's values are all strings: read them as the fields' types
        return schema.model_validate(data, context={"form": pairs is not None})
    except ValidationError as e:
        errors = e.errors()
        if errors[0].get("loc") == ("alternatives",) and errors[0].get("type") == "int_parsing":
            message = "Invalid request: alternatives parameter is not a number"  # its words
            raise ServeError(400, message, "alternatives") from None
        status, message, param = validation_message(errors)
        raise ServeError(status, message, param) from None


def form_or_json(schema: type[BaseModel]) -> dict:
    body = {"schema": schema.model_json_schema()}
    content = {"application/json": body, "application/x-www-form-urlencoded": body}
    return {"requestBody": {"content": content, "required": True}}
