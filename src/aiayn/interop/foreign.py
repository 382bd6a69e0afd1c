"""Models of other toolkits served as they are: an Argos Translate package (an ``.argosmodel``
archive, or a package folder as Argos Translate installs it) or a CTranslate2 model directory.

``foreign_kind(path)`` says which a path holds (None: an aiayn model directory, or nothing);
``open_foreign(path)`` reads one into a ``ForeignModel``: where its CTranslate2 model is, its
tokenizer (``ArgosTokenizer``: the package's, or the sentencepiece model(s) beside a
CTranslate2 model), its languages and their names, its sentence splitter
(``argos_splitter``), what its ``model.bin`` header says, and how it becomes an aiayn model
directory (``import_into``; ``argos_cache.imported_model`` keeps that import). An archive is
extracted once into the cache (``argos_cache.extracted_package``).
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType

from aiayn.data.argos_tokenizer import (
    ArgosTokenizer,
    ct2_vocab_maps,
    read_ct2_config,
    read_ct2_vocabularies,
)
from aiayn.errors import UserError
from aiayn.interop.argos_cache import extracted_package, imported_model
from aiayn.interop.argos_package import METADATA, MODEL, ArgosPackage, read_package
from aiayn.interop.argos_splitter import Splitter, package_splitter, splitter_libraries
from aiayn.interop.ctranslate2.importer import SHARED_SPM, SOURCE_SPM, TARGET_SPM
from aiayn.interop.ctranslate2.reader import MODEL_BIN, read_model_bin

ARCHIVE, PACKAGE, CTRANSLATE2 = "argos-archive", "argos-package", "ctranslate2"
AIAYN_WEIGHTS = "model.safetensors"  # an aiayn model directory's (aiayn.modeldir.WEIGHTS_FILE)


def foreign_kind(path: Path | str) -> str | None:
    """What ``path`` holds: ``ARCHIVE`` (an ``.argosmodel``, or any zip archive),
    ``PACKAGE`` (a folder with metadata.json and model/), ``CTRANSLATE2`` (a folder with
    model.bin and no aiayn weights), or None (anything else: an aiayn model directory)."""
    path = Path(path)
    if path.is_file():
        return ARCHIVE if path.suffix == ".argosmodel" or zipfile.is_zipfile(path) else None
    if not path.is_dir():
        return None
    if (path / METADATA).is_file() and (path / MODEL).is_dir():
        return PACKAGE
    if (path / MODEL_BIN).is_file() and not (path / AIAYN_WEIGHTS).is_file():
        return CTRANSLATE2
    return None


@dataclass(frozen=True)
class ForeignModel:
    """A model served as another toolkit wrote it (see the module).

    ``path``: as given (the archive, package folder or CTranslate2 directory); ``kind``: its
    ``foreign_kind``; ``model_dir``: the CTranslate2 model; ``package``: the Argos Translate
    package read (None for a bare CTranslate2 model); ``languages``: (source, target), or
    None where nothing says (a bare CTranslate2 model); ``language_names``: their names
    (the package's metadata); ``name``: what a server calls it by default (the package's
    folder name, translate-de_en-1_0).
    """

    path: Path
    kind: str
    model_dir: Path
    package: ArgosPackage | None
    languages: tuple[str, str] | None
    language_names: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.package.name if self.package is not None else self.path.name

    @property
    def metadata(self) -> dict:
        """metadata.json of a package; for a CTranslate2 model, its languages where given."""
        if self.package is not None:
            return dict(self.package.metadata)
        if self.languages is None:
            return {}
        return {"from_code": self.languages[0], "to_code": self.languages[1]}

    @property
    def run(self) -> dict:
        """What a model directory's run.json would say: the pair, the package's metadata."""
        run: dict = {"metadata": self.metadata}
        if self.languages is not None:
            source, target = self.languages
            run["data"] = {"task": "translation", "src_lang": source, "tgt_lang": target}
        return run

    @property
    def source_dir(self) -> Path:
        """The folder whose files make the model (a package's folder, or the CTranslate2
        model's)."""
        return self.package.path if self.package is not None else self.model_dir

    @cached_property
    def header(self):
        """model.bin's header: its spec and each variable's shape, without its values."""
        return read_model_bin(self.model_dir / MODEL_BIN, values=False)

    @property
    def max_positions(self) -> int | None:
        """The positions the model has where it stores its position tables (the fewest of
        them; CTranslate2 refuses a sequence past them), None where it computes them."""
        header = self.header
        rows = []
        for name in (*header.variables, *header.aliases):
            if name.endswith("position_encodings/encodings"):
                table = header.variables.get(header.aliases.get(name, name))
                if table is not None and table.dim() == 2:
                    rows.append(table.shape[0])
        return min(rows) if rows else None

    @property
    def parameters(self) -> int:
        """Numbers the model stores (weights, their int8 scales, its flags)."""
        return sum(v.numel() for v in self.header.variables.values())

    @property
    def created(self) -> int:
        """When model.bin was written (Unix time)."""
        return int((self.model_dir / MODEL_BIN).stat().st_mtime)

    def tokenizer(self) -> ArgosTokenizer:
        """The tokenizer over the CTranslate2 model's vocabularies (``ArgosTokenizer``):
        the package's, or the sentencepiece model(s) beside a CTranslate2 model."""
        if self.package is not None:
            from aiayn.interop.argos_package import package_tokenizer

            return package_tokenizer(self.package)
        return _ct2_tokenizer(self.model_dir, self.languages)

    @property
    def libraries(self) -> tuple[str, ...]:
        """The modules its sentence splitter imports (``argos_splitter.splitter_libraries``)."""
        return splitter_libraries(self.package) if self.package is not None else ()

    def splitter(self) -> Splitter | None:
        """The package's own sentence splitter (``argos_splitter``), or None."""
        return package_splitter(self.package) if self.package is not None else None

    def import_into(self, out: Path) -> None:
        """Write the model as the aiayn model directory ``out`` (replaced whole)."""
        from aiayn.interop.ctranslate2.importer import import_argos_package, import_ctranslate2

        if self.package is not None:
            import_argos_package(self.package.path, out, force=True)
        else:
            import_ctranslate2(self.model_dir, out, metadata=self.metadata or None, force=True)

    def imported(self, cache_dir: Path | str | None = None) -> Path:
        """The aiayn model directory of this model, imported once and kept in the cache
        (``argos_cache.imported_model``)."""
        return imported_model(self.source_dir, self.name, self.import_into, cache_dir)


def open_foreign(
    path: Path | str,
    cache_dir: Path | str | None = None,
    languages: tuple[str, str] | None = None,
) -> ForeignModel:
    """The model at ``path`` (see ``foreign_kind``); an archive is extracted into the cache
    (``cache_dir``, as ``argos_cache.cache_root`` says). ``languages``: a CTranslate2
    model's pair (a package names its own). A ``UserError`` names what is wrong."""
    path = Path(path)
    kind = foreign_kind(path)
    if kind is None:
        raise UserError(
            f"{path}: neither an Argos Translate package (.argosmodel, or a folder with "
            "metadata.json and model/) nor a CTranslate2 model directory (model.bin)"
        )
    if kind == CTRANSLATE2:
        model = ForeignModel(path, kind, path, None, languages)
        model.tokenizer()  # its files are there and read, or an error now
        return model
    package = extracted_package(path, cache_dir) if kind == ARCHIVE else read_package(path)
    names = MappingProxyType(
        {package.source: package.source_name, package.target: package.target_name}
    )
    return ForeignModel(path, kind, package.model_dir, package, package.pair, names)


def _ct2_tokenizer(model_dir: Path, languages: tuple[str, str] | None) -> ArgosTokenizer:
    """The sentencepiece model(s) beside a CTranslate2 model (``sentencepiece.model``, or
    ``source.spm`` and ``target.spm``) over its vocabularies."""
    if (model_dir / SHARED_SPM).is_file():
        files = [model_dir / SHARED_SPM]
    elif (model_dir / SOURCE_SPM).is_file() and (model_dir / TARGET_SPM).is_file():
        files = [model_dir / SOURCE_SPM, model_dir / TARGET_SPM]
    else:
        raise UserError(
            f"{model_dir}: a CTranslate2 model is served with its sentencepiece model beside "
            f"model.bin ({SHARED_SPM}, or {SOURCE_SPM} and {TARGET_SPM}); none is there (import "
            "it with aiayn import --tokenizer, and serve the import)"
        )
    source, target = read_ct2_vocabularies(model_dir)
    try:
        maps = ct2_vocab_maps(read_ct2_config(model_dir), source, target)
    except (UserError, ValueError) as e:
        raise UserError(f"{model_dir}: {e}") from None
    protos = [p.read_bytes() for p in files]
    source_lang, target_lang = languages or ("", "")
    try:
        return ArgosTokenizer(
            "sentencepiece", protos[0], source, target, maps, source_lang, target_lang, "",
            protos[1] if len(protos) == 2 else None,
        )  # fmt: skip
    except ValueError as e:
        raise UserError(f"{' / '.join(str(p) for p in files)}: {e}") from None
