"""Keeping a run directory whole: one training at a time, polite stops, clean restarts.

* ``RunLock``: ``train.lock`` holds the pid and host of the training that owns the directory,
  under an exclusive ``flock``; a second training is refused with both named. The kernel drops
  the lock when its process dies (also on ``kill -9``), so a lock left behind is stale by
  construction and is taken over with a note.
* ``StopSignals``: SIGINT (Ctrl-C) and SIGTERM (schedulers, ``docker stop``) ask the loop to
  stop after the current step; it saves a checkpoint and says how to resume. A second signal
  stops at once.
* ``remove_temp_files``: temporary files of writes that a killed process left half done.
* ``repair_metrics``: ``metrics.jsonl`` keeps the records up to the step training resumes
  from (a replayed step is logged once) and loses a last line that was cut short.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import threading
import time
import warnings
from pathlib import Path

from aiayn.errors import UserError
from aiayn.fileio import write_text

LOCK_FILE = "train.lock"
# what only a run directory holds, and what training writes into one
RUN_MARKERS = ("run.json", "checkpoints", "metrics.jsonl", LOCK_FILE)
RUN_OUTPUTS = ("model", "best", "curves.png")  # (a tokenizer put there is used, not replaced)
_TEMP = re.compile(r"^\..+\.tmp$")  # aiayn.fileio.atomic_write's temporary files


def _describe(holder: dict) -> str:
    if not holder:
        return "an unknown process"
    return f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, since {holder.get('started', '?')}"


def _pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class RunLock:
    """An exclusive lock on a run directory, naming the pid and host that hold it."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_FILE
        self.fd: int | None = None

    def _read(self, fd: int) -> dict:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            return json.loads(os.read(fd, 4096).decode("utf-8") or "{}")
        except (OSError, ValueError):
            return {}

    def _refuse(self, holder: dict) -> UserError:
        return UserError(
            f"{self.directory} is in use by another training ({_describe(holder)}); wait for "
            f"it to finish or stop it, or train into another directory (if no such training "
            f"runs, remove {self.path})"
        )

    def acquire(self) -> None:
        try:
            self._acquire()
        except OSError as e:
            raise UserError(f"cannot lock {self.path}: {e.strerror or e}") from None

    def _acquire(self) -> None:
        import fcntl

        self.directory.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = self._read(fd)
                os.close(fd)
                raise self._refuse(holder) from None
            except OSError:  # a file system without flock: judge by the pid and host
                holder = self._read(fd)
                mine = holder.get("host") == socket.gethostname()
                if holder and (not mine or _pid_alive(holder.get("pid"))):
                    os.close(fd)
                    raise self._refuse(holder) from None
            try:  # the file may have been removed by its last holder while we waited
                if os.fstat(fd).st_ino != os.stat(self.path).st_ino:
                    os.close(fd)
                    continue
            except FileNotFoundError:
                os.close(fd)
                continue
            break
        previous = self._read(fd)
        if previous and previous.get("pid") != os.getpid():
            warnings.warn(
                f"{self.path}: taking over the lock left by a training that no longer runs "
                f"({_describe(previous)})",
                stacklevel=2,
            )
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join(sys.argv),
        }
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (json.dumps(record) + "\n").encode("utf-8"))
        self.fd = fd

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # while still holding it: no one else can
        finally:
            os.close(self.fd)
            self.fd = None


class StopSignals:
    """Record SIGINT / SIGTERM instead of dying, so that the loop can stop after a step."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict = {}

    def _handle(self, signum, frame) -> None:
        if self.received is not None:  # asked twice: stop now
            self.restore()
            raise KeyboardInterrupt
        self.received = signum
        print(
            f"\n{signal.Signals(signum).name}: stopping after this step, with a checkpoint "
            "(send it again to stop at once)",
            file=sys.stderr,
            flush=True,
        )

    def install(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                if signal.getsignal(sig) is not signal.SIG_IGN:  # e.g. nohup: keep ignoring
                    self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}


def check_run_directory(directory: Path) -> None:
    """Refuse to train into a directory whose files training would replace without it being a
    run: a model directory, or a folder that holds a model/, best/ or curves.png."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise UserError(f"{directory}: is a file, not a run directory")
    if not directory.is_dir():
        return
    names = {p.name for p in directory.iterdir()}
    if {"config.json", "model.safetensors"} <= names and "checkpoints" not in names:
        raise UserError(
            f"{directory} is a model directory, not a training run: train into another "
            f'directory, with train.init_from = "{directory}" to start from this model'
        )
    if names & set(RUN_MARKERS):
        return
    clash = sorted(names & set(RUN_OUTPUTS))
    if clash:
        raise UserError(
            f"{directory} holds no training run, but {', '.join(clash)}, which training would "
            "replace; train into a new or empty directory"
        )


def remove_temp_files(directory: Path) -> list[Path]:
    """Delete the temporary files of interrupted atomic writes in ``directory`` and the run's
    subdirectories (checkpoints/, best/, model/); return them."""
    directory = Path(directory)
    removed = []
    for folder in (directory, *(directory / d for d in ("checkpoints", "best", "model"))):
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if _TEMP.match(path.name) and path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def repair_metrics(path: Path, through_step: int) -> None:
    """Keep the records of ``metrics.jsonl`` up to ``through_step`` (and those without a step);
    drop lines that are not JSON (a write cut short), with a warning. Rewritten atomically,
    only when something changes."""
    path = Path(path)
    if not path.is_file():
        return
    raw = path.read_bytes()
    lines = raw.decode("utf-8", "replace").split("\n")
    kept, broken, replayed = [], [], 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError
        except ValueError:
            broken.append(number)
            continue
        step = record.get("step")
        if isinstance(step, int) and step > through_step:
            replayed += 1
            continue
        kept.append(line)
    if broken:
        warnings.warn(
            f"{path}: dropped {len(broken)} line(s) that are not JSON (line "
            f"{', '.join(map(str, broken[:5]))}; a write cut short)",
            stacklevel=2,
        )
    text = "".join(line + "\n" for line in kept)
    if text.encode("utf-8") != raw:
        write_text(path, text)


__all__ = [
    "LOCK_FILE",
    "RunLock",
    "StopSignals",
    "check_run_directory",
    "remove_temp_files",
    "repair_metrics",
]
