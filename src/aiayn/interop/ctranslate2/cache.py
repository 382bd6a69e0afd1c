"""The cache of CTranslate2 conversions: where it lives, what names an entry, and checking and
repairing an entry before each use.

``cached_model`` keeps the conversion of a model directory in ``MODEL/.ctranslate2/KEY/``, or
in a cache directory given, ``$AIAYN_CACHE_DIR``, or the user's cache where the model
directory cannot be written (``cache_root``). KEY names a digest of what the conversion was
made from (``conversion_inputs``, the one place the model's files are digested for the cache:
weights, config, tokenizer, quantization; ``cache_key``). An entry's stamp (``STAMP``)
records those inputs and the size and SHA-256 of each of its files (``file_digests``);
``damage`` checks them before each use, and a damaged entry is converted again
(``conversion.convert``), under a lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

from aiayn.errors import note
from aiayn.fileio import file_sha256, fsync_directory, write_json
from aiayn.interop.ctranslate2.conversion import STAMP, CannotRunHere, check_quantization, convert
from aiayn.modeldir import ModelDir

CACHE_DIR = ".ctranslate2"  # inside the model directory
CACHE_ENV = "AIAYN_CACHE_DIR"  # where conversions are cached, when no cache_dir is given
CONVERSION = 2  # the conversion's format: a cached conversion of another is converted anew


def inputs_digest(inputs: dict) -> str:
    """16 hex digits of the SHA-256 of ``inputs`` (what a cache entry is made from) as
    sorted JSON: the stem of the entry's name."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def user_cache_dir() -> Path:
    """The user's cache directory for aiayn: ``$XDG_CACHE_HOME/aiayn``, by default
    ``~/.cache/aiayn``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aiayn"


def cache_key(inputs: dict) -> str:
    """The cache entry's name: a digest of what the conversion is made from (``inputs``),
    then its quantization."""
    return f"{inputs_digest(inputs)}-{inputs['quantization'] or 'float32'}"


def conversion_inputs(model_dir: ModelDir | Path, quantization: str | None) -> dict:
    """What a conversion of ``model_dir`` depends on: the model directory's fingerprint (the
    weights, the model's config, the tokenizer: ``ModelDir.fingerprint``), the quantization
    and the conversion's own format (``CONVERSION``). An entry's key and stamp are made of
    it."""
    return {
        "conversion": CONVERSION,
        **ModelDir.open(model_dir).fingerprint(),
        "quantization": quantization,
    }


def cache_root(model_dir: Path, cache_dir: Path | str | None = None) -> tuple[Path, bool]:
    """Where conversions of ``model_dir`` are cached, and whether that is the model's own
    cache. In order: ``cache_dir``; ``$AIAYN_CACHE_DIR``; ``MODEL/.ctranslate2`` where the
    model directory can be written; else the user's cache directory,
    ``$XDG_CACHE_HOME/aiayn/ctranslate2`` (default ``~/.cache/aiayn/ctranslate2``)."""
    if cache_dir is not None:
        return Path(cache_dir), False
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]), False
    own = model_dir / CACHE_DIR
    if (
        own.is_dir()
        and os.access(own, os.W_OK | os.X_OK)
        or os.access(model_dir, os.W_OK | os.X_OK)
    ):
        return own, True
    return user_cache_dir() / "ctranslate2", False


def cached_model(
    model_dir: ModelDir | Path, quantization: str | None = None, cache_dir: Path | str | None = None,
    *, again: bool = False,
) -> Path:  # fmt: skip
    """The CTranslate2 conversion of ``model_dir``, converted on first use and reused while
    what it was made from (``conversion_inputs``) stays the same.

    The cache lives in ``cache_root``. Before use, every file of a cached conversion is
    checked against the size and SHA-256 its stamp recorded: a damaged or incomplete one is
    converted again, with a warning naming it (``again``: convert again whatever the check
    says, for a conversion that does not load). A conversion is written beside its place and
    renamed into it, under a lock, so that processes converting at once leave one conversion
    and a reader never sees half of one. In the model's own cache, conversions of earlier
    weights are removed.
    """
    check_quantization(quantization)
    directory = ModelDir.open(model_dir)  # a model directory, or an error naming what is missing
    model_dir = directory.path
    inputs = conversion_inputs(directory, quantization)
    root, own = cache_root(model_dir, cache_dir)
    target = root / cache_key(inputs)
    if not again and not damage(target, inputs):
        return target
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / f".{target.name}.lock", "a")  # noqa: SIM115 (held until converted)
    except OSError as e:
        raise CannotRunHere(
            f"{root}: cannot write the CTranslate2 conversion there ({e.strerror or e}); give "
            f"a writable cache directory (--cache-dir, cache_dir=, or ${CACHE_ENV})"
        ) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be converting the same model
        problem = "" if again else damage(target, inputs)
        if not again and not problem:  # the other process's conversion
            return target
        if target.exists() and problem:
            warnings.warn(
                f"{target}: the cached CTranslate2 conversion is damaged ({problem}); "
                "converting it again",
                stacklevel=2,
            )
        if own:
            _remove_stale(root, inputs)
        _convert_into(directory, target, quantization, inputs)
    return target


def _remove_stale(root: Path, inputs: dict) -> None:
    """Remove the conversions in ``root`` of other weights, configs, tokenizers or formats
    (those of another quantization of the same model stay)."""
    same = {k: v for k, v in inputs.items() if k != "quantization"}
    for old in root.iterdir():
        if old.is_dir() and not old.name.startswith("."):
            theirs = _stamp(old).get("inputs")
            if (
                not isinstance(theirs, dict)
                or {k: v for k, v in theirs.items() if k != "quantization"} != same
            ):
                shutil.rmtree(old, ignore_errors=True)


def _convert_into(
    directory: ModelDir, target: Path, quantization: str | None, inputs: dict
) -> None:
    """Convert into a sibling of ``target``, stamp it, and rename it into place (a damaged
    ``target`` is moved aside first, then removed)."""
    start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix=".converting-", dir=target.parent))
    try:
        convert(directory, work / "model", quantization, add_source_eos=False)
        record = json.loads((work / "model" / STAMP).read_text())
        record.update(inputs=inputs, files=file_digests(work / "model"))
        write_json(work / "model" / STAMP, record)
        if target.exists():
            os.replace(target, work / "damaged")
        os.replace(work / "model", target)
        fsync_directory(target.parent)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    note(
        f"converted {directory.path} for CTranslate2 ({quantization or 'float32'}) in "
        f"{time.perf_counter() - start:.1f} s: {target}"
    )


def file_digests(directory: Path) -> dict[str, dict]:
    """Size and SHA-256 of each file under ``directory`` (a conversion, or a folder of
    folders), by its path there ("model/model.bin"), the stamp at the top left out."""
    directory = Path(directory)
    return {
        path: {"size": p.stat().st_size, "sha256": file_sha256(p)}
        for path, p in _files(directory).items()
        if path != STAMP
    }


def _files(directory: Path) -> dict[str, Path]:
    """Every file under ``directory`` by its path there, in order; a link or other thing that is
    not a folder or a plain file is listed too (as itself), so that a check refuses it."""
    return {
        p.relative_to(directory).as_posix(): p
        for p in sorted(directory.rglob("*"))
        if not p.is_dir() or p.is_symlink()
    }


def damage(directory: Path, inputs: dict) -> str:
    """What is wrong with the cached conversion ``directory`` ("" when nothing): absent, made
    from other inputs, or a file missing, of another size or of other bytes than its stamp
    records."""
    if not directory.is_dir():
        return "absent"
    stamp = _stamp(directory)
    if stamp.get("inputs") != inputs or not isinstance(stamp.get("files"), dict):
        return f"{STAMP} is missing, damaged or records other inputs"
    for name, expected in sorted(stamp["files"].items()):
        path = directory / name
        try:
            if path.is_symlink() or not path.is_file():
                return f"{name} is missing"
            size = path.stat().st_size
        except OSError:
            return f"{name} is missing"
        if not isinstance(expected, dict) or size != expected.get("size"):
            return f"{name} has {size} bytes, not the {expected.get('size')} recorded"
        if file_sha256(path) != expected.get("sha256"):
            return f"{name} does not have the SHA-256 recorded"
    extra = set(_files(directory)) - set(stamp["files"]) - {STAMP}
    if extra:
        return f"unexpected files: {', '.join(sorted(extra))}"
    return ""


def _stamp(directory: Path) -> dict:
    try:
        data = json.loads((Path(directory) / STAMP).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
