"""Reading Argos Translate packages, as Argos Translate and LibreTranslate install them.

A package (``.argosmodel``) is a zip archive of one folder; installed, it is that folder in a
packages directory (``$ARGOS_PACKAGES_DIR``, by default
``~/.local/share/argos-translate/packages``). The folder holds ``metadata.json`` (the pair:
``from_code``, ``to_code``, their names, ``package_version``, ``argos_version``, and where
a model serves several languages, ``target_prefix``: the token that starts every
translation), ``model/`` (a CTranslate2 model), the tokenizer (``sentencepiece.model``, or
``bpe.model``: subword-nmt codes applied after Moses tokenization), the data of a sentence
splitter (``minisbd/``, ``stanza/`` or ``spacy/``, chosen in that order, as Argos Translate
chooses; or none) and a README.

``read_package`` reads one (an archive or an installed folder) into an ``ArgosPackage``;
``package_tokenizer`` gives its tokenizer (``aiayn.data.argos_tokenizer``); ``find_packages``
lists the packages installed in a packages directory, warning about and skipping a broken
one. An archive is hostile until read (``aiayn.interop.archive``): it is
checked, extracted into a temporary folder, read, and only then renamed into place;
nothing is left behind when it is refused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from aiayn.data.argos_tokenizer import ArgosTokenizer
from aiayn.errors import UserError
from aiayn.interop.archive import ArchiveLimits, extracted

WHAT = "Argos Translate package (.argosmodel)"
METADATA = "metadata.json"
MODEL = "model"
TOKENIZERS = {"sentencepiece.model": "sentencepiece", "bpe.model": "bpe"}  # Argos's order
SPLITTERS = ("minisbd", "stanza", "spacy")  # Argos's order of preference
MAX_METADATA_BYTES = 1 << 20
LIMITS = ArchiveLimits()
# Argos codes are ISO 639 codes and a few of its own (pb = pt-BR, zt = zh-Hant)
CODE = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*")


class NotATranslationPackage(UserError):
    """A well-formed package of another type (Argos's old sentence-boundary packages)."""


@dataclass(frozen=True)
class ArgosPackage:
    """One Argos Translate package, read.

    ``path``: its folder; ``source``/``target``: the language codes (``from_code``/``to_code``)
    and ``source_name``/``target_name`` their names; ``target_prefix``: the token every
    translation starts with ("" for none); ``model_dir``: the CTranslate2 model;
    ``tokenizer``: "sentencepiece" or "bpe", read from ``tokenizer_model``;
    ``sentence_splitter``: "minisbd", "stanza", "spacy" or None, its data in
    ``sentence_splitter_dir``; ``metadata``: metadata.json as it is.
    """

    path: Path
    source: str
    target: str
    source_name: str
    target_name: str
    package_version: str
    argos_version: str
    target_prefix: str
    model_dir: Path
    tokenizer: str
    tokenizer_model: Path
    sentence_splitter: str | None
    sentence_splitter_dir: Path | None
    metadata: Mapping = field(compare=False, repr=False)

    @property
    def pair(self) -> tuple[str, str]:
        return self.source, self.target

    @property
    def name(self) -> str:
        """The package's folder name, as Argos Translate installs it (translate-de_en-1_0)."""
        return self.path.name

    @property
    def readme(self) -> Path | None:
        path = self.path / "README.md"
        return path if path.is_file() else None


def read_package(
    path: Path | str, into: Path | str | None = None, limits: ArchiveLimits = LIMITS
) -> ArgosPackage:
    """The Argos Translate package at ``path``: an installed package folder (read in
    place), or a ``.argosmodel`` archive, checked and extracted into ``into`` (a folder; the
    package lands in ``into/<its folder name>``, which must not exist yet). Without
    ``into``, an archive is extracted into a new temporary folder, the caller's to remove
    (``package.path.parent``; ``opened_package`` does it). A ``UserError`` names the file
    and the problem; when an archive is refused, nothing is left written."""
    path = Path(path)
    if path.is_dir():
        return _read_folder(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or folder (an {WHAT} or an installed package)")
    made = None  # the folder this call creates, removed again if the package is refused
    if into is None:
        made = into = Path(tempfile.mkdtemp(prefix="aiayn-argos-"))
    into = Path(into)
    try:
        if not into.exists():
            made = next(p for p in reversed([into, *into.parents]) if not p.exists())
            into.mkdir(parents=True)
        return _install(path, into, limits)
    except BaseException as e:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        if isinstance(e, OSError):
            raise UserError(f"cannot write {into}: {e.strerror or e}") from e
        raise


@contextmanager
def opened_package(path: Path | str, limits: ArchiveLimits = LIMITS) -> Iterator[ArgosPackage]:
    """``read_package(path)`` for the length of a ``with`` block: an archive is extracted
    into a temporary folder removed when the block ends."""
    path = Path(path)
    if path.is_dir():
        yield _read_folder(path)
        return
    with tempfile.TemporaryDirectory(prefix="aiayn-argos-") as tmp:
        yield read_package(path, tmp, limits)


def _install(archive: Path, into: Path, limits: ArchiveLimits) -> ArgosPackage:
    with extracted(archive, into, WHAT, limits) as folder:
        _read_folder(folder, where=archive)  # every check before it is moved into place
        final = into / folder.name
        if final.exists():
            raise UserError(
                f"{archive}: {final} exists already (a package of that name is installed); "
                "remove it or extract elsewhere"
            )
        folder.rename(final)
    return _read_folder(final)


def _read_folder(folder: Path, where: Path | None = None) -> ArgosPackage:
    """Read and check the package folder ``folder``; messages name ``where`` (the archive it
    came from) when given, else the folder's files."""

    def name(*parts: str) -> str:
        if where is not None:
            return f"{where}: member {'/'.join((folder.name, *parts))}"
        return str(folder.joinpath(*parts))

    metadata_path = folder / METADATA
    if not metadata_path.is_file():
        inside = (
            [p for p in sorted(folder.iterdir()) if (p / METADATA).is_file()]
            if where is None
            else []
        )
        hint = (
            f"; it holds packages ({inside[0].name}, ...): a packages directory, which "
            "find_packages reads"
            if inside
            else ""
        )
        raise UserError(f"{name(METADATA)}: missing; an {WHAT} names its languages there{hint}")
    metadata = _metadata(metadata_path, name(METADATA))
    kind = metadata.get("type", "translate")
    if kind != "translate":
        raise NotATranslationPackage(
            f"{name(METADATA)}: a package of type {kind!r}, not a translation model "
            "(type 'translate')"
        )
    model_dir = folder / MODEL
    if not model_dir.is_dir():
        raise UserError(f"{name(MODEL)}: missing; an {WHAT} holds its CTranslate2 model in model/")
    if not (model_dir / "model.bin").is_file():
        raise UserError(f"{name(MODEL, 'model.bin')}: missing; model/ is not a CTranslate2 model")
    found = [(folder / f, kind) for f, kind in TOKENIZERS.items() if (folder / f).is_file()]
    if not found:
        raise UserError(
            f"{name()}: unknown tokenizer: neither sentencepiece.model nor bpe.model (the two "
            "tokenizers Argos Translate reads)"
        )
    tokenizer_model, tokenizer = found[0]
    splitters = [s for s in SPLITTERS if (folder / s).is_dir()]
    splitter = splitters[0] if splitters else None
    strings = {key: _string(metadata, key, name(METADATA)) for key in (
        "from_name", "to_name", "package_version", "argos_version", "target_prefix"
    )}  # fmt: skip
    source, target = (_code(metadata, key, name(METADATA)) for key in ("from_code", "to_code"))
    return ArgosPackage(
        path=folder,
        source=source,
        target=target,
        source_name=strings["from_name"] or source,
        target_name=strings["to_name"] or target,
        package_version=strings["package_version"],
        argos_version=strings["argos_version"],
        target_prefix=strings["target_prefix"],
        model_dir=model_dir,
        tokenizer=tokenizer,
        tokenizer_model=tokenizer_model,
        sentence_splitter=splitter,
        sentence_splitter_dir=folder / splitter if splitter else None,
        metadata=MappingProxyType(metadata),
    )


def _metadata(path: Path, where: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_METADATA_BYTES + 1)
    except OSError as e:
        raise UserError(f"{where}: cannot read it ({e.strerror or e})") from None
    if len(data) > MAX_METADATA_BYTES:
        raise UserError(f"{where}: over {MAX_METADATA_BYTES} bytes; not package metadata")
    try:
        metadata = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise UserError(f"{where}: not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise UserError(f"{where}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise UserError(f"{where}: not valid JSON (nested too deep)") from None
    if not isinstance(metadata, dict):
        raise UserError(f"{where}: expected a JSON object {{...}}, got {type(metadata).__name__}")
    return metadata


def _string(metadata: dict, key: str, where: str) -> str:
    value = metadata.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise UserError(f"{where}: {key} must be text, got {json.dumps(value)[:40]}")
    return value


def _code(metadata: dict, key: str, where: str) -> str:
    if key not in metadata:
        raise UserError(f'{where}: missing field {key!r} (the language code, e.g. "de")')
    value = metadata[key]
    if not isinstance(value, str) or not CODE.fullmatch(value):
        raise UserError(
            f"{where}: {key} {json.dumps(value)[:40]} is not a language code (ISO 639, as "
            '"de", or Argos\'s own, as "pb" or "zt")'
        )
    return value


def package_tokenizer(
    package: ArgosPackage, start_from_zero_embedding: bool = False
) -> ArgosTokenizer:
    """The package's tokenizer (``aiayn.data.argos_tokenizer.ArgosTokenizer``) over its
    CTranslate2 model's vocabularies; ``start_from_zero_embedding``: the model starts its
    decoder from a zero embedding (CTranslate2's Marian conversions), read from model.bin by
    the caller."""
    return ArgosTokenizer.from_files(
        package.tokenizer,
        package.tokenizer_model,
        package.model_dir,
        package.source,
        package.target,
        package.target_prefix,
        start_from_zero_embedding,
    )


# -- installed packages ------------------------------------------------------------------------


def packages_dir() -> Path:
    """Where Argos Translate (and so LibreTranslate) installs packages:
    ``$ARGOS_PACKAGES_DIR``, else that setting in Argos's settings.json, else
    ``$XDG_DATA_HOME/argos-translate/packages`` (``~/.local/share/...``)."""
    if os.environ.get("ARGOS_PACKAGES_DIR"):
        return Path(os.environ["ARGOS_PACKAGES_DIR"]).expanduser()
    home = Path.home()
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    settings = config / "argos-translate" / "settings.json"
    try:
        configured = json.loads(settings.read_text(encoding="utf-8")).get("ARGOS_PACKAGES_DIR")
    except (OSError, ValueError, AttributeError):
        configured = None
    if isinstance(configured, str) and configured:
        return Path(configured).expanduser()
    data = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    return data / "argos-translate" / "packages"


def find_packages(directory: Path | str | None = None) -> list[ArgosPackage]:
    """The translation packages installed in ``directory`` (default ``packages_dir()``), in
    the order of their folder names. A package that cannot be read is reported (a warning
    naming its folder and the problem) and skipped; a folder of another package type (a
    sentence splitter of old Argos versions) and a hidden folder (an extraction under way)
    are skipped quietly; a missing directory holds no packages."""
    directory = Path(directory) if directory is not None else packages_dir()
    if not directory.is_dir():
        if directory.exists():
            raise UserError(f"{directory}: not a folder (Argos Translate's packages directory)")
        return []
    found = []
    folders = [p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")]
    for folder in sorted(folders):  # hidden: an extraction under way, not a package
        try:
            found.append(_read_folder(folder))
        except NotATranslationPackage:
            continue
        except UserError as e:
            warnings.warn(
                f"{folder}: skipped, not a usable Argos Translate package: {e}", stacklevel=2
            )
    return found
