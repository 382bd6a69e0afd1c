"""A directory written whole (import, export, quantize, average with --force) holds exactly the
new files, nothing of what it held before; a failure or a kill while writing leaves the old
directory as it was."""

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aiayn.errors import UserError
from aiayn.fileio import replace_directory


def model_dir(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def contents(path: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(path.iterdir())}


OLD = {"config.json": "{}", "vocab_map.json": "old", "tokenizer.json": "old", "run.json": "{}"}


def test_the_replaced_directory_holds_exactly_the_new_files(tmp_path):
    out = model_dir(tmp_path / "m", OLD)
    with replace_directory(out, force=True) as new:
        assert new.parent == tmp_path and not any(new.iterdir())
        (new / "config.json").write_text('{"new": 1}')
        (new / "tokenizer.model").write_text("new")
    assert contents(out) == {"config.json": '{"new": 1}', "tokenizer.model": "new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no temporary sibling left


def test_a_new_directory_is_created_whole(tmp_path):
    with replace_directory(tmp_path / "a" / "m") as new:
        (new / "config.json").write_text("{}")
    assert contents(tmp_path / "a" / "m") == {"config.json": "{}"}
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["m"]


def test_a_failure_midway_leaves_the_old_directory_intact(tmp_path):
    out = model_dir(tmp_path / "m", OLD)
    with pytest.raises(RuntimeError, match="disk on fire"):
        with replace_directory(out, force=True) as new:
            (new / "config.json").write_text("half")
            raise RuntimeError("disk on fire")
    assert contents(out) == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_what_is_not_replaced(tmp_path):
    out = model_dir(tmp_path / "m", OLD)
    with pytest.raises(UserError, match="exists and is not empty; choose another or add --force"):
        with replace_directory(out):
            pass
    notes = model_dir(tmp_path / "notes", {"todo.txt": "mine"})
    with pytest.raises(UserError, match=r"holds no model \(no config.json\)"):
        with replace_directory(notes, force=True):
            pass
    with pytest.raises(UserError, match="which is read to write it"):
        with replace_directory(tmp_path, force=True, keep=[out]):
            pass
    with pytest.raises(UserError, match="which is read to write it"):
        with replace_directory(out, force=True, keep=[out]):
            pass
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="is a file, not a directory"):
        with replace_directory(tmp_path / "file", force=True):
            pass
    assert contents(out) == OLD and contents(notes) == {"todo.txt": "mine"}


def test_a_kill_while_writing_leaves_the_old_directory_and_the_next_write_tidies_up(tmp_path):
    out = model_dir(tmp_path / "m", OLD)
    child = textwrap.dedent(
        f"""
        import sys, time
        from aiayn.fileio import replace_directory
        with replace_directory({str(out)!r}, force=True) as new:
            (new / "config.json").write_text("half")
            print("written", flush=True)
            time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "written"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    assert contents(out) == OLD
    assert len(list(tmp_path.iterdir())) == 2  # the unfinished sibling
    with replace_directory(out, force=True) as new:
        (new / "config.json").write_text("{}")
    assert contents(out) == {"config.json": "{}"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_a_kill_between_two_renames_puts_the_old_directory_back(tmp_path, monkeypatch):
    """Where the file system cannot swap two directories at once, the old one is renamed
    aside first; a kill right then leaves it there, and the next write restores it."""
    import aiayn.fileio as replace_dir

    out = model_dir(tmp_path / "m", OLD)
    monkeypatch.setattr(replace_dir, "_exchange", lambda a, b: False)
    renames = []

    def rename(a, b):
        renames.append((a, b))
        if len(renames) == 2:
            raise KeyboardInterrupt  # killed after the old directory moved aside
        os.replace(a, b)

    monkeypatch.setattr(replace_dir.os, "rename", rename)
    with pytest.raises(KeyboardInterrupt):
        with replace_directory(out, force=True) as new:
            (new / "config.json").write_text("new")
    monkeypatch.undo()
    assert not out.exists()
    with pytest.raises(UserError, match="exists and is not empty"):
        with replace_directory(out):  # the old model comes back before anything else
            pass
    assert contents(out) == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def read_only(monkeypatch, root: Path) -> None:
    """Make ``root`` act as a read-only file system: no directory can be made in it (os.mkdir
    is what Path.mkdir and tempfile.mkdtemp call)."""
    mkdir = os.mkdir

    def refused(path, *args, **kwargs):
        if Path(path) == root or root in Path(path).parents:
            raise OSError(errno.EROFS, "Read-only file system", os.fsdecode(path))
        return mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", refused)


def test_a_read_only_file_system_is_named_by_the_directory_asked_for(tmp_path, monkeypatch):
    out = model_dir(tmp_path / "m", OLD)
    read_only(monkeypatch, tmp_path)
    for target in (out, tmp_path / "new", tmp_path / "a" / "b" / "m"):  # replaced, new, deep
        with pytest.raises(UserError) as caught:
            with replace_directory(target, force=True):
                pytest.fail("nothing to write into")
        assert str(caught.value) == f"cannot write {target}: Read-only file system"
    monkeypatch.undo()
    assert contents(out) == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # nothing half-written


def test_a_write_that_fails_inside_is_named_under_the_directory_asked_for(tmp_path):
    from aiayn.fileio import atomic_write

    out = model_dir(tmp_path / "m", OLD)

    def full(path=None):
        args = () if path is None else (str(path),)  # no file named: a library's file object
        raise OSError(errno.ENOSPC, "No space left on device", *args)

    failures = [
        (lambda new: full(new / "model.safetensors"), out / "model.safetensors"),
        (lambda new: atomic_write(new / "run.json", full), out / "run.json"),
        (lambda new: full(), out),
    ]
    for write, named in failures:
        with pytest.raises(UserError) as caught:
            with replace_directory(out, force=True) as new:
                (new / "config.json").write_text("half")
                write(new)
        assert str(caught.value) == f"cannot write {named}: No space left on device"
    source = tmp_path / "absent" / "tokenizer.model"
    with pytest.raises(FileNotFoundError) as caught:  # a source that cannot be read is its own
        with replace_directory(out, force=True) as new:
            (new / "tokenizer.model").write_bytes(source.read_bytes())
    assert caught.value.filename == str(source)
    assert contents(out) == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
