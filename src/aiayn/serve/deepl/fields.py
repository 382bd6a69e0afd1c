"""The bodies of DeepL's routes (pydantic), as its clients send them: JSON or a form (every
value a string then: ``"1"`` is true, a list of tags one comma-separated string), fields this
server does not know accepted and ignored, as DeepL accepts them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema


def inline(model: type[BaseModel]) -> dict:
    """``model``'s JSON schema with its nested models written in place (a request body the
    OpenAPI document holds inline, where ``#/$defs/...`` would not resolve)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def resolved(node):
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return resolved(defs[ref.removeprefix("#/$defs/")])
            return {k: resolved(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolved(v) for v in node]
        return node

    return resolved(schema)


def json_body(model: type[BaseModel]) -> dict:
    """A route's ``openapi_extra``: a JSON body of ``model``."""
    content = {"application/json": {"schema": inline(model)}}
    return {"requestBody": {"content": content, "required": True}}


def _tags(value):
    """A list of tag names, given as a list or as one comma-separated string (or several)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        return value  # refused by the type
    return [tag.strip() for item in items for tag in item.split(",") if tag.strip()]


def _texts(value):
    """A list of strings, given as a list or as one comma-separated string (empty ones
    left out)."""
    if isinstance(value, str):
        value = value.split(",")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [part.strip() for part in value if part.strip()]
    return value


def _flag(value):
    """A JSON boolean, or a form's "0", "1", "false" or "true" (DeepL writes "0" and "1")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("0", "1", "false", "true"):
        return value.lower() in ("1", "true")
    raise ValueError("must be true or false (a form's 0 or 1)")


Flag = Annotated[
    bool,
    BeforeValidator(_flag),
    WithJsonSchema(
        {"anyOf": [{"type": "boolean"}, {"type": "string", "enum": ["0", "1", "false", "true"]}]}
    ),
]


def _word(value):
    """A form's "0" and "1" as they are, a JSON number 0 or 1 as its string."""
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return str(value)
    return value


_LIST_OR_STRING = WithJsonSchema(
    {
        "anyOf": [
            {"type": "array", "items": {"type": "string"}},
            {"type": "string", "description": "comma-separated"},
        ]
    }
)
TagList = Annotated[list[str], BeforeValidator(_tags), _LIST_OR_STRING]
IdList = Annotated[list[str], BeforeValidator(_texts), _LIST_OR_STRING]


# a glossary needs the source language named, as DeepL asks; glossary_id or glossary_ids
_SOURCE = {"properties": {"source_lang": {"type": "string"}}, "required": ["source_lang"]}
_GLOSSARY_NEEDS_SOURCE = {
    "dependentSchemas": {"glossary_id": _SOURCE, "glossary_ids": _SOURCE},
    "not": {"required": ["glossary_id", "glossary_ids"]},
}


class TranslateRequest(BaseModel):
    """DeepL's ``/v2/translate`` body."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_GLOSSARY_NEEDS_SOURCE)

    text: list[str] | str = Field(
        description="the texts to translate (a form repeats the field), one translation each"
    )
    target_lang: str = Field(
        description="DeepL's code of the language to translate into (EN-GB, EN-US, PT-BR, DE, "
        "...; any case)"
    )
    source_lang: str | None = Field(
        None, description="the texts' language (absent: the language a served model reads)"
    )
    context: str | None = Field(
        None, description="ignored: this server's models translate sentence by sentence"
    )
    show_billed_characters: Flag | None = Field(
        None, description="ignored: billed_characters is always answered"
    )
    split_sentences: Annotated[
        Literal["0", "1", "nonewlines"] | None,
        BeforeValidator(_word),
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "string", "enum": ["0", "1", "nonewlines"]},
                    {"type": "integer", "enum": [0, 1]},
                    {"type": "null"},
                ]
            }
        ),
    ] = Field(
        None,
        description="1 (default without tags): cut at sentence ends and line breaks; "
        "nonewlines (default with tags): at sentence ends only; 0: no cut (only where a text "
        "is longer than the model reads)",
    )
    preserve_formatting: Flag | None = Field(
        None, description="accepted: this server never corrects formatting (as 1 asks)"
    )
    formality: Literal["default", "more", "less", "prefer_more", "prefer_less"] | None = Field(
        None,
        description="no served language has formality: more and less are refused (400), "
        "the prefer_ options fall back to the default",
    )
    model_type: Literal["quality_optimized", "prefer_quality_optimized", "latency_optimized"] | (
        None
    ) = Field(
        None,
        description="each pair has one model (latency_optimized): quality_optimized is "
        "refused (400)",
    )
    glossary_id: str | None = Field(None, description="a glossary's id (needs source_lang)")
    glossary_ids: IdList | None = Field(
        None, description="up to 5 glossaries' ids, the first's term first (needs source_lang)"
    )
    tag_handling: Literal["xml", "html"] | None = Field(
        None, description="the texts hold XML or HTML tags, kept around the translated words"
    )
    tag_handling_version: Literal["v1", "v2"] | None = Field(None, description="accepted")
    outline_detection: Flag | None = Field(
        None,
        description="xml: an element among others with no text beside it splits sentences "
        "(default true; false: splitting_tags alone)",
    )
    non_splitting_tags: TagList | None = Field(None, description="tags that never split")
    splitting_tags: TagList | None = Field(None, description="tags that always split")
    ignore_tags: TagList | None = Field(None, description="tags whose content is kept as is")
    custom_instructions: IdList | None = Field(
        None, description="not supported: any is refused (400)"
    )
    style_id: str | None = Field(None, description="this server has no style rules (404)")
    translation_memory_id: str | None = Field(
        None, description="this server has no translation memories (404)"
    )
    auth_key: str | None = Field(None, description="the API key (older clients)")


class LanguagesRequest(BaseModel):
    """A ``POST /v2/languages`` body."""

    model_config = ConfigDict(extra="allow")

    type: Literal["source", "target"] = Field("source", description="source or target")


class GlossaryRequest(BaseModel):
    """DeepL's ``/v2/glossaries`` body (JSON or a form)."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1, description="the glossary's name")
    source_lang: str = Field(description="the source terms' language (de, EN, ...)")
    target_lang: str = Field(description="the target terms' language")
    entries: str = Field(description="the entries in entries_format")
    entries_format: Literal["tsv", "csv"] = Field("tsv", description="tsv or csv")
    auth_key: str | None = None


class DictionaryEntries(BaseModel):
    """One language pair's entries of a ``/v3/glossaries`` body."""

    model_config = ConfigDict(extra="allow")

    source_lang: str
    target_lang: str
    entries: str = Field(description="the entries in entries_format")
    entries_format: Literal["tsv", "csv"] = "tsv"


class MultilingualGlossaryRequest(BaseModel):
    """DeepL's ``POST /v3/glossaries`` body."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    dictionaries: list[DictionaryEntries] = Field(min_length=1)


class GlossaryPatch(BaseModel):
    """DeepL's ``PATCH /v3/glossaries/{id}`` body: a new name, entries to merge (one pair)."""

    model_config = ConfigDict(extra="allow")

    name: str | None = Field(None, min_length=1)
    dictionaries: list[DictionaryEntries] | None = Field(None, max_length=1)


class DocumentRequest(BaseModel):
    """The fields of a ``/v2/document`` upload beside its file."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_GLOSSARY_NEEDS_SOURCE)

    target_lang: str = Field(description="DeepL's code of the language to translate into")
    source_lang: str | None = Field(None, description="the document's language")
    filename: str | None = Field(None, description="the file's name (else the part's)")
    output_format: str | None = Field(None, description="the file's own format only")
    formality: Literal["default", "more", "less", "prefer_more", "prefer_less"] | None = None
    glossary_id: str | None = Field(None, description="a glossary's id (needs source_lang)")
    glossary_ids: IdList | None = Field(None, description="up to 5 glossaries' ids")
    auth_key: str | None = None


class DocumentKey(BaseModel):
    """The body of a document's status and result requests."""

    model_config = ConfigDict(extra="allow")

    document_key: str = Field(description="the key /v2/document answered")
