"""Documents uploaded through DeepL's ``/v2/document``, translated in the background: each a
``Job`` with its status, kept in this process (a status or result request must reach the
process the document went to, as ``/download_file`` must), the translated file in the bounded
file store (``aiayn.serve.files``).

A job is found by its id and the key answered with it (only its digest is kept, compared in
constant time) and by its owner (an API key: another key's document is not found); it goes
once its result is downloaded (as DeepL's documents do) or ``expiry`` seconds after it was
made, and at most ``MAX_JOBS`` are kept.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field

MAX_JOBS = 1000  # documents a process keeps (queued, translating, done, failed)


@dataclass
class Job:
    id: str
    key_digest: str
    owner: str
    characters: int  # billed
    made: float = field(default_factory=time.monotonic)
    status: str = "queued"  # translating, done, error
    stored: str | None = None  # the translated file's name in the file store
    error: str | None = None
    task: asyncio.Task | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def finish(self, stored: str | None = None, error: str | None = None) -> None:
        self.stored, self.error = stored, error
        self.status = "done" if error is None else "error"
        self.finished.set()


class DocumentJobs:
    """The jobs of one application (``app.state.jobs``)."""

    def __init__(self, expiry: float) -> None:
        self.expiry = expiry
        self._jobs: dict[str, Job] = {}

    def add(self, owner: str, characters: int) -> tuple[Job, str] | None:
        """A new job and its key (shown once: only its digest is kept); None when
        ``MAX_JOBS`` are kept already."""
        self.purge()
        if len(self._jobs) >= MAX_JOBS:
            return None
        key = secrets.token_hex(32).upper()
        job = Job(secrets.token_hex(16).upper(), _digest(key), owner, characters)
        self._jobs[job.id] = job
        return job, key

    def get(self, job_id: str, key: str, owner: str) -> Job | None:
        self.purge()
        job = self._jobs.get(job_id)
        if (
            job is None
            or job.owner != owner
            or not hmac.compare_digest(job.key_digest, _digest(key))
        ):
            return None
        return job

    def remove(self, job: Job) -> None:
        self._jobs.pop(job.id, None)

    def purge(self) -> None:
        """Forget the jobs older than ``expiry`` (their files have expired with them)."""
        now = time.monotonic()
        for old in [j for j in self._jobs.values() if now - j.made > self.expiry]:
            if old.task is not None:
                old.task.cancel()
            del self._jobs[old.id]

    def close(self) -> None:
        for job in self._jobs.values():
            if job.task is not None:
                job.task.cancel()
        self._jobs.clear()


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()
