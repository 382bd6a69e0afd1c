"""Request and response bodies (pydantic): what each endpoint takes, with its ranges.

The LibreTranslate and OpenAI shapes follow those APIs, so their clients work unchanged;
fields they do not know are ignored. Server-wide limits (texts per request, characters per
text, beam, new tokens) are checked in ``app`` against ``ServeConfig``.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    StrictBool,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

Texts = str | list[str]


def _a_number(value, info: ValidationInfo):
    """A JSON number as its schema says: a string or a boolean is no number (a form's values,
    all strings, are read as numbers: ``form`` in the validation context)."""
    form = bool(info.context and info.context.get("form"))
    if isinstance(value, bool) or (isinstance(value, str | bytes) and not form):
        raise ValueError(f"must be a number, not {type(value).__name__}")
    return value


Int = Annotated[int, BeforeValidator(_a_number)]  # 2 or 2.0, not "2" or true
Float = Annotated[float, BeforeValidator(_a_number)]


def _json_text(value):
    """A form's value is text: a JSON object written in it is read."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise ValueError("must be a JSON object of terms") from None
    return value


Term = Annotated[str, StringConstraints(min_length=1, max_length=500, pattern=r"\S")]
Glossary = Annotated[
    Annotated[dict[Term, Term], Field(max_length=1000)] | None,
    BeforeValidator(_json_text),
    Field(
        None,
        description="aiayn's: terms the translations use, {source term: target term} (at "
        "most 1000); a source term found in a text (ignoring case, on word boundaries) puts "
        "its target in the translation, over the server's --glossary",
    ),
]


class LibreTranslateRequest(BaseModel):
    """LibreTranslate's ``/translate`` body (JSON or form-encoded)."""

    q: Texts = Field(description="text to translate, or a list of texts")
    source: str = Field("auto", description="source language code, or 'auto'")
    target: str = Field(description="target language code")
    format: Literal["text", "html"] | None = Field("text", description="null: text")
    alternatives: Int = Field(0, ge=0, description="alternative translations per text")
    prefix: str = Field(
        "", description="aiayn's: target text every translation begins with ('': none)"
    )
    glossary: Glossary = None
    api_key: str | None = Field(None, description="the API key (with aiayn serve --api-keys)")


class DetectRequest(BaseModel):
    q: Texts = Field(description="text whose language to detect, or a list of texts")
    api_key: str | None = None


class SuggestRequest(BaseModel):
    """LibreTranslate's ``/suggest`` body: a better translation ``s`` of ``q``."""

    q: str = Field(description="the original text")
    s: str = Field(description="the suggested translation")
    source: str = Field(description="the original text's language")
    target: str = Field(description="the suggestion's language")
    api_key: str | None = None


class TranslateOptions(BaseModel):
    beam: Int = Field(1, ge=1, description="beam size (1 = greedy search)")
    lenpen: Float = Field(
        0.6, ge=0.0, le=10.0, allow_inf_nan=False, description="GNMT length penalty alpha"
    )
    max_len_offset: Int = Field(
        50, ge=1, le=1000, description="output length limit = source tokens + this"
    )
    early_stop: StrictBool = Field(False, description="beam search: Hugging Face's stopping rule")


class TranslateRequest(TranslateOptions):
    """aiayn's ``/v1/translate``: n-best lists with scores."""

    model: str | None = Field(None, description="model name (optional with one translator)")
    text: Texts = Field(description="text to translate, or a list of texts")
    nbest: Int = Field(1, ge=1, description="hypotheses per text (at most beam)")
    prefix: str = Field(
        "", description="target text every translation of the request begins with ('': none)"
    )
    glossary: Glossary = None
    alignment: StrictBool = Field(
        False,
        description="also each translation's word alignment: [source word, target word] "
        "index pairs read from cross-attention (not a trained aligner)",
    )

    @field_validator("nbest")
    @classmethod
    def _nbest_within_beam(cls, nbest: int, info: ValidationInfo) -> int:
        beam = info.data.get("beam", 1)
        if nbest > beam:
            raise ValueError(f"nbest ({nbest}) cannot exceed beam ({beam})")
        return nbest


class Hypothesis(BaseModel):
    text: str
    score: float | None = Field(
        description="log P / lp(length) (GNMT length penalty); null for greedy search"
    )


class Translation(BaseModel):
    text: str
    score: float | None
    nbest: list[Hypothesis]
    alignment: list[tuple[int, int]] | None = Field(
        None, description="with alignment: true, [source word, target word] pairs"
    )
    unmet: list[str] = Field(
        default_factory=list,
        description="the glossary targets and kept spans this translation lacks (none unless "
        "its length limit, max_len_offset, came first)",
    )


class TranslateResponse(BaseModel):
    model: str
    translations: list[Translation]


class AttentionRequest(TranslateOptions):
    model: str | None = None
    text: str = Field(description="one sentence")


class AttentionResponse(BaseModel):
    model: str
    translation: str
    source_tokens: list[str]
    output_tokens: list[str]
    decoder_input_tokens: list[str]
    cross: list[list[list[list[float]]]] = Field(
        description="[layer][head][output token][source token]"
    )
    encoder: list[list[list[list[float]]]] = Field(
        description="[layer][head][source token][source token]"
    )
    decoder: list[list[list[list[float]]]] = Field(
        description="[layer][head][output token][decoder input token]"
    )


class CompletionRequest(BaseModel):
    """OpenAI's ``/v1/completions`` body."""

    model: str | None = None
    prompt: str = Field("", description="text to continue")
    max_tokens: Int = Field(16, ge=1, description="tokens to generate at most")
    temperature: Float = Field(1.0, ge=0.0, le=100.0, allow_inf_nan=False, description="0 = greedy")
    top_p: Float = Field(1.0, gt=0.0, le=1.0, allow_inf_nan=False)
    top_k: Int = Field(0, ge=0, description="0 = no top-k filter")
    seed: Int | None = Field(None, ge=0, lt=2**63, description="makes the sample reproducible")
    stream: StrictBool = Field(False, description="send tokens as server-sent events")
    n: Int = Field(1, ge=1, le=1, description="one choice per request")


class CompletionChoice(BaseModel):
    text: str
    index: int = 0
    logprobs: None = None
    finish_reason: str | None


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int = 0
    total_tokens: int


class CompletionResponse(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage


class ClassifyRequest(BaseModel):
    model: str | None = None
    input: Texts = Field(description="text to classify, or a list of texts")


class LabelScore(BaseModel):
    label: str
    score: float


class ClassifyResult(BaseModel):
    label: str = Field(description="the most probable label")
    score: float
    probabilities: list[LabelScore] = Field(description="every label, in the model's order")


class ClassifyResponse(BaseModel):
    model: str
    results: list[ClassifyResult]


class EmbeddingRequest(BaseModel):
    """OpenAI's ``/v1/embeddings`` body; ``normalize`` is aiayn's (unit-length vectors)."""

    model: str | None = None
    input: Texts
    encoding_format: Literal["float", "base64"] = "float"
    normalize: StrictBool = False


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class EmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: Usage
