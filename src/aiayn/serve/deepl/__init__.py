"""DeepL's API (v2, and the v3 glossaries its current clients call): its routes, so that
DeepL's own clients (its Python and Node libraries), Weblate and Subtitle Edit work against
this server (beside ``aiayn.serve.routes``, since its documents go through the file store
of ``aiayn.serve.files``, itself over the routes):
``text`` (``/v2/translate``, ``/v2/languages``, ``/v2/usage``, ``/v2/glossary-language-pairs``),
``glossaries`` (``/v2/glossaries``, ``/v3/glossaries``) and ``documents`` (``/v2/document``).

Each route translates DeepL's fields into the calls the other APIs make, and answers in
DeepL's words: its status codes (403 for a missing or wrong key, 456 past a key's character
quota, 413 and 414 for sizes, 404 for a glossary or document not found) and its error body,
``{"message": ...}`` (``aiayn.serve.errors``). The stores the API needs live beside the API
keys, not here: characters counted a month (``aiayn.serve.usage``), glossaries
(``aiayn.serve.glossaries``), documents in translation (``aiayn.serve.jobs``).
"""

from fastapi import APIRouter

from aiayn.serve.deepl import documents, glossaries, text

router = APIRouter(tags=["DeepL"])
for part in (text, glossaries, documents):
    router.include_router(part.router)
