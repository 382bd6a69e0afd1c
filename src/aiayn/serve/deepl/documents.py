"""DeepL's document routes: ``POST /v2/document`` (a multipart upload, translated in the
background: ``aiayn.serve.jobs``), ``POST /v2/document/{id}`` (its status, given the
``document_key`` answered with it) and ``POST /v2/document/{id}/result`` (the translated file,
once: 503 until it is done). The formats, the reading and the writing are those of
LibreTranslate's ``/translate_file`` (``aiayn.documents``, ``aiayn.serve.files``), and the
translated file waits in the same bounded store."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from aiayn import documents
from aiayn.serve.access import Caller, Guarded, log
from aiayn.serve.deepl.common import (
    charge,
    check_formality,
    languages_of,
    owner,
    pairs,
    refund,
    request_fields,
)
from aiayn.serve.deepl.fields import DocumentKey, DocumentRequest
from aiayn.serve.deepl.text import candidates, glossary_table
from aiayn.serve.errors import ServeError, validation_message
from aiayn.serve.files import (
    app_files,
    display_name,
    document_language,
    limits,
    translate_document,
    translated_name,
)
from aiayn.serve.inputs import form_or_json
from aiayn.serve.request_fields import FORM_LIMITS
from aiayn.serve.routes import Models
from aiayn.serve.terminology import terms_for

router = APIRouter()
STATUS_WAIT = 2.0  # seconds a status request waits for the translation to finish

_UPLOAD = {
    "multipart/form-data": {
        "schema": {
            "type": "object",
            "properties": {
                "file": {
                    "type": "string",
                    "format": "binary",
                    "description": "the document: its name ends in a supported format "
                    "(.txt, .docx, ...; /frontend/settings' supportedFilesFormat)",
                },
                **{
                    name: field
                    for name, field in DocumentRequest.model_json_schema()["properties"].items()
                },
            },
            "required": ["file", "target_lang"],
        },
        "encoding": {"file": {"contentType": "text/plain"}},
    }
}


@router.post("/v2/document", openapi_extra={"requestBody": {"content": _UPLOAD, "required": True}})
async def upload(request: Request, registry: Models, caller: Guarded):
    """A document to translate whole, its formatting kept: its id and key, for the status
    and the result. Its characters are billed now (456 past the key's quota), refunded if
    the translation fails."""
    config = registry.config
    if config.disable_files_translation:
        raise ServeError(400, "document translation is disabled on this server", "file")
    form = await request.form(**FORM_LIMITS["/v2/document"])  # as the access check read it
    fields = await request_fields(request)
    fields = {k: v for k, v in fields.items() if k != "file" and v != ""}
    try:
        req = DocumentRequest.model_validate(fields)
    except ValidationError as e:
        _, message, param = validation_message(e.errors())
        raise ServeError(400, message, param) from None
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise ServeError(400, "Invalid file data: a file part named file is required", "file")
    name = display_name(req.filename or upload.filename or "")
    fmt = documents.format_for(name)
    if fmt is None:
        raise ServeError(
            400,
            f"file: {name!r}: format not supported; supported: "
            f"{', '.join(documents.supported_formats())}",
            "file",
        )
    if req.output_format and "." + req.output_format.lower().lstrip(".") not in fmt.extensions:
        raise ServeError(
            400,
            f"output_format: {req.output_format!r}: a document is translated into its own "
            f"format ({fmt.extensions[0]}) here",
            "output_format",
        )
    served = pairs(registry)
    target, source = languages_of(served, req.target_lang, req.source_lang)
    check_formality(req.formality, req.target_lang)
    table = await glossary_table(request, req, caller, source, target)
    data = await upload.read()
    among = None if source else candidates(served, target)
    characters, found = await run_in_threadpool(_read, data, name, config, among)
    source = source or found
    if source == target:
        raise ServeError(400, "source_lang: the document is in target_lang already", "source_lang")
    entry = next(m for s, t, m in served if (s, t) == (source, target))
    model = await registry.hold(entry.name)  # loaded if it is not, held for this request
    terms = await terms_for(model, table, request.app.state.glossary)
    jobs = request.app.state.jobs
    made = jobs.add(owner(caller), characters)
    if made is None:
        raise ServeError(
            503, "too many documents in this server's hands; try again later",
            headers={"Retry-After": "30"},
        )  # fmt: skip
    job, key = made
    try:
        await charge(request, caller, characters)
    except ServeError:
        jobs.remove(job)
        raise
    usage, files = request.app.state.usage, app_files(request.app)

    async def run() -> None:
        try:
            async with files.turns:
                job.status = "translating"
                async with registry.holding(entry.name) as model:  # held while it translates
                    translated = await translate_document(data, name, fmt, model, registry, terms)
                stored = await run_in_threadpool(
                    files.store.put,
                    translated,
                    fmt.extensions[0],
                    translated_name(name, target),
                    fmt.media_type,
                )
            job.finish(stored=stored)
        except asyncio.CancelledError:
            job.finish(error="the server stopped before the translation was done")
            await refund(usage, caller, characters)
            raise
        except ServeError as e:
            job.finish(error=e.message)
            await refund(usage, caller, characters)
        except Exception as e:  # noqa: BLE001 - reported as the document's error
            log.exception("document %s failed", job.id)
            job.finish(error=f"internal error: {type(e).__name__}")
            await refund(usage, caller, characters)

    job.task = asyncio.create_task(run(), name=f"document-{job.id}")
    return {"document_id": job.id, "document_key": key}


def _read(data: bytes, name: str, config, among: list[str] | None) -> tuple[int, str | None]:
    """The characters of text in a document (what it is billed), read as /translate_file
    reads it (400 for one that cannot be), and, given the languages it may be in
    (``among``), the one most of its text is in (``document_language``; a document without
    words: the first of them)."""
    try:
        opened = documents.read(data, name, limits(config))
    except documents.DocumentError as e:
        raise ServeError(400, str(e), "file") from None
    characters = sum(len(s.text) for d in opened.documents for s in d.segments)
    if among is None:
        return characters, None
    return characters, document_language(opened, among) or among[0]


async def _job(request: Request, caller: Caller, document_id: str):
    fields = await request_fields(request)
    try:
        req = DocumentKey.model_validate(fields)
    except ValidationError as e:
        _, message, param = validation_message(e.errors())
        raise ServeError(400, message, param) from None
    job = request.app.state.jobs.get(document_id, req.document_key, owner(caller))
    if job is None:
        raise ServeError(404, "Document not found", "document_id")
    return job


@router.post("/v2/document/{document_id}", openapi_extra=form_or_json(DocumentKey))
async def status(document_id: str, request: Request, caller: Guarded):
    """A document's status: queued, translating, done (with billed_characters) or error
    (with error_message). It waits up to ``STATUS_WAIT`` seconds for the translation to
    finish, so that a small document is done at the first look (DeepL's clients look again
    only after 5 seconds)."""
    job = await _job(request, caller, document_id)
    if not job.finished.is_set():
        try:
            await asyncio.wait_for(job.finished.wait(), STATUS_WAIT)
        except TimeoutError:
            pass
    body: dict = {"document_id": job.id, "status": job.status}
    if job.status == "done":
        body["billed_characters"] = job.characters
    elif job.status == "error":
        body["error_message"] = body["message"] = job.error
    return body


@router.post(
    "/v2/document/{document_id}/result",
    openapi_extra={
        **form_or_json(DocumentKey),
        "responses": {
            "200": {
                "description": "the translated document",
                "content": {
                    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
                },
            }
        },
    },
    response_class=FileResponse,
)
async def result(document_id: str, request: Request, caller: Guarded):
    """The translated document, once (then it is gone, as DeepL's are); 503 until done."""
    job = await _job(request, caller, document_id)
    if job.status == "error":
        raise ServeError(400, f"the document's translation failed: {job.error}", "document_id")
    if job.status != "done":
        raise ServeError(503, "Document translation is not done", "document_id")
    stored = app_files(request.app).store.get(job.stored)
    request.app.state.jobs.remove(job)
    if stored is None:
        raise ServeError(404, "Document not found (expired)", "document_id")
    return FileResponse(stored.path, media_type=stored.media_type, filename=stored.download_name)
