"""Hostile and broken .argosmodel files: each refused with a message naming the file and the
problem, and nothing written (the destination as it was, no temporary folder left)."""

from __future__ import annotations

import io
import json
import stat
import tempfile
import warnings
import zipfile
from pathlib import Path

import pytest

from aiayn.errors import UserError
from aiayn.interop.archive import ArchiveLimits
from aiayn.interop.argos_package import read_package
from tests.documents.hostile import lying

TOP = "translate-de_en-1_0"
META = {"from_code": "de", "to_code": "en", "from_name": "German", "to_name": "English",
        "package_version": "1.0", "argos_version": "1.0", "type": "translate"}  # fmt: skip


def member(name: str, data: bytes | str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    return info, data.encode() if isinstance(data, str) else data


def package_members(metadata=META, top=TOP, **replace) -> list[tuple[zipfile.ZipInfo, bytes]]:
    """A small package's members (read_package reads neither model.bin nor the tokenizer's
    bytes); ``replace``: member name (after the folder) -> bytes, or None to leave it out."""
    files = {
        "metadata.json": json.dumps(metadata),
        "model/model.bin": b"\0" * 64,
        "model/config.json": "{}",
        "sentencepiece.model": b"\1" * 32,
        "README.md": "# a package\n",
    }
    files.update(replace)
    return [member(f"{top}/{name}", data) for name, data in files.items() if data is not None]


def zipped(members) -> bytes:
    out = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(out, "w") as z:
        warnings.simplefilter("ignore")  # a duplicate name is what one case is made of
        for info, data in members:
            z.writestr(info, data)
    return out.getvalue()


def symlink(name: str, target: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # Unix: the mode in external_attr is read
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target.encode()


def bomb(size: int) -> bytes:
    """A package whose model.bin inflates to ``size`` zero bytes but declares 100."""
    data = zipped(package_members(**{"model/model.bin": b"\0" * size}))
    return lying(data, f"{TOP}/model/model.bin", 100)


SMALL = ArchiveLimits(max_bytes=1_000_000, max_members=50)
CASES = [
    # (label, archive bytes, what the refusal says)
    ("not a zip", b"this is not a zip archive at all", "not a zip archive"),
    ("empty zip", zipped([]), "an empty zip archive"),
    ("climbs out", zipped([*package_members(), member(f"{TOP}/../../evil.txt", "x")]), "climbs out with '..'"),
    ("absolute", zipped([*package_members(), member("/tmp/evil.txt", "x")]), "an absolute path"),
    ("drive", zipped([*package_members(), member("C:/evil.txt", "x")]), "an absolute path"),
    ("backslash", zipped([*package_members(), member(f"{TOP}\\..\\evil.txt", "x")]), "a backslash"),
    ("symlink", zipped([*package_members(), symlink(f"{TOP}/model/link", "/etc/passwd")]), "a symbolic link"),
    ("two folders", zipped([*package_members(), *package_members(top="translate-en_de-1_0")]), "2 top folders"),
    ("file at the top", zipped([*package_members(), member("metadata.json", "{}")]), "outside the package's folder"),
    ("odd folder name", zipped(package_members(top="-rf")), "not a plain name"),
    ("duplicate", zipped([*package_members(), member(f"{TOP}/README.md", "again")]), "appears twice"),
    # zipfile stops a member at its declared size, then finds its checksum wrong
    ("lying bomb", bomb(3_000_000), "damaged or truncated (BadZipFile: Bad CRC-32"),
    ("honest bomb", zipped(package_members(**{"model/model.bin": b"\0" * 3_000_000})), "declare"),
    ("many members", zipped([*package_members(), *(member(f"{TOP}/x{i}", "") for i in range(60))]), "at most 50"),
    ("no metadata", zipped(package_members(**{"metadata.json": None})), "metadata.json: missing"),
    ("bad json", zipped(package_members(**{"metadata.json": "{'from_code': 'de'"})), "not valid JSON"),
    ("not an object", zipped(package_members(**{"metadata.json": "[1, 2]"})), "expected a JSON object"),
    ("not utf-8", zipped(package_members(**{"metadata.json": b"\xff\xfe{}"})), "not UTF-8"),
    ("code a number", zipped(package_members({**META, "from_code": 3})), "from_code 3 is not a language code"),
    ("missing to_code", zipped(package_members({k: v for k, v in META.items() if k != "to_code"})), "missing field 'to_code'"),
    ("name not text", zipped(package_members({**META, "to_name": ["English"]})), "to_name must be text"),
    ("sbd package", zipped(package_members({**META, "type": "sbd"})), "not a translation model"),
    ("no model", zipped(package_members(**{"model/model.bin": None, "model/config.json": None})), "model: missing"),
    ("no model.bin", zipped(package_members(**{"model/model.bin": None})), "model.bin: missing"),
    ("no tokenizer", zipped(package_members(**{"sentencepiece.model": None})), "unknown tokenizer"),
]  # fmt: skip


@pytest.fixture
def quiet_tmp(tmp_path, monkeypatch):
    """Temporary folders made under tmp_path/tmp, to see that none is left behind."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


@pytest.mark.parametrize("label, data, reason", CASES, ids=[c[0] for c in CASES])
def test_a_bad_archive_is_refused_naming_it_and_nothing_is_written(
    label, data, reason, tmp_path, quiet_tmp
):
    archive = tmp_path / "upload.argosmodel"
    archive.write_bytes(data)
    into = tmp_path / "packages"
    into.mkdir()
    (into / "installed").mkdir()  # what was there stays as it was
    with pytest.raises(UserError) as refused:
        read_package(archive, into, SMALL)
    message = str(refused.value)
    assert message.startswith(str(archive)) and reason in message, message
    assert [p.name for p in into.iterdir()] == ["installed"]
    assert not any((into / "installed").iterdir())
    with pytest.raises(UserError, match=reason.split(" ")[0]):
        read_package(archive, tmp_path / "new" / "packages", SMALL)  # a folder it would make
    assert not (tmp_path / "new").exists()
    with pytest.raises(UserError, match=reason.split(" ")[0]):
        read_package(archive, None, SMALL)  # into a temporary folder of its own
    assert not any(quiet_tmp.iterdir())


def test_the_cases_are_otherwise_readable(tmp_path):
    """The members the cases start from make a package read_package accepts."""
    archive = tmp_path / "ok.argosmodel"
    archive.write_bytes(zipped(package_members()))
    package = read_package(archive, tmp_path / "packages", SMALL)
    assert package.pair == ("de", "en") and package.tokenizer == "sentencepiece"
    assert package.path == tmp_path / "packages" / TOP
    archive.write_bytes(zipped(package_members(**{"model/model.bin": b"\0" * 900_000})))
    model = read_package(archive, tmp_path / "more", SMALL).model_dir / "model.bin"
    assert model.stat().st_size == 900_000  # within the limit


def test_a_damaged_member_is_refused(tmp_path):
    data = bytearray(zipped(package_members(**{"README.md": "x" * 5000})))
    name = f"{TOP}/README.md".encode()
    start = data.find(name) + len(name)  # its local header's name, then its bytes
    data[start + 5 : start + 15] = b"\xff" * 10  # corrupt the compressed bytes
    archive = tmp_path / "damaged.argosmodel"
    archive.write_bytes(bytes(data))
    with pytest.raises(UserError, match="damaged or truncated") as refused:
        read_package(archive, tmp_path / "out")
    assert "README.md" in str(refused.value) and not (tmp_path / "out").exists()


def test_a_missing_path_is_named(tmp_path):
    with pytest.raises(UserError, match="no such file or folder"):
        read_package(tmp_path / "nowhere.argosmodel")


def test_limits_are_checked():
    with pytest.raises(ValueError, match="max_bytes must be a positive integer"):
        ArchiveLimits(max_bytes=0)
    with pytest.raises(ValueError, match="max_members"):
        ArchiveLimits(max_members=True)


def test_an_installed_folder_with_bad_metadata_names_its_file(tmp_path):
    folder = tmp_path / TOP
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "model.bin").write_bytes(b"\0")
    (folder / "bpe.model").write_text("#version: 0.2\n")
    (folder / "metadata.json").write_text(json.dumps({**META, "from_code": "d e"}))
    with pytest.raises(UserError, match="is not a language code") as refused:
        read_package(folder)
    assert str(refused.value).startswith(str(folder / "metadata.json"))
    (folder / "metadata.json").write_text(json.dumps(META))
    assert read_package(folder).tokenizer == "bpe"
    assert Path(read_package(folder).tokenizer_model).name == "bpe.model"
