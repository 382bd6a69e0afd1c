"""The code cases.toml names: set-up steps, custom runs, checks of a result, long texts.

A step is ``fn(ws, d, **arguments)``; a run is ``fn(ws, d, **arguments) -> Result``; a check is
``fn(ws, d, result, **arguments) -> str | None`` (what is wrong, or None). Arguments come from
the case's table with its placeholders filled.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tests.audit.harness import Result, Workspace, digest, train_sets, unescape

STEPS: dict = {}
RUNS: dict = {}
CHECKS: dict = {}

TEXTS = {
    "long_line": "Das ist gut. " * 60 + "\\n",
    "long_sentence": "Das ist gut. " * 30,
    "latin1_lines": "Gr\\xfc\\xdfe aus K\\xf6ln. " * 100,
}


def step(fn):
    STEPS[fn.__name__] = fn
    return fn


def run(fn):
    RUNS[fn.__name__] = fn
    return fn


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


# --------------------------------------------------------------------------- set-up steps


@step
def copy(ws: Workspace, d: Path, src: str, dst: str) -> None:
    """Copy a file or a directory tree."""
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    if Path(src).is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copy(src, dst)


@step
def write(ws: Workspace, d: Path, path: str, content: str, gzipped: bool = False) -> None:
    """Write ``content`` (bytes escapes decoded) to ``path``, gzip-compressed if asked."""
    data = unescape(content)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(gzip.compress(data) if gzipped else data)


@step
def edit_json(ws: Workspace, d: Path, path: str, table: str = "", drop=(), values=None) -> None:
    """Drop keys from / set values in a JSON object (or its ``table``)."""
    data = json.loads(Path(path).read_text())
    target = data[table] if table else data
    for key in [drop] if isinstance(drop, str) else drop:
        target.pop(key)
    target.update(values or {})
    Path(path).write_text(json.dumps(data))


@step
def flip(ws: Workspace, d: Path, path: str, at: float = 0.5, n: int = 64) -> None:
    """Invert ``n`` bytes at fraction ``at`` of a file."""
    data = bytearray(Path(path).read_bytes())
    i = int(len(data) * at)
    data[i : i + n] = bytes(255 - b for b in data[i : i + n])
    Path(path).write_bytes(bytes(data))


@step
def truncate(ws: Workspace, d: Path, path: str, size: int) -> None:
    Path(path).write_bytes(Path(path).read_bytes()[:size])


@step
def remove(ws: Workspace, d: Path, path: str) -> None:
    p = Path(path)
    shutil.rmtree(p) if p.is_dir() else p.unlink()


@step
def make_dir(ws: Workspace, d: Path, path: str) -> None:
    """A directory where a file was."""
    if Path(path).exists():
        Path(path).unlink()
    Path(path).mkdir(parents=True)


# --------------------------------------------------------------------------- checks


def out_lines(result: Result) -> list[str]:
    return result.stdout.splitlines()


@check
def lines(ws: Workspace, d: Path, result: Result, n: int, nonempty: bool = False) -> str | None:
    """stdout has ``n`` lines (each with text, if asked)."""
    got = out_lines(result)
    if len(got) != n or (nonempty and not all(got)):
        return f"output {result.stdout[:300]!r}, wanted {n} lines"
    return None


@check
def lines_without_cr(ws: Workspace, d: Path, result: Result, n: int) -> str | None:
    if "\r" in result.stdout:
        return "carriage returns in the output"
    return lines(ws, d, result, n)


@check
def file_lines(ws: Workspace, d: Path, result: Result, path: str, n: int) -> str | None:
    got = len(Path(path).read_text().splitlines())
    return None if got == n else f"{path}: {got} lines, wanted {n}"


@check
def quiet_head(ws: Workspace, d: Path, result: Result) -> str | None:
    """A pipe into ``head`` closed early: output came, and nothing on stderr but the one-time
    note of engine auto's first conversion for CTranslate2 (what that case is not about)."""
    if not result.stdout.strip():
        return "no output"
    noise = [
        line
        for line in result.stderr.strip().splitlines()
        if not re.fullmatch(r"aiayn: converted \S+ for CTranslate2 \(\w+\) in .*", line)
    ]
    if noise:
        return f"stderr not quiet: {noise[-1][:100]}"
    return None


@check
def pairs(
    ws: Workspace, d: Path, result: Result, corpus: str, split: str, want, also_first: str = ""
) -> str | None:
    """The prepared split holds ``want`` (or starts with the source ``also_first``)."""
    want = [tuple(unescape(x).decode() for x in pair) for pair in want]
    try:
        src, tgt = (
            gzip.decompress((Path(corpus) / f"{split}.{lang}.gz").read_bytes())
            .decode()
            .split("\n")[:-1]
            for lang in ("de", "en")
        )
    except OSError as e:
        return f"unreadable output: {e}"
    if len(src) != len(tgt):
        return f"misaligned: {len(src)} vs {len(tgt)} lines"
    got = list(zip(src, tgt, strict=True))
    if got == want or (also_first and got and got[0][0] == also_first):
        return None
    return f"pairs {got!r}, wanted {want!r}"


@check
def same_bytes_twice(ws: Workspace, d: Path, result: Result, argv, first: str) -> str | None:
    """Running ``argv`` again (into another directory) writes the same model bytes."""
    done = ws.aiayn(argv)
    if done.returncode:
        return f"second save failed: {done.stderr[-300:]}"
    second = Path(argv[argv.index("--out") + 1])
    a, b = (Path(first) / "model.safetensors").read_bytes(), (second / "model.safetensors")
    return None if a == b.read_bytes() else "two saves of the same weights differ in bytes"


@check
def json_value(ws: Workspace, d: Path, result: Result, path: str, key: str, want) -> str | None:
    value = json.loads(Path(path).read_text())
    for part in key.split("."):
        value = value[part]
    return None if value == want else f"{path}: {key} is {value!r}, wanted {want!r}"


@check
def steps_logged_once(ws: Workspace, d: Path, result: Result, run: str, including: int):
    steps = logged_steps(Path(run))
    return None if steps == sorted(set(steps)) and including in steps else f"steps {steps}"


@check
def no_temp_left(ws: Workspace, d: Path, result: Result) -> str | None:
    left = [x for x in result.extra.get("listing", "").splitlines() if x.endswith(".tmp")]
    return f"temporary files left: {left}" if left else None


# --------------------------------------------------------------------------- runs


def wait_for(predicate, timeout: float = 120.0) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def logged_steps(run_dir: Path) -> list[int]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    steps = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "loss" in record:
            steps.append(record["step"])
    return steps


def checkpoint_steps(run_dir: Path) -> list[int]:
    return sorted(int(p.name[11:19]) for p in (run_dir / "checkpoints").glob("checkpoint-*.pt"))


def finish(proc: subprocess.Popen, timeout: float = 120) -> Result:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        err += b"\n[audit: killed after timeout]"
    return Result(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def translation_sets(ws: Workspace, **train) -> list[str]:
    return train_sets("translation", str(ws.part("corpus")), **train)


def train(ws: Workspace, run_dir: Path, **settings) -> Result:
    return ws.aiayn(["train", "--out", str(run_dir), "--quiet", *translation_sets(ws, **settings)])


def train_in_background(ws: Workspace, d: Path, **settings) -> tuple[Path, subprocess.Popen]:
    """A long training into ``d/run`` that a case interrupts."""
    run_dir = d / "run"
    long = dict(max_steps=100000, checkpoint_every=1000, log_every=2, max_minutes=5)
    argv = translation_sets(ws, **{**long, **settings})
    return run_dir, ws.start(["train", "--out", str(run_dir), "--quiet", *argv])


@run
def interrupt_translate(ws: Workspace, d: Path, model: str) -> Result:
    """SIGINT to a translation waiting for more input."""
    proc = ws.start(["translate", model, "--chunk", "1"], stdin=subprocess.PIPE)
    proc.stdin.write(b"Das ist gut.\n")
    proc.stdin.flush()
    first = proc.stdout.readline()  # translated: the command now waits for the next line
    proc.send_signal(signal.SIGINT)
    result = finish(proc)
    result.stdout = first.decode(errors="replace") + result.stdout
    return result


@run
def interrupt_training(ws: Workspace, d: Path, signal_name: str) -> Result:
    """A signal mid-training must save the last step (judged silent wrong when it does not)."""
    run_dir, proc = train_in_background(ws, d)
    if not wait_for(lambda: len(logged_steps(run_dir)) >= 3 or proc.poll() is not None):
        proc.kill()
    time.sleep(0.3)
    proc.send_signal(getattr(signal, signal_name))
    result = finish(proc)
    if result.returncode < 0:
        result.returncode = 0
        result.extra["problem"] = "killed by the signal, nothing saved"
        return result
    steps = logged_steps(run_dir)
    saved = checkpoint_steps(run_dir) if (run_dir / "checkpoints").exists() else []
    if result.returncode and (not saved or (steps and saved[-1] < steps[-1])):
        result.returncode = 0  # judged as silent wrong: nothing (or an older step) saved
        result.extra["problem"] = f"checkpoints {saved}, last logged step {steps[-1:]}"
    return result


@run
def interrupt_resume_identical(ws: Workspace, d: Path) -> Result:
    """Training interrupted by SIGINT and resumed ends with the weights of one straight run."""
    import torch

    settings = dict(max_steps=120, checkpoint_every=1000, log_every=2)  # room for the signal
    full = train(ws, d / "full", **settings)
    if full.returncode:
        return full
    run_dir = d / "split"
    proc = ws.start(["train", "--out", str(run_dir), "--quiet", *translation_sets(ws, **settings)])
    wait_for(lambda: len(logged_steps(run_dir)) >= 4 or proc.poll() is not None)
    proc.send_signal(signal.SIGINT)
    first = finish(proc)
    if first.returncode == 0:  # it finished before the signal: nothing was resumed
        return Result(1, "", first.stderr, {"problem": "training ended before the SIGINT"})
    resumed = train(ws, run_dir, **settings)
    if resumed.returncode:
        return Result(1, "", first.stderr + resumed.stderr)

    def last(r: Path) -> dict:
        path = sorted((r / "checkpoints").glob("*.pt"))[-1]
        return torch.load(path, weights_only=False)["model"]

    a, b = last(d / "full"), last(run_dir)
    same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    return Result(0, "", first.stderr, {"problem": None if same else "resumed weights differ"})


@run
def temp_files_cleaned(ws: Workspace, d: Path) -> Result:
    """Temporary files of a killed write are gone after the next training."""
    run_dir = d / "run"
    first = train(ws, run_dir, max_steps=5)
    if first.returncode:
        return first
    stale = [
        run_dir / "checkpoints/.checkpoint-00000010.pt.k1l2m3.tmp",
        run_dir / ".run.json.a1b2c3.tmp",
        run_dir / "model/.model.safetensors.x9y8.tmp",
    ]
    for p in stale:
        p.write_bytes(b"half")
    again = train(ws, run_dir, max_steps=7)
    left = [str(p) for p in stale if p.exists()]
    again.extra["problem"] = f"left: {left}" if left else None
    return again


@run
def replayed_steps_logged_once(ws: Workspace, d: Path) -> Result:
    """Killed after a checkpoint, then resumed: the replayed steps appear once in the log."""
    run_dir, proc = train_in_background(ws, d, checkpoint_every=6)
    wait_for(
        lambda: (
            (len(logged_steps(run_dir)) >= 5 and bool(checkpoint_steps(run_dir)))
            or proc.poll() is not None
        )
    )
    proc.kill()
    proc.communicate()
    again = train(ws, run_dir, max_steps=14, checkpoint_every=6)
    steps = logged_steps(run_dir)
    dupes = sorted({s for s in steps if steps.count(s) > 1})
    again.extra["problem"] = f"steps logged twice: {dupes}" if dupes else None
    return again


@run
def half_written_metrics(ws: Workspace, d: Path) -> Result:
    """A last metrics line cut short is dropped on resume, not kept unparsable."""
    run_dir = d / "run"
    first = train(ws, run_dir, max_steps=5)
    if first.returncode:
        return first
    with open(run_dir / "metrics.jsonl", "a") as f:
        f.write('{"step": 6, "epoch": 0, "lo')
    again = train(ws, run_dir, max_steps=8)
    bad = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        try:
            json.loads(line)
        except json.JSONDecodeError:
            bad.append(line)
    again.extra["problem"] = f"unparsable lines remain: {bad}" if bad else None
    return again


@run
def two_trainings(ws: Workspace, d: Path) -> Result:
    """A second training on a run directory in use is refused and changes nothing."""
    run_dir, first = train_in_background(ws, d)
    wait_for(lambda: len(logged_steps(run_dir)) >= 2 or first.poll() is not None)
    before = digest(run_dir / "run.json")
    second = train(ws, run_dir, max_steps=3, seed=7)
    changed = digest(run_dir / "run.json") != before
    first.send_signal(signal.SIGTERM)
    finish(first)
    if changed:
        second.extra["loss"] = "run.json rewritten by the second training"
    return second


@run
def stale_lock(ws: Workspace, d: Path) -> Result:
    """The lock of a killed training does not block the next one."""
    run_dir, first = train_in_background(ws, d)
    wait_for(lambda: len(logged_steps(run_dir)) >= 2 or first.poll() is not None)
    first.kill()
    first.communicate()
    return train(ws, run_dir, max_steps=3)
