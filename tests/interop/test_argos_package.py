"""Reading Argos Translate packages: what ``read_package`` and ``find_packages`` see is what
Argos Translate itself sees in the same packages (installed by its own installer)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from aiayn.errors import UserError
from aiayn.interop.argos_package import (
    find_packages,
    opened_package,
    package_tokenizer,
    packages_dir,
    read_package,
)
from tests.interop.argos_fixtures import PAIRS, argos_view, ding_lines, package_name

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def installed_by_argos(argos_packages, tmp_path_factory) -> tuple[Path, dict]:
    """The three packages installed by Argos Translate's install_from_path into a packages
    directory of its own, and what Argos Translate then reports."""
    pytest.importorskip("argostranslate", reason="Argos Translate is the reference here")
    home = tmp_path_factory.mktemp("argos-home")
    packages = home / "packages"
    texts = {f"{s}-{t}": ding_lines(s, 206)[200:] for s, t in PAIRS.values()}
    view = argos_view(home, packages, list(argos_packages.values()), texts)
    return packages, view


def test_find_packages_sees_the_packages_argos_translate_installed(installed_by_argos):
    packages, view = installed_by_argos
    ours = {p.name: p for p in find_packages(packages)}
    theirs = {p["folder"]: p for p in view["packages"]}
    assert set(ours) == set(theirs) == {package_name(*pair) for pair in PAIRS.values()}
    tokenizers = {"SentencePieceTokenizer": "sentencepiece", "BPETokenizer": "bpe"}
    for name, want in theirs.items():
        got = ours[name]
        assert (got.source, got.target) == (want["from_code"], want["to_code"])
        assert (got.source_name, got.target_name) == (want["from_name"], want["to_name"])
        assert (got.package_version, got.argos_version) == (
            want["package_version"],
            want["argos_version"],
        )
        assert got.target_prefix == want["target_prefix"]
        assert got.tokenizer == tokenizers[want["tokenizer"]]
        assert got.sentence_splitter == want["splitter"]
        assert got.model_dir == packages / name / "model"
        assert got.metadata["type"] == want["type"] == "translate"


def test_the_pairs_and_languages_are_argos_translates(installed_by_argos):
    """Same languages and names, same direct pairs; and the pivots Argos offers are the
    chains of those pairs (de reaches fr and es through en)."""
    packages, view = installed_by_argos
    found = find_packages(packages)
    pairs = {p.pair for p in found}
    names = {p.source: p.source_name for p in found} | {p.target: p.target_name for p in found}
    assert names == {lang["code"]: lang["name"] for lang in view["languages"]}
    assert pairs == {(lang["code"], t) for lang in view["languages"] for t in lang["direct"]}
    reach = {code: {t for s, t in pairs if s == code} for code in names}
    for _ in names:  # the chains of pairs, as far as they go
        reach = {c: r | {t for m in r for t in reach[m]} for c, r in reach.items()}
    assert reach == {lang["code"]: set(lang["to"]) - {lang["code"]} for lang in view["languages"]}
    assert {"en", "es", "fr"} <= reach["de"]


def test_the_packages_translate_in_argos_translate_as_their_tokenizer_says(installed_by_argos):
    """Each package, read here, translated by CTranslate2 from ArgosTokenizer's pieces with
    Argos Translate's settings and read back by ArgosTokenizer, gives Argos Translate's text."""
    import ctranslate2

    packages, view = installed_by_argos
    for package in find_packages(packages):
        key = "-".join(package.pair)
        texts = ding_lines(package.source, 206)[200:]
        tokenizer = package_tokenizer(package)
        translator = ctranslate2.Translator(
            str(package.model_dir), device="cpu", compute_type="float32", intra_threads=1
        )
        results = translator.translate_batch(
            [tokenizer.pieces(t) for t in texts],
            beam_size=4,
            length_penalty=0.2,
            replace_unknowns=True,
        )
        ids = [tokenizer.encode_pieces(r.hypotheses[0], target=True) for r in results]
        assert tokenizer.decode(ids) == view["translations"][key], key
        assert any(view["translations"][key]), key  # the models say something


def test_an_archive_extracts_to_what_argos_translate_installs(
    installed_by_argos, argos_packages, tmp_path
):
    packages, _ = installed_by_argos
    for archive in argos_packages.values():
        package = read_package(archive, tmp_path / "ours")
        assert package.path == tmp_path / "ours" / package.name
        assert files_of(package.path) == files_of(packages / package.name)
        theirs = read_package(packages / package.name)
        assert dict(theirs.metadata) == dict(package.metadata)
        assert (theirs.pair, theirs.tokenizer, theirs.sentence_splitter) == (
            package.pair, package.tokenizer, package.sentence_splitter
        )  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "ours").iterdir()) == sorted(
        p.name for p in packages.iterdir()
    )  # nothing else is left there (no temporary folder)


def test_an_installed_folder_and_its_archive_read_the_same(argos_packages, tmp_path):
    from_archive = read_package(argos_packages["bpe"], tmp_path)
    in_place = read_package(from_archive.path)
    assert in_place == from_archive and in_place.metadata == from_archive.metadata
    assert in_place.tokenizer == "bpe" and in_place.tokenizer_model.name == "bpe.model"
    assert in_place.sentence_splitter is None and in_place.readme.name == "README.md"
    with pytest.raises(UserError, match="exists already") as refused:
        read_package(argos_packages["bpe"], tmp_path)  # never over an installed package
    assert str(refused.value).startswith(str(argos_packages["bpe"]))
    assert [p.name for p in tmp_path.iterdir()] == [from_archive.name]


def test_without_a_destination_an_archive_goes_to_a_temporary_folder(argos_packages):
    package = read_package(argos_packages["prenorm"])
    try:
        assert package.pair == PAIRS["prenorm"] and package.model_dir.is_dir()
        assert [p.name for p in package.path.parent.iterdir()] == [package.name]
    finally:
        shutil.rmtree(package.path.parent)
    with opened_package(argos_packages["prenorm"]) as package:
        folder = package.path
        assert package.sentence_splitter == "spacy" and (folder / "spacy").is_dir()
    assert not folder.exists() and not folder.parent.exists()


def test_the_splitter_is_chosen_in_argos_translates_order(argos_packages, tmp_path):
    """minisbd/ before stanza/ before spacy/ (argostranslate.package.Package)."""
    package = read_package(argos_packages["prenorm"], tmp_path)
    assert package.sentence_splitter == "spacy"
    (package.path / "stanza").mkdir()
    assert read_package(package.path).sentence_splitter == "stanza"
    (package.path / "minisbd").mkdir()
    again = read_package(package.path)
    assert again.sentence_splitter == "minisbd" and again.sentence_splitter_dir.name == "minisbd"


def test_target_prefix_names_and_tokenizer_order_come_from_the_package(argos_packages, tmp_path):
    package = read_package(argos_packages["marian"], tmp_path)
    meta = json.loads((package.path / "metadata.json").read_text())
    meta.update(target_prefix="__fr__", from_name=None)
    del meta["to_name"]
    (package.path / "metadata.json").write_text(json.dumps(meta))
    (package.path / "bpe.model").write_text("#version: 0.2\na b\n")
    again = read_package(package.path)
    assert again.target_prefix == "__fr__"
    assert (again.source_name, again.target_name) == ("en", "fr")  # no names: the codes
    assert again.tokenizer == "sentencepiece"  # sentencepiece.model first, as Argos


def test_a_broken_package_is_reported_and_skipped(argos_packages, tmp_path):
    packages = tmp_path / "packages"
    packages.mkdir()
    for kind in ("prenorm", "bpe"):
        read_package(argos_packages[kind], packages)
    broken = packages / package_name(*PAIRS["bpe"])
    (broken / "metadata.json").write_text("{not json")
    old = packages / "sbd-xx-1_0"  # an old sentence-boundary package: not a translation one
    old.mkdir()
    (old / "metadata.json").write_text(json.dumps({"type": "sbd", "from_code": "xx"}))
    (packages / "stray.txt").write_text("not a package")
    (packages / ".aiayn-extract-x1y2").mkdir()  # an extraction under way
    with pytest.warns(UserWarning, match="skipped") as warned:
        found = find_packages(packages)
    assert [p.pair for p in found] == [PAIRS["prenorm"]]
    assert len(warned) == 1 and str(broken) in str(warned[0].message)
    assert "not valid JSON" in str(warned[0].message)


def test_the_default_packages_directory_is_argos_translates(tmp_path, monkeypatch):
    monkeypatch.delenv("ARGOS_PACKAGES_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert packages_dir() == tmp_path / ".local/share/argos-translate/packages"
    assert find_packages() == []  # nothing installed, nothing created
    assert not (tmp_path / ".local").exists()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert packages_dir() == tmp_path / "data/argos-translate/packages"
    settings = tmp_path / ".config/argos-translate/settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"ARGOS_PACKAGES_DIR": str(tmp_path / "from-settings")}))
    assert packages_dir() == tmp_path / "from-settings"
    monkeypatch.setenv("ARGOS_PACKAGES_DIR", str(tmp_path / "from-env"))
    assert packages_dir() == tmp_path / "from-env"  # the environment first, as Argos


def test_a_packages_directory_given_as_a_package_is_explained(argos_packages, tmp_path):
    read_package(argos_packages["bpe"], tmp_path)
    with pytest.raises(UserError, match="a packages directory, which find_packages reads"):
        read_package(tmp_path)
