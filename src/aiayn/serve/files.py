"""Documents translated whole, as LibreTranslate translates them: ``POST /translate_file``
(a multipart form: ``file``, ``source``, ``target``, ``api_key``) answers
``{"translatedFileUrl": ...}``, and ``GET /download_file/NAME`` gives the translated file.

Each upload is read by its format (``aiayn.documents``: checked before any library sees it,
off the event loop), its sentences queued on the model's worker in batches of
``--max-batch`` texts with the other requests' sentences (the same call as ``/translate``'s
HTML), and the translation written back into the document. Translated files live in a
bounded store (``aiayn.serve.file_store``): their names are generated, never the upload's;
each expires ``--file-expiry`` seconds after it was written, and the oldest go first when the
store would pass ``--files-store-bytes``. At most ``FILE_JOBS`` documents are read and
written at once (the others wait their turn), so memory stays bounded by the upload and
archive limits.
``--disable-files-translation`` answers 403 (and 400 on downloads), as LibreTranslate does.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import PurePath
from typing import BinaryIO
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from aiayn import documents
from aiayn.serve.access import Guarded
from aiayn.serve.config import ServeConfig
from aiayn.serve.detect import detect, ranked
from aiayn.serve.errors import ServeError
from aiayn.serve.file_store import STORED, FileStore, Stored
from aiayn.serve.languages import same_language, served_languages, translators
from aiayn.serve.models import ServedModel
from aiayn.serve.pairs import Route, check_glossary_route, pick_route
from aiayn.serve.registry import Registry
from aiayn.serve.request_fields import FORM_LIMITS
from aiayn.serve.routes import Models
from aiayn.serve.schemas import Glossary
from aiayn.serve.terminology import terms_for, terms_key

router = APIRouter()

FILE_JOBS = 2  # documents read, translated and written at once (the others wait)
# through a pivot, the first model's translation is read again: within this many times the
# upload's limits (a translation may be longer than its source)
PIVOT_GROWTH = 4
DISABLED = "Files translation are disabled on this server."


class Files:
    """The store and the turn-taking of one application (``app.state.files``): made at
    start-up when a ``--files-dir`` is given (``claimed``), at the first upload otherwise."""

    def __init__(self, config: ServeConfig) -> None:
        self.store = FileStore(
            config.files_dir or None, config.file_expiry, config.files_store_bytes
        )
        self.turns = asyncio.Semaphore(FILE_JOBS)


def claimed(config: ServeConfig) -> Files | None:
    """The store of a server given ``--files-dir``, its directory locked now (refused, naming
    it, when another process holds it); None without one or with files translation off."""
    if not config.files_dir or config.disable_files_translation:
        return None
    return Files(config)


def files_of(request: Request) -> Files:
    return app_files(request.app)


def app_files(app) -> Files:
    """The store of ``app``, made at its first use when no ``--files-dir`` made it at start."""
    state = app.state
    if getattr(state, "files", None) is None:
        state.files = Files(state.registry.config)
    return state.files


def close(app) -> None:
    """Remove the translated files of ``app`` (at shutdown)."""
    files = getattr(app.state, "files", None)
    if files is not None:
        files.store.close()


def display_name(name: str) -> str:
    """An upload's name as messages and the download show it: its last part, characters
    other than letters (of any script: "Grüße.txt"), digits, ``.``, ``-``, ``_`` and spaces
    replaced, at most 100 long."""
    base = PurePath(name.replace("\\", "/")).name
    safe = re.sub(r"[^\w.\- ]", "_", base).strip(" .") or "document"
    stem, suffix = os.path.splitext(safe)
    return stem[: 100 - len(suffix)] + suffix


def translated_name(name: str, target: str) -> str:
    """The name a translated file downloads as: the upload's (``display_name``) with the target
    language before its ending, as LibreTranslate names it ("brief.docx" into English:
    "brief_en.docx"), so that it does not take the original's place where it is saved."""
    stem, suffix = os.path.splitext(name)
    return f"{stem}_{target}{suffix}"


def _unfit_name(name: str) -> str | None:
    """Why an upload's name is not a plain file name (None: it is). It is never used as a
    path; one that tries to be a path is refused all the same."""
    if len(name) > 255:
        return f"{len(name)} characters; at most 255"
    if re.search(r"[\x00-\x1f\x7f]", name):
        return "a control character in the name"
    if "/" in name or "\\" in name:
        return "a path, not a file name"
    if name.strip(". ") == "":
        return f"{name!r} is no file name"
    return None


def _check_languages(registry: Registry, source: str, target: str) -> Route:
    known = {code for m in translators(registry) for code in m.languages}
    for code in (source, target):
        if code != "auto" and code not in known:
            raise ServeError(
                400, f"{code} is not supported", "source" if code == source else "target"
            )
    try:
        return pick_route(registry, source, target)
    except ServeError as e:
        raise ServeError(400, e.message, e.param) from None


def document_language(opened: documents.Opened, candidates: list[str]) -> str | None:
    """The language most of ``opened``'s text is in among ``candidates``
    (``aiayn.serve.detect.ranked``: each sentence detected on its own); None where none is
    found (a document without words)."""
    texts = documents.sentences(opened, lambda text: True).texts  # cut at sentence ends
    found = ranked(texts, detect(texts, candidates))
    return found[0][0] if found and found[0][1] > 0 else None


async def _document_language(upload: UploadFile, registry: Registry, target: str, files) -> str:
    """``source`` "auto": the language most of the document's text is in among the served
    languages (``document_language``), or "auto" (the only model into ``target``) where none
    is found. The document is read in its turn, as for its translation."""
    candidates = served_languages(registry)
    if target not in candidates:
        return "auto"  # refused as not served, before the upload is read
    data, name = await upload.read(), display_name(upload.filename)
    await upload.seek(0)  # read again for the translation

    def find() -> str | None:
        return document_language(documents.read(data, name, limits(registry.config)), candidates)

    async with files.turns:
        try:
            found = await run_in_threadpool(find)
        except documents.DocumentError as e:
            raise ServeError(400, str(e), "file") from None
    return found or "auto"


def limits(config: ServeConfig, grown: int = 1) -> documents.Limits:
    """What an upload may hold (``grown`` times that: a pivot's first translation, read
    again): an archive inflates to at most 50 times the body limit."""
    return documents.Limits(
        max_bytes=grown * config.max_body_bytes,
        max_inflated=min(documents.Limits.max_inflated, 50 * grown * config.max_body_bytes),
        max_chars=grown * config.max_file_chars,
    )


_FORM = {
    "multipart/form-data": {
        "schema": {
            "type": "object",
            "properties": {
                "file": {
                    "type": "string",
                    "format": "binary",
                    "description": "the document: its name ends in one of "
                    "/frontend/settings' supportedFilesFormat (.txt, .docx, ...)",
                },
                "source": {"type": "string", "description": "source language code, or 'auto'"},
                "target": {"type": "string", "description": "target language code"},
                "glossary": {
                    "type": "string",
                    "description": "aiayn's: terms the translation uses, as a JSON object "
                    "{source term: target term} (as /translate's glossary), over the "
                    "server's --glossary",
                },
                "api_key": {"type": "string", "description": "an API key"},
            },
            "required": ["file", "source", "target"],
        },
        "encoding": {"file": {"contentType": "text/plain"}},
    }
}


@router.post(
    "/translate_file",
    openapi_extra={"requestBody": {"content": _FORM, "required": True}},
)
async def translate_file(request: Request, registry: Models, caller: Guarded):
    """LibreTranslate's file translation: the document translated whole, its formatting
    kept, directly or through a pivot; answers the URL of the translated file
    (``/download_file/NAME``). ``source`` 'auto': the language most of its text is in
    (``document_language``); a document found in the target language comes back as it
    came."""
    config = registry.config
    if config.disable_files_translation:
        raise ServeError(403, DISABLED)
    form = await request.form(**FORM_LIMITS["/translate_file"])  # as the access check read it
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise ServeError(400, "Invalid request: missing file parameter", "file")
    for field in ("source", "target"):
        if not isinstance(form.get(field), str) or not form.get(field):
            raise ServeError(400, f"Invalid request: missing {field} parameter", field)
    if not upload.filename:
        raise ServeError(400, "Invalid request: empty file", "file")
    why = _unfit_name(upload.filename)
    if why:
        raise ServeError(400, f"Invalid filename: {why}", "file")
    fmt = documents.format_for(upload.filename)
    if fmt is None:
        raise ServeError(400, "Invalid request: file format not supported", "file")
    source, target = form["source"].lower(), form["target"].lower()
    detected = source == "auto"
    if detected:
        source = await _document_language(upload, registry, target, files_of(request))
    # a document found in the target language comes back as it came (no route)
    found_in_target = detected and same_language(registry, source, target) is not None
    route = None if found_in_target else _check_languages(registry, source, target)
    given = _form_glossary(form.get("glossary"))
    if route is not None:
        check_glossary_route(route, given)
    name = display_name(upload.filename)
    data = await upload.read()
    files = files_of(request)
    glossary = request.app.state.glossary
    async with files.turns:
        stored = data
        legs = route.legs if route is not None else ()
        for leg, model_name in enumerate(legs):  # through a pivot: translated again
            stored = await _translate(stored, name, fmt, model_name, registry, given, glossary, leg)
        key = await run_in_threadpool(
            files.store.put,
            stored,
            fmt.extensions[0],
            translated_name(name, target),
            fmt.media_type,
        )
    asyncio.get_running_loop().call_later(config.file_expiry + 0.01, files.store.purge)
    return {"translatedFileUrl": str(request.url_for("download_file", name=key))}


_GLOSSARY = TypeAdapter(Glossary)


def _form_glossary(value) -> dict | None:
    """A form's ``glossary`` (JSON text, as ``/translate``'s in a form), checked as that
    field is; None when absent."""
    if value is None:
        return None
    try:
        return _GLOSSARY.validate_python(value)
    except ValidationError as e:
        error = e.errors()[0]
        where = ".".join(str(p) for p in ("glossary", *error["loc"]))
        raise ServeError(400, f"{where}: {error['msg']}", "glossary") from None


async def _translate(
    data: bytes, name: str, fmt, model_name: str, registry: Registry, given, glossary, leg: int
) -> bytes:
    """The document ``data`` translated by model ``model_name`` (loaded if it is not, and
    held meanwhile); ``leg`` 1: the document a pivot's first model wrote, read within
    ``PIVOT_GROWTH`` times the upload's limits."""
    async with registry.holding(model_name) as model:
        terms = await terms_for(model, given, glossary)
        return await translate_document(data, name, fmt, model, registry, terms, leg)


async def translate_document(
    data: bytes, name: str, fmt, model: ServedModel, registry: Registry, terms, leg: int = 0
) -> bytes:
    """The document ``data`` (a file called ``name`` of format ``fmt``) translated by
    ``model`` with ``terms``: the translated file's bytes (400 for a file that cannot be
    read). LibreTranslate's /translate_file and DeepL's /v2/document both call it."""
    config = registry.config
    read_within = limits(config, PIVOT_GROWTH if leg else 1)
    limit = model.max_text_tokens

    def fits(text: str) -> bool:
        return model.token_counts([text])[0] <= limit

    def read():
        opened = documents.read(data, name, read_within)
        return opened, documents.sentences(opened, fits, config.kept), documents.aligned(opened)

    try:
        opened, sentences, aligned = await run_in_threadpool(read)
    except documents.DocumentError as e:
        raise ServeError(400, str(e), "file") from None
    options = dict(beam=config.beam)
    kind = "translate-aligned" if aligned else "translate-document"
    key = (kind, tuple(sorted(options.items())), terms_key(terms))
    results = []
    texts = sentences.texts
    for start in range(0, len(texts), config.max_batch):  # others' requests between chunks
        results += await registry.run(
            model,
            texts[start : start + config.max_batch],
            lambda items: model.translate(
                items,
                scores=False,
                alignment=aligned,
                glossary=terms,
                keep=config.kept,
                **options,
            ),
            key,
        )
    try:
        return await run_in_threadpool(
            _written, opened, sentences, results, name, model.languages[1]
        )
    except documents.DocumentError as e:
        raise ServeError(400, str(e), "file") from None


def _written(opened, sentences, results, name: str, target: str) -> bytes:
    pairs = [(t.text, t.alignment or ()) for t in results]
    return documents.save(opened, sentences, pairs, name, target)


class StoredFile(StreamingResponse):
    """A stored file streamed from a handle opened once (``FileStore.open``), so that its
    expiry or eviction while the answer is sent cuts nothing short: the client gets the whole
    file, or 404 when it was gone before. (Starlette's ``FileResponse`` looks the path up
    again, and opens it after sending the headers: a file removed in between was a 500 or an
    answer cut short.) Ranges are not served: the whole file, as a 200."""

    CHUNK = 64 * 1024

    def __init__(self, stored: Stored, handle: BinaryIO) -> None:
        self.handle = handle
        size = os.fstat(handle.fileno()).st_size
        name = stored.download_name
        quoted = quote(name)
        disposition = (
            f'attachment; filename="{name}"'
            if quoted == name
            else f"attachment; filename*=utf-8''{quoted}"
        )
        headers = {"content-length": str(size), "content-disposition": disposition}
        super().__init__(self._chunks(), headers=headers, media_type=stored.media_type)

    async def _chunks(self):
        while chunk := await run_in_threadpool(self.handle.read, self.CHUNK):
            yield chunk

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.handle.close()


_DOWNLOAD = {
    "responses": {
        "200": {
            "description": "the translated file",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        }
    },
}


@router.get(
    "/download_file/{name:path}",
    name="download_file",
    response_class=StoredFile,
    status_code=200,
    openapi_extra=_DOWNLOAD,
)
async def download_file(name: str, request: Request, registry: Models):
    """A translated file, by the name ``/translate_file`` answered (until it expires)."""
    if registry.config.disable_files_translation:
        raise ServeError(400, DISABLED)
    if not STORED.fullmatch(name):
        raise ServeError(400, "Invalid filename", "name")
    opened = files_of(request).store.open(name)
    if opened is None:
        raise ServeError(404, "File not found", "name")
    return StoredFile(*opened)
