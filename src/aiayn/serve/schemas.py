"""Request and response bodies (pydantic): what each endpoint takes, with its ranges.

The LibreTranslate and OpenAI shapes follow those APIs, so their clients work unchanged;
fields they do not know are ignored by LibreTranslate's routes and refused by OpenAI's, as
each of those servers does, and by aiayn's own. Server-wide limits (texts per request, characters per
text, beam, new tokens) are checked in ``app`` against ``ServeConfig``.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
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


MAX_TERMS = 1000  # terms in a request's glossary
# characters of a request's glossary, its source and target terms together: its expression
# compiles in about a fifth of a second (aiayn.serve.terminology)
MAX_GLOSSARY_CHARS = 100_000


def _glossary_size(terms: dict[str, str]) -> dict[str, str]:
    chars = sum(len(s) + len(t) for s, t in terms.items())
    if chars > MAX_GLOSSARY_CHARS:
        raise ValueError(
            f"{chars} characters of terms (source and target together); at most "
            f"{MAX_GLOSSARY_CHARS}"
        )
    return terms


Term = Annotated[str, StringConstraints(min_length=1, max_length=500, pattern=r"\S")]
Glossary = Annotated[
    Annotated[dict[Term, Term], Field(max_length=MAX_TERMS), AfterValidator(_glossary_size)] | None,
    BeforeValidator(_json_text),
    Field(
        None,
        description=f"aiayn's: terms the translations use, {{source term: target term}} (at "
        f"most {MAX_TERMS}, of {MAX_GLOSSARY_CHARS} characters in all); a source term found "
        "in a text (ignoring case, on word boundaries) puts its target in the translation, "
        "over the server's --glossary",
    ),
]


class LibreTranslateRequest(BaseModel):
    """LibreTranslate's ``/translate`` body (JSON or form-encoded)."""

    q: Texts = Field(description="text to translate, or a list of texts")
    source: str = Field(description="source language code, or 'auto'")
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


class NativeRequest(BaseModel):
    """A body of aiayn's own routes: a field it does not know is refused, as on OpenAI's (a
    misspelt option, ``beem`` say, would otherwise be ignored and the answer another)."""

    model_config = ConfigDict(extra="forbid")

    api_key: str | None = Field(
        None, description="the API key, as LibreTranslate's clients send it (or the header)"
    )


class TranslateOptions(NativeRequest):
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


def _refused(allowed, why: str):
    """A field of OpenAI's that this server cannot honour: any value but ``allowed`` (and
    null) is refused with ``why``, not ignored (ignoring it would change the answer)."""

    def check(value):
        if value is not None and value not in allowed:
            raise ValueError(why)
        return value

    return BeforeValidator(check)


SHAPES = {
    "prompt": "must be a text, a list of texts, a non-empty list of token ids (integers >= 0) "
    "or a list of such lists",
    "stop": "must be a non-empty string or a list of at most 4 of them",
}


def _int(**limits):
    """An integer within ``limits`` (``Field``'s ge, lt...), as ``Int`` reads it; nullable
    (``_int(ge=1) | None``) with the limits in the document."""
    return Annotated[int, Field(**limits), BeforeValidator(_a_number)]


def _float(**limits):
    return Annotated[float, Field(allow_inf_nan=False, **limits), BeforeValidator(_a_number)]


TokenIds = Annotated[list[_int(ge=0)], Field(min_length=1)]  # 2.0 is the id 2, true is none
StopString = Annotated[str, StringConstraints(min_length=1)]


NoPenalty = Annotated[  # OpenAI's presence and frequency penalties: 0 or null only
    _float(ge=0.0, le=0.0) | None,
    _refused((0,), "not supported: this server samples without penalties; 0 or null only"),
]


class StreamOptions(BaseModel):
    include_usage: StrictBool | None = Field(
        None, description="a last chunk (choices []) with the request's usage"
    )


class OpenAIRequest(BaseModel):
    """A body of OpenAI's API: as OpenAI does, a field it does not know is refused (another
    server's sampling option, ``repetition_penalty`` say, would otherwise be ignored)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    api_key: str | None = Field(
        None, description="the API key, as LibreTranslate's clients send it (or the header)"
    )


class CompletionRequest(OpenAIRequest):
    """OpenAI's ``/v1/completions`` body. A field OpenAI has that this server cannot honour
    is refused unless it has the value that changes nothing; null is its default."""

    prompt: str | list[str] | list[TokenIds] | TokenIds | None = Field(
        "",
        description="text to continue, a list of texts, the token ids of one, or a list of "
        "token id lists (null: '')",
    )
    max_tokens: _int(ge=1) | None = Field(16, description="tokens to generate at most")
    temperature: _float(ge=0.0, le=100.0) | None = Field(1.0, description="0 = greedy")
    top_p: _float(gt=0.0, le=1.0) | None = 1.0
    top_k: _int(ge=0) | None = Field(0, description="0 = no top-k filter")
    seed: _int(ge=0) | None = Field(
        None,
        description="makes the sample reproducible (choice j of a prompt: seed + j, modulo 2**63)",
    )
    stream: StrictBool | None = Field(False, description="send tokens as server-sent events")
    stream_options: StreamOptions | None = None
    n: _int(ge=1) | None = Field(1, description="choices per prompt")
    stop: StopString | Annotated[list[StopString], Field(max_length=4)] | None = Field(
        None, description="up to 4 strings; the text ends before the first one met"
    )
    echo: StrictBool | None = Field(False, description="each choice's text begins with its prompt")
    user: str | None = Field(None, description="read, not used")

    logprobs: Annotated[
        None, _refused((), "not supported: this server returns no log probabilities; null only")
    ] = None
    suffix: Annotated[
        Annotated[str, Field(max_length=0)] | None,
        _refused(("",), "not supported: this server does not insert text; '' or null only"),
    ] = None
    best_of: Annotated[
        _int(ge=1, le=1) | None,
        _refused((1,), "not supported: 1 or null only (each choice is one sample; see n)"),
    ] = None
    presence_penalty: NoPenalty = None
    frequency_penalty: NoPenalty = None
    logit_bias: Annotated[
        Annotated[dict[str, _float()], Field(max_length=0)] | None,
        _refused(({},), "not supported: this server samples without biases; {} or null only"),
    ] = None

    @field_validator("prompt", "stop", mode="wrap")
    @classmethod
    def _one_message(cls, value, handler, info: ValidationInfo):
        """One error naming what the field may be, not one per form it may take."""
        try:
            return handler(value)
        except ValueError:
            raise ValueError(SHAPES[info.field_name]) from None


class CompletionChoice(BaseModel):
    text: str
    index: int = 0
    logprobs: None = None
    finish_reason: Literal["stop", "length"] | None


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


class ClassifyRequest(NativeRequest):
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


class EmbeddingRequest(OpenAIRequest):
    """OpenAI's ``/v1/embeddings`` body; ``normalize`` is aiayn's (unit-length vectors)."""

    input: str | list[str] | list[TokenIds] | TokenIds = Field(
        description="text to embed, a list of texts, the token ids of one, or a list of "
        "token id lists"
    )
    encoding_format: Literal["float", "base64"] | None = Field(
        "float", description="base64: each vector's little-endian float32 bytes (null: float)"
    )
    dimensions: _int(ge=1) | None = Field(
        None, description="the model's d_model only (vectors are not shortened)"
    )
    user: str | None = Field(None, description="read, not used")
    normalize: StrictBool = False

    @field_validator("input", mode="wrap")
    @classmethod
    def _one_message(cls, value, handler):
        try:
            return handler(value)
        except ValueError:
            raise ValueError(SHAPES["prompt"]) from None


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class EmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: Usage
