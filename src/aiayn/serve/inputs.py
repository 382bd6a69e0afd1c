"""What a request brings: its body (JSON or a form), its texts within the limits, its options.

Each check raises ``ServeError`` naming the field and the limit (with its flag).
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

from fastapi import Request
from pydantic import BaseModel, ValidationError

from aiayn.serve.config import ServeConfig
from aiayn.serve.errors import ServeError, validation_message
from aiayn.serve.models import ServedModel

LANGUAGE_NAMES = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "fi": "Finnish", "fr": "French", "hu": "Hungarian",
    "it": "Italian", "ja": "Japanese", "ko": "Korean", "nl": "Dutch", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sv": "Swedish", "tr": "Turkish",
    "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip


def texts_of(value: str | list[str], field: str, config: ServeConfig) -> list[str]:
    """The texts of a request, within the per-request limits."""
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
                f"{name}: {len(text)} characters; at most {config.max_chars} per text "
                "(--max-chars)",
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


def check_beam(beam: int, config: ServeConfig, field: str = "beam") -> None:
    if beam > config.max_beam:
        message = f"{field}: {beam} is over the limit {config.max_beam} (--max-beam)"
        raise ServeError(422, message, field)


def rounded(weights) -> list:
    """Attention weights (H, Q, K) as nested lists with 4 decimals (a smaller answer)."""
    return ((weights * 1e4).round() / 1e4).tolist()


async def libretranslate_body(request: Request, schema: type[BaseModel]) -> BaseModel:
    """A LibreTranslate body, JSON or form-encoded (as its clients send it)."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        form = await request.form()
        pairs = [(k, v) for k, v in form.multi_items() if isinstance(v, str)]
    else:
        body = await request.body()
        try:
            if content_type.startswith("application/x-www-form-urlencoded"):
                text = body.decode("utf-8")
                pairs = parse_qsl(text, keep_blank_values=True, errors="strict")
            else:
                pairs = None
                data = json.loads(body) if body.strip() else {}
        except ValueError as e:  # also UnicodeDecodeError: not UTF-8
            raise ServeError(400, f"body: not UTF-8 JSON or a form ({e})", "body") from None
    if pairs is not None:
        data: dict = {}
        for key, value in pairs:
            data.setdefault(key, []).append(value)
        data = {k: v if len(v) > 1 else v[0] for k, v in data.items()}
    try:
        return schema.model_validate(data)
    except ValidationError as e:
        status, message, param = validation_message(e.errors())
        raise ServeError(status, message, param) from None


def form_or_json(schema: type[BaseModel]) -> dict:
    body = {"schema": schema.model_json_schema()}
    content = {"application/json": body, "application/x-www-form-urlencoded": body}
    return {"requestBody": {"content": content, "required": True}}
