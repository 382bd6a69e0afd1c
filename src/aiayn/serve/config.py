"""The server's limits and batching settings: a frozen, validated dataclass."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from aiayn.config.fields import _check_float, _check_int
from aiayn.data.terminology import PLACEHOLDERS
from aiayn.infer.cores import usable_cores


def serving_decoders() -> int:
    """How many batches ``aiayn serve`` decodes at once by default: two where the process
    may use two cores or more (a batch decodes while the next forms and decodes beside it;
    docs/serving.md has what it measured), else one."""
    return 2 if usable_cores() >= 2 else 1


def serving_threads(decoders: int = 1) -> int:
    """The threads each of ``decoders`` decoders takes by default: the cores this process
    may use, less one for the HTTP side (the event loop, parsing, tokenizing, JSON), shared
    among them, at least one. Decoding on every core with one decoder leaves the event loop
    to steal from its threads, each of which then waits for the others at every operation;
    decoders of one thread each wait for no other."""
    return max(1, (usable_cores() - 1) // decoders)


PRELOAD = ("auto", "all", "none")  # --preload's choices


@dataclass(frozen=True)
class ServeConfig:
    """Every limit the server enforces; each has a ``aiayn serve`` flag of the same name.

    ``max_batch`` 1 turns dynamic batching off (every request decoded alone).
    """

    max_body_bytes: int = 1_000_000  # request body size (413 above)
    max_texts: int = 64  # texts per request (422 above)
    max_chars: int = 2000  # characters per text (422 above)
    max_new_tokens: int = 512  # largest max_tokens of a completion, max_len_offset of a translation
    max_beam: int = 8  # largest beam size
    queue_size: int = 256  # requests waiting per model (503 with Retry-After above)
    timeout: float = 60.0  # seconds a request may decode, from its batch's start (504 after)
    batch_wait_ms: float = 2.0  # how long a batch waits for more requests
    max_batch: int = 64  # texts per batched decode
    beam: int = 0  # beam size of LibreTranslate's /translate (0: each model's own search)
    disable_files_translation: bool = False  # /translate_file answers 403
    max_file_chars: int = 200_000  # characters of text in one document (400 above)
    file_expiry: float = 1800.0  # seconds a translated file stays downloadable
    files_store_bytes: int = 500_000_000  # translated files kept at most (oldest go first)
    files_dir: str = ""  # where translated files are kept ("": a temporary directory)
    glossary: str = ""  # a glossary file: its terms for each model's languages, every request
    keep_placeholders: bool = False  # every translation keeps placeholders verbatim
    keep: str = ""  # a regular expression whose matches every translation keeps verbatim
    decoders: int = 0  # batches each model decodes at once (0: serving_decoders())
    access_log: bool = False  # a line for each request on stderr (uvicorn's access log)
    max_loaded: int = 0  # models loaded at once, the least recently used unloaded (0: all)
    preload: str = "auto"  # models loaded at start: auto, all or none (the rest on first use)

    @classmethod
    def flags(cls) -> dict[str, tuple]:
        """{field: (default, help)} for the command line."""
        helps = {
            "max_body_bytes": "largest request body in bytes (413 above)",
            "max_texts": "texts per request (422 above)",
            "max_chars": "characters per text (422 above)",
            "max_new_tokens": "largest max_tokens of a completion and max_len_offset of a "
            "translation",
            "max_beam": "largest beam size a request may ask for",
            "queue_size": "requests waiting per model (503 with Retry-After above)",
            "timeout": "seconds a request may decode, counted from when its batch starts "
            "(504 after; a stream: between two tokens); its wait in the queue is not counted "
            "(--queue-size bounds the queue)",
            "batch_wait_ms": "the longest a request waits for others to batch with (milliseconds)",
            "max_batch": "texts per batched decode (1 = no batching)",
            "beam": "beam size of LibreTranslate's /translate, DeepL's and documents' (1 = "
            "greedy; 0 = each model's own: greedy for aiayn's models, Argos Translate's beam "
            "4 and length penalty 0.2 for its packages)",
            "disable_files_translation": "refuse /translate_file (403) and /download_file",
            "max_file_chars": "characters of text in one document of /translate_file (400 "
            "above; the upload's bytes are bounded by --max-body-bytes)",
            "file_expiry": "seconds a translated file stays downloadable",
            "files_store_bytes": "bytes of translated files kept at most (the oldest are "
            "removed first)",
            "files_dir": "where translated files are kept, one process's alone (default: a "
            "temporary directory, removed at shutdown)",
            "glossary": "a glossary file (JSON in LibreTranslate's layout, or TSV) whose terms "
            "every translation into its language pairs uses; a request's glossary adds to it",
            "keep_placeholders": "every translation keeps placeholders verbatim (%s, %1$s, "
            "%(name)s, {name}, {{name}}, $VAR, <x/>, URLs, e-mail addresses), each as often as "
            "its text has them, placed by constrained beam search (beam >= 4), as aiayn "
            "translate --keep-placeholders",
            "keep": "a regular expression whose matches every translation keeps verbatim (e.g. "
            "'ACME \\w+|SKU-\\d+'), as aiayn translate --keep",
            "decoders": "batches each model decodes at once, each on --threads threads of its "
            "own (0: one where --threads is given, else two where the process may use two "
            "cores or more, else one)",
            "access_log": "write a line for each request to stderr (client, method, path, "
            "status); off, as in LibreTranslate: each line costs the server 0.04-0.15 ms of "
            "CPU",
            "max_loaded": "models loaded at once (0: no bound); before another loads, the "
            "least recently used that no request is using is unloaded",
            "preload": "which models load at start (the others when a request first needs "
            "them): all (the first --max-loaded), none, or auto: all for a server of one "
            "language pair at most, none for a server of several",
        }
        return {
            f.name: (
                f.default,
                f"{helps[f.name]}; default {f.default if f.default != '' else 'none'}",
            )
            for f in dataclasses.fields(cls)
        }

    def __post_init__(self) -> None:
        _check_int("max_body_bytes", self.max_body_bytes, 1024)
        _check_int("max_texts", self.max_texts, 1)
        _check_int("max_chars", self.max_chars, 1)
        _check_int("max_new_tokens", self.max_new_tokens, 1)
        _check_int("max_beam", self.max_beam, 1, 64)
        _check_int("queue_size", self.queue_size, 1)
        _check_float("timeout", self.timeout, 0.001, 86400.0)
        _check_float("batch_wait_ms", self.batch_wait_ms, 0.0, 10000.0)
        _check_int("max_batch", self.max_batch, 1)
        _check_int("beam", self.beam, 0, self.max_beam)
        _check_int("max_file_chars", self.max_file_chars, 1)
        _check_float("file_expiry", self.file_expiry, 0.001, 366 * 86400.0)
        _check_int("files_store_bytes", self.files_store_bytes, 1)
        _check_int("decoders", self.decoders, 0, 64)
        _check_int("max_loaded", self.max_loaded, 0)
        if self.preload not in PRELOAD:
            raise ValueError(f"preload: {self.preload!r}; one of {', '.join(PRELOAD)}")
        if self.keep:
            try:
                re.compile(self.keep)
            except re.error as e:
                raise ValueError(f"keep: {self.keep!r} is not a regular expression ({e})") from None

    @property
    def kept(self) -> list[str] | None:
        """What every translation keeps verbatim (``Translator.translate``'s ``keep``)."""
        kept = [
            *(PLACEHOLDERS if self.keep_placeholders else ()),
            *([self.keep] if self.keep else []),
        ]
        return kept or None

    @property
    def model_decoders(self) -> int:
        """``decoders``, 0 resolved for this process's cores."""
        return self.decoders or serving_decoders()


@dataclass(frozen=True)
class FrontendConfig:
    """LibreTranslate's settings beyond access and limits (``aiayn serve`` flags of the same
    names as LibreTranslate's)."""

    alternatives_limit: int = -1  # largest ``alternatives`` on /translate (-1: --max-beam's)
    suggestions: bool = False  # /suggest stores suggestions (403 without)
    suggestions_db: str = "aiayn-suggestions.db"
    suggestions_max_rows: int = 10_000  # suggestions kept (the oldest are removed first)
    disable_web_ui: bool = False  # no page at /
    frontend_timeout: int = 500  # /frontend/settings' frontendTimeout (milliseconds)
    # the languages /frontend/settings names for a page to start with: a code, or "auto"
    # (where the server can take it) and "locale" (the browser's Accept-Language)
    frontend_language_source: str = "auto"
    frontend_language_target: str = "locale"

    def __post_init__(self) -> None:
        _check_int("alternatives_limit", self.alternatives_limit, -1)
        _check_int("frontend_timeout", self.frontend_timeout, 0)
        _check_int("suggestions_max_rows", self.suggestions_max_rows, 1)
        for name, word in (
            ("frontend_language_source", "auto"),
            ("frontend_language_target", "locale"),
        ):
            value = getattr(self, name)
            if not isinstance(value, str) or not (
                value == word or re.fullmatch(r"[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})*", value)
            ):
                raise ValueError(f"{name}: {value!r}; give a language code (de, pt-BR) or {word}")
            object.__setattr__(self, name, value.lower())
