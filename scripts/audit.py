"""Replay bad input, interruption and concurrency cases against the command line; count outcomes.

    python scripts/audit.py [--src SRC_DIR] [--only CLASS] [--verbose] [--json OUT.json]

Every case runs ``python -m aiayn.cli`` in a subprocess (``--src`` puts another checkout's
``src`` first on PYTHONPATH, to audit an older version with the same cases) and is judged:

* ``traceback``: a Python traceback on stderr, or the process died from a signal it was not sent;
* ``silent wrong``: exit 0 where the input is bad, or a wrong result with exit 0;
* ``unclear``: a non-zero exit whose message lacks what it must name (file, line, flag, cause);
* ``data loss``: a file the case protects was changed or removed;
* ``failed``: valid input that did not give its result (a regression);
* ``ok``.

The cases are grouped by class (1 model directories ... 9 disk and permissions). Read-only and
full-disk cases mount a small tmpfs in a private mount namespace (``unshare -m``); they are
skipped where that is not allowed. Takes a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def default_signals() -> None:
    """In the child: SIGINT as in a terminal (a background shell job inherits it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Case:
    cls: int
    name: str
    argv: list[str] | None = None  # aiayn arguments (None: ``run`` does the work)
    stdin: bytes = b""
    expect: str = "fail"  # fail | ok | warn
    says: tuple[str, ...] = ()  # regexes the message (stderr) must match
    check: object = None  # (proc) -> str | None: what is wrong with a result
    setup: object = None  # (case_dir) -> None
    run: object = None  # (case_dir, env) -> proc-like with returncode, stdout, stderr
    protect: tuple[str, ...] = ()  # paths (relative to the workspace) that must not change
    shell: str | None = None  # a shell command line instead of argv ({aiayn} expands)
    needs_mount: bool = False


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    extra: dict = field(default_factory=dict)


CASES: list[Case] = []


def case(*args, **kwargs) -> None:
    CASES.append(Case(*args, **kwargs))


# --------------------------------------------------------------------------- workspace


def gz(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))


def lines_of(path: Path, n: int) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()[:n]


def tiny_translation_sets(corpus: Path, **train) -> list[str]:
    settings = {
        "model.preset": '"tiny"',
        "model.max_len": "64",
        "data.corpus": f'"{corpus}"',
        "data.vocab_size": "400",
        "data.max_len": "48",
        "train.max_tokens": "400",
        "train.warmup": "20",
        "train.lr_scale": "2.0",
        "train.log_every": "2",
        "train.checkpoint_every": "5",
        "train.threads": "1",
        **{f"train.{k}": str(v) for k, v in train.items()},
    }
    return [x for k, v in settings.items() for x in ("--set", f"{k}={v}")]


def lm_sets(corpus: Path, **train) -> list[str]:
    settings = {
        "model.preset": '"tiny"',
        "model.n_encoder_layers": "0",
        "model.max_len": "64",
        "data.task": '"lm"',
        "data.tokenizer": '"char"',
        "data.corpus": f'"{corpus}"',
        "data.block_size": "32",
        "train.max_tokens": "256",
        "train.warmup": "10",
        "train.log_every": "2",
        "train.checkpoint_every": "5",
        "train.threads": "1",
        **{f"train.{k}": str(v) for k, v in train.items()},
    }
    return [x for k, v in settings.items() for x in ("--set", f"{k}={v}")]


def cls_sets(corpus: Path, **train) -> list[str]:
    settings = {
        "model.preset": '"tiny"',
        "model.n_decoder_layers": "0",
        "model.max_len": "64",
        "data.task": '"classification"',
        "data.corpus": f'"{corpus}"',
        "data.vocab_size": "500",
        "data.max_len": "32",
        "train.max_tokens": "400",
        "train.warmup": "10",
        "train.log_every": "2",
        "train.checkpoint_every": "5",
        "train.threads": "1",
        **{f"train.{k}": str(v) for k, v in train.items()},
    }
    return [x for k, v in settings.items() for x in ("--set", f"{k}={v}")]


class Workspace:
    def __init__(self, root: Path, env: dict) -> None:
        self.root, self.env = root, env

    def aiayn(self, argv, stdin=b"", timeout=300, cwd=None, preexec=None) -> Result:
        done = subprocess.run(
            [PY, "-m", "aiayn.cli", *argv],
            input=stdin,
            capture_output=True,
            env=self.env,
            timeout=timeout,
            cwd=cwd or ROOT,
            preexec_fn=preexec or default_signals,
        )
        return Result(
            done.returncode,
            done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"),
        )

    def build(self) -> None:
        r = self.root
        corpus = r / "corpus"
        src = ROOT / "data" / "ding-de-en"
        for split, n in (("train", 400), ("valid", 40), ("test", 40)):
            for lang in ("de", "en"):
                gz(
                    corpus / f"{split}.{lang}.gz",
                    "\n".join(lines_of(src / f"{split}.{lang}.gz", n)) + "\n",
                )
        text = gzip.decompress((ROOT / "data/moby-dick/train.txt.gz").read_bytes()).decode()
        gz(r / "text" / "train.txt.gz", text[:20000])
        gz(r / "text" / "valid.txt.gz", text[20000:24000])
        labelled = ROOT / "data" / "rotten-tomatoes"
        gz(
            r / "labelled" / "train.tsv.gz",
            "\n".join(lines_of(labelled / "train.tsv.gz", 300)) + "\n",
        )
        gz(
            r / "labelled" / "valid.tsv.gz",
            "\n".join(lines_of(labelled / "valid.tsv.gz", 60)) + "\n",
        )
        gz(r / "labelled" / "test.tsv.gz", "\n".join(lines_of(labelled / "test.tsv.gz", 60)) + "\n")
        for name, argv in (
            ("tr", tiny_translation_sets(corpus, max_steps=8)),
            ("lm", lm_sets(r / "text", max_steps=6)),
            ("cls", cls_sets(r / "labelled", max_steps=6)),
        ):
            done = self.aiayn(["train", "--out", str(r / name), "--quiet", *argv])
            if done.returncode:
                raise SystemExit(f"workspace: training {name} failed:\n{done.stderr[-3000:]}")
        shutil.copytree(ROOT / "models" / "ding-de-en", r / "ding")
        (r / "files").mkdir()


def digest(path: Path) -> str | None:
    if not path.exists():
        return None
    if path.is_dir():
        h = hashlib.sha256()
        for p in sorted(path.rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(path)).encode() + p.read_bytes())
        return h.hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- helpers for cases


def copy_model(ws: Workspace, src: str, dst: Path) -> Path:
    shutil.copytree(ws.root / src, dst)
    return dst


def edit_config(directory: Path, edit) -> None:
    path = directory / "config.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def mounted(
    ws: Workspace,
    mount_dir: Path,
    size_kb: int,
    readonly: bool,
    argv: list[str],
    fill=None,
    stdin=b"",
) -> Result:
    """Run aiayn with ``mount_dir`` a fresh tmpfs of ``size_kb`` (read-only if asked)."""
    mount_dir.mkdir(parents=True, exist_ok=True)
    steps = [f"mount -t tmpfs -o size={size_kb}k none {mount_dir}"]
    if fill:
        steps.append(fill)
    if readonly:
        steps.append(f"mount -o remount,ro {mount_dir}")
    quoted = " ".join(shlex_quote(a) for a in [PY, "-m", "aiayn.cli", *argv])
    steps.append(f"{quoted}; rc=$?; ls -A -R {mount_dir} > {mount_dir}.listing 2>&1; exit $rc")
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", " && ".join(steps[:-1]) + " && " + steps[-1]],
        input=stdin,
        capture_output=True,
        env=ws.env,
        timeout=300,
        cwd=ROOT,
        preexec_fn=default_signals,
    )
    listing = Path(f"{mount_dir}.listing")
    extra = {"listing": listing.read_text() if listing.exists() else ""}
    return Result(
        done.returncode,
        done.stdout.decode(errors="replace"),
        done.stderr.decode(errors="replace"),
        extra,
    )


def shlex_quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def no_temp_left(listing: str) -> str | None:
    left = [line for line in listing.splitlines() if line.endswith(".tmp")]
    return f"temporary files left: {left}" if left else None


def wait_for(predicate, timeout: float = 120.0) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def logged_steps(run: Path) -> list[int]:
    path = run / "metrics.jsonl"
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


def checkpoint_steps(run: Path) -> list[int]:
    return sorted(int(p.name[11:19]) for p in (run / "checkpoints").glob("checkpoint-*.pt"))


def start_training(ws: Workspace, run: Path, argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [PY, "-m", "aiayn.cli", "train", "--out", str(run), "--quiet", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ws.env,
        cwd=ROOT,
        preexec_fn=default_signals,
    )


def finish(proc: subprocess.Popen, timeout: float = 120) -> Result:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        err += b"\n[audit: killed after timeout]"
    return Result(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


# --------------------------------------------------------------------------- class 1: model dirs


def _drop_key(key):
    return lambda d: copy_model_setup(
        d, "ding", lambda m: edit_config(m, lambda c: c["model"].pop(key))
    )


def copy_model_setup(d: Path, src: str, then=None):
    m = copy_model(WS, src, d / "m")
    if then:
        then(m)


def define_cases() -> None:
    de = b"Das ist gut.\nIch habe heute keine Zeit.\n"
    for key in (
        "n_heads",
        "d_model",
        "norm_first",
        "tie_embeddings",
        "pos_encoding",
        "activation",
        "family",
    ):
        case(
            1,
            f"config.json without {key}",
            ["translate", "{d}/m"],
            de,
            says=(key, "config.json"),
            setup=_drop_key(key),
        )
    case(
        1,
        "config.json is null",
        ["translate", "{d}/m"],
        de,
        says=("config.json",),
        setup=lambda d: copy_model_setup(
            d, "ding", lambda m: (m / "config.json").write_text("null")
        ),
    )
    case(
        1,
        "config.json model table is a list",
        ["translate", "{d}/m"],
        de,
        says=("config.json", "model"),
        setup=lambda d: copy_model_setup(
            d, "ding", lambda m: (m / "config.json").write_text('{"model": []}')
        ),
    )
    case(
        1,
        "config.json n_heads is a string",
        ["translate", "{d}/m"],
        de,
        says=("config.json", "n_heads"),
        setup=lambda d: copy_model_setup(
            d, "ding", lambda m: edit_config(m, lambda c: c["model"].update(n_heads="4"))
        ),
    )
    case(
        1,
        "config.json changed n_heads (same shapes)",
        ["translate", "{d}/m"],
        de,
        says=("n_heads",),
        setup=lambda d: copy_model_setup(
            d, "ding", lambda m: edit_config(m, lambda c: c["model"].update(n_heads=8))
        ),
    )
    case(
        1,
        "config.json not UTF-8",
        ["translate", "{d}/m"],
        de,
        says=("config.json",),
        setup=lambda d: copy_model_setup(
            d, "ding", lambda m: (m / "config.json").write_bytes(b"\xff\xfe{}")
        ),
    )
    case(
        1,
        "tokenizer of another vocabulary size",
        ["translate", "{d}/m"],
        de,
        says=("tokenizer", "4000|400"),
        setup=lambda d: copy_model_setup(
            d,
            "ding",
            lambda m: shutil.copy(WS.root / "tr/model/tokenizer.model", m / "tokenizer.model"),
        ),
    )
    case(
        1,
        "stray character tokenizer beside the BPE one",
        ["translate", "{d}/m"],
        de,
        says=("tokenizer",),
        setup=lambda d: copy_model_setup(
            d,
            "ding",
            lambda m: shutil.copy(WS.root / "lm/model/tokenizer.json", m / "tokenizer.json"),
        ),
    )
    case(
        1,
        "tokenizer.model is garbage",
        ["translate", "{d}/m"],
        de,
        says=("tokenizer.model",),
        setup=lambda d: copy_model_setup(
            d, "ding", lambda m: (m / "tokenizer.model").write_bytes(b"garbage" * 10)
        ),
    )
    case(
        1,
        "tokenizer.json is garbage (char model)",
        ["generate", "{d}/m", "--prompt", "a", "--max-new-tokens", "3"],
        says=("tokenizer.json",),
        setup=lambda d: copy_model_setup(
            d, "lm/model", lambda m: (m / "tokenizer.json").write_text('{"chars": 5}')
        ),
    )
    case(
        1,
        "tokenizer.json chars is a list of numbers",
        ["generate", "{d}/m", "--prompt", "a", "--max-new-tokens", "3"],
        says=("tokenizer.json",),
        setup=lambda d: copy_model_setup(
            d, "lm/model", lambda m: (m / "tokenizer.json").write_text('{"chars": [1, 2]}')
        ),
    )

    def flip(m: Path, at: float = 0.5, n: int = 64):
        p = m / "model.safetensors"
        data = bytearray(p.read_bytes())
        i = int(len(data) * at)
        data[i : i + n] = bytes(255 - b for b in data[i : i + n])
        p.write_bytes(bytes(data))

    case(
        1,
        "corrupted bytes inside the weights",
        ["translate", "{d}/m"],
        de,
        says=("model.safetensors",),
        setup=lambda d: copy_model_setup(d, "ding", flip),
    )
    case(
        1,
        "corrupted bytes inside the weights (evaluate)",
        ["evaluate", "{d}/m", "--limit", "5"],
        says=("model.safetensors",),
        setup=lambda d: copy_model_setup(d, "ding", lambda m: flip(m, 0.9)),
    )
    case(
        1,
        "truncated weights",
        ["translate", "{d}/m"],
        de,
        says=("model.safetensors",),
        setup=lambda d: copy_model_setup(
            d,
            "ding",
            lambda m: (m / "model.safetensors").write_bytes(
                (m / "model.safetensors").read_bytes()[:100000]
            ),
        ),
    )
    case(
        1,
        "weights of another model",
        ["translate", "{d}/m"],
        de,
        says=("model.safetensors",),
        setup=lambda d: copy_model_setup(
            d,
            "ding",
            lambda m: shutil.copy(WS.root / "tr/model/model.safetensors", m / "model.safetensors"),
        ),
    )
    case(
        1,
        "a checkpoint file given as the model directory",
        ["translate", "{ws}/tr/checkpoints/checkpoint-00000005.pt"],
        de,
        says=("checkpoint-00000005.pt",),
    )
    case(1, "model directory does not exist", ["translate", "{d}/nope"], de, says=("nope",))
    case(
        1,
        "weights file is a directory",
        ["translate", "{d}/m"],
        de,
        says=("model.safetensors",),
        setup=lambda d: copy_model_setup(
            d,
            "ding",
            lambda m: ((m / "model.safetensors").unlink(), (m / "model.safetensors").mkdir()),
        ),
    )
    case(
        1,
        "run.json not JSON (evaluate)",
        ["evaluate", "{d}/m", "--limit", "5"],
        says=("run.json",),
        setup=lambda d: copy_model_setup(
            d, "tr/model", lambda m: (m / "run.json").write_text("{oops")
        ),
    )
    case(
        1,
        "run.json not JSON (generate)",
        ["generate", "{d}/m", "--max-new-tokens", "3"],
        says=("run.json",),
        setup=lambda d: copy_model_setup(
            d, "lm/model", lambda m: (m / "run.json").write_text("[1,")
        ),
    )
    case(
        1,
        "classifier labels do not fit its head",
        ["classify", "{d}/m"],
        b"good film\n",
        says=("labels",),
        setup=lambda d: copy_model_setup(
            d,
            "cls/model",
            lambda m: (m / "run.json").write_text(
                json.dumps({**json.loads((m / "run.json").read_text()), "labels": ["a"]})
            ),
        ),
    )
    case(
        1,
        "checkpoint of another model averaged",
        ["average", "{d}/run", "--last", "2", "--out", "{d}/avg"],
        says=("checkpoint",),
        setup=lambda d: (
            shutil.copytree(WS.root / "tr", d / "run"),
            shutil.copy(
                WS.root / "lm/checkpoints/checkpoint-00000006.pt",
                d / "run/checkpoints/checkpoint-00000099.pt",
            ),
        ),
    )
    case(
        1,
        "identical weights saved twice give identical bytes",
        ["average", "{ws}/tr", "--last", "1", "--out", "{d}/a"],
        expect="ok",
        check=lambda p, d: same_bytes_twice(d),
    )
    case(
        1,
        "shipped model still translates",
        ["translate", "{ws}/ding"],
        de,
        expect="ok",
        check=lambda p, d: (
            None
            if len(p.stdout.splitlines()) == 2 and all(p.stdout.splitlines())
            else f"output {p.stdout!r}"
        ),
    )

    # ----------------------------------------------------------------- class 2: wrong family
    for cmd, model, extra, stdin in (
        ("translate", "lm/model", [], de),
        ("translate", "cls/model", [], de),
        ("evaluate", "cls/model", ["--limit", "3"], b""),
        ("evaluate", "lm/model", ["--limit", "3"], b""),
        ("attention", "lm/model", ["Hallo.", "--out", "{d}/a.png"], b""),
        ("attention", "cls/model", ["Hallo.", "--out", "{d}/a.png"], b""),
        ("generate", "tr/model", ["--max-new-tokens", "3"], b""),
        ("classify", "tr/model", [], b"good\n"),
        ("classify", "lm/model", [], b"good\n"),
    ):
        fits = {"lm/model": "generate", "cls/model": "classify", "tr/model": "translate"}[model]
        family = {
            "lm/model": "decoder-only",
            "cls/model": "encoder-only",
            "tr/model": "encoder-decoder",
        }[model]
        case(
            2,
            f"{cmd} with a {family} model",
            [cmd, "{ws}/" + model, *extra],
            stdin,
            says=(family, fits),
        )

    # ----------------------------------------------------------------- class 3: flags
    tr = "{ws}/tr/model"
    for flags in (
        ["--nbest", "0"],
        ["--nbest", "-1"],
        ["--chunk", "0"],
        ["--chunk", "-3"],
        ["--lenpen", "nan"],
        ["--lenpen", "inf"],
        ["--lenpen", "-1"],
        ["--max-len-offset", "-5"],
        ["--beam", "0"],
        ["--beam", "nan"],
        ["--beam", "4", "--nbest", "5"],
    ):
        flag = next(f for f in reversed(flags) if f.startswith("--"))
        case(
            3,
            "translate " + " ".join(flags),
            ["translate", tr, *flags],
            de,
            says=(re.escape(flag),),
        )
    for flags in (
        ["--max-new-tokens", "-5"],
        ["--temperature", "nan"],
        ["--temperature", "-1"],
        ["--top-p", "0"],
        ["--top-p", "1.5"],
        ["--top-p", "nan"],
        ["--top-k", "-2"],
        ["--seed", "-1"],
    ):
        case(
            3,
            "generate " + " ".join(flags),
            ["generate", "{ws}/lm/model", *flags],
            says=(re.escape(flags[0]),),
        )
    for flags in (
        ["--limit", "-1"],
        ["--samples", "-2"],
        ["--lenpen", "nan"],
        ["--split", "nosuchsplit"],
    ):
        case(
            3,
            "evaluate " + " ".join(flags),
            ["evaluate", tr, *flags],
            says=(re.escape(flags[0]) if flags[0] != "--split" else "nosuchsplit",),
        )
    case(
        3,
        "average --last 0",
        ["average", "{ws}/tr", "--last", "0", "--out", "{d}/a"],
        says=("--last",),
    )
    case(
        3,
        "train --set train.lr_scale=nan",
        ["train", "--out", "{d}/r", "--set", "train.lr_scale=nan"],
        says=("lr_scale",),
    )
    case(
        3,
        "train --set train.max_minutes=inf",
        ["train", "--out", "{d}/r", "--set", "train.max_minutes=inf"],
        says=("max_minutes",),
    )

    # ----------------------------------------------------------------- class 4: text in
    case(
        4,
        "non-UTF-8 stdin (translate)",
        ["translate", tr],
        b"Das ist gut.\nGr\xfc\xdfe aus K\xf6ln.\n",
        says=("line 2", "--errors"),
    )
    case(
        4,
        "non-UTF-8 stdin replaced on request",
        ["translate", tr, "--errors", "replace"],
        b"Das ist gut.\nGr\xfc\xdfe.\n",
        expect="ok",
        check=lambda p, d: (
            None if len(p.stdout.splitlines()) == 2 else f"{len(p.stdout.splitlines())} lines out"
        ),
    )
    case(
        4,
        "non-UTF-8 stdin (classify)",
        ["classify", "{ws}/cls/model"],
        b"good\n\xff bad\n",
        says=("line 2",),
    )
    case(
        4,
        "non-UTF-8 prompt (generate)",
        ["generate", "{ws}/lm/model", "--prompt", os.fsdecode(b"\xffab"), "--max-new-tokens", "3"],
        says=("--prompt",),
    )
    case(
        4,
        "overlong line (translate)",
        ["translate", tr],
        ("Das ist gut. " * 60 + "\n").encode(),
        expect="warn",
        says=("line 1", "max_len|long"),
    )
    case(
        4,
        "characters missing from the vocabulary (generate)",
        ["generate", "{ws}/lm/model", "--prompt", "Ahab ☃☃ ✈", "--max-new-tokens", "3"],
        expect="warn",
        says=("☃|vocabular",),
    )
    case(
        4,
        "CRLF line endings (translate)",
        ["translate", tr],
        b"Das ist gut.\r\nIch komme.\r\n",
        expect="ok",
        check=lambda p, d: (
            None
            if "\r" not in p.stdout and len(p.stdout.splitlines()) == 2
            else "carriage returns in the output"
        ),
    )
    case(
        4,
        "translate | head -1",
        shell="printf 'Das ist gut.\\nJa.\\nNein.\\n%.0s' $(seq 400) | {aiayn} translate {ws}/tr/model --chunk 10 | head -1",
        expect="ok",
        check=quiet_head,
    )
    case(
        4,
        "classify | head -1",
        shell="yes 'good movie' | head -5000 | {aiayn} classify {ws}/cls/model | head -1",
        expect="ok",
        check=quiet_head,
    )
    case(4, "empty stdin (translate)", ["translate", tr], b"", expect="ok")
    case(
        4,
        "NUL bytes in stdin (translate)",
        ["translate", tr],
        b"Das\x00ist gut.\n",
        expect="ok",
        check=lambda p, d: None if len(p.stdout.splitlines()) == 1 else "wrong line count",
    )
    case(
        4,
        "only blank lines (classify)",
        ["classify", "{ws}/cls/model"],
        b"\n\n",
        says=("text 1 is empty", "nothing to classify"),
    )
    case(4, "Ctrl-C while translating", run=interrupt_translate, says=("interrupt",))

    # ----------------------------------------------------------------- class 5: interruption
    case(
        5,
        "Ctrl-C during training saves and says how to resume",
        run=lambda d: interrupt_training(d, signal.SIGINT),
        says=("resume", "aiayn train"),
    )
    case(
        5,
        "SIGTERM during training saves and says how to resume",
        run=lambda d: interrupt_training(d, signal.SIGTERM),
        says=("resume", "aiayn train"),
    )
    case(5, "temp files of a killed write are cleaned", run=temp_files_cleaned, expect="ok")
    case(
        5,
        "steps replayed after a resume are logged once",
        run=replayed_steps_logged_once,
        expect="ok",
    )
    case(5, "half-written last metrics line", run=half_written_metrics, expect="ok")
    case(5, "resume after SIGINT is bit-identical", run=interrupt_resume_identical, expect="ok")

    # ----------------------------------------------------------------- class 6: concurrency
    case(
        6,
        "two trainings on one run directory",
        run=two_trainings,
        says=("lock|already", "pid|process"),
    )
    case(6, "a stale lock of a killed training is taken over", run=stale_lock, expect="ok")

    # ----------------------------------------------------------------- class 7: changed settings on resume
    case(
        7,
        "tokenizer of another vocabulary size in the run dir",
        run=swapped_run_tokenizer,
        says=("tokenizer", "vocab"),
    )
    case(
        7,
        "data.vocab_size changed before the first checkpoint",
        run=vocab_changed_before_checkpoint,
        expect="ok",
    )
    case(
        7,
        "model.family changed",
        run=lambda d: changed_setting(d, ['model.family="decoder-only"']),
        says=("family",),
    )
    case(
        7,
        "model.d_ff changed with run.json gone",
        run=lambda d: changed_setting(d, ["model.d_ff=48"], drop_run_json=True),
        says=("d_ff",),
    )
    case(
        7,
        "checkpoint of another model in the run dir",
        run=foreign_checkpoint,
        says=("checkpoint",),
    )
    case(
        7,
        "train.init_from with another vocabulary",
        [
            "train",
            "--out",
            "{d}/r",
            "--quiet",
            *cls_sets("{ws}/labelled", max_steps=2),
            "--set",
            'train.init_from="{ws}/tr/model"',
        ],
        says=("init_from",),
    )

    # ----------------------------------------------------------------- class 8: preparing data
    def files_split(d: Path, name: str, src: bytes, tgt: bytes, gzipped: bool = False):
        d.mkdir(parents=True, exist_ok=True)
        suffix = ".gz" if gzipped else ""
        (d / f"{name}.de{suffix}").write_bytes(gzip.compress(src) if gzipped else src)
        (d / f"{name}.en{suffix}").write_bytes(gzip.compress(tgt) if gzipped else tgt)

    def spec(d, name, gzipped=False):
        s = ".gz" if gzipped else ""
        return f"{name}={d}/{name}.de{s},{d}/{name}.en{s}"

    case(
        8,
        "prepare files over an existing corpus",
        ["prepare", "files", "--out", "{d}/corpus", "--split", "train={d}/a.de,{d}/a.en"],
        says=("--force",),
        protect=("{d}/corpus",),
        setup=lambda d: (
            shutil.copytree(WS.root / "corpus", d / "corpus"),
            files_split(d, "a", b"Ja.\n", b"Yes.\n"),
        ),
    )
    case(
        8,
        "prepare files --force over an existing corpus",
        [
            "prepare",
            "files",
            "--force",
            "--out",
            "{d}/corpus",
            "--split",
            "train={d}/a.de,{d}/a.en",
        ],
        expect="ok",
        setup=lambda d: (
            shutil.copytree(WS.root / "corpus", d / "corpus"),
            files_split(d, "a", b"Ja.\n", b"Yes.\n"),
        ),
    )
    case(
        8,
        "lone CR inside a line",
        ["prepare", "files", "--out", "{d}/c", "--split", "train={d}/a.de,{d}/a.en"],
        expect="ok",
        setup=lambda d: files_split(d, "a", b"Eins\rzwei.\nDrei.\n", b"One two.\nThree.\n"),
        check=lambda p, d: check_pairs(
            d / "c", "train", [("Eins\rzwei.", "One two."), ("Drei.", "Three.")], "Eins zwei."
        ),
    )
    case(
        8,
        "lone CRs in both files (misalignment)",
        ["prepare", "files", "--out", "{d}/c", "--split", "train={d}/a.de,{d}/a.en"],
        expect="ok",
        setup=lambda d: files_split(
            d, "a", b"Eins\rzwei.\nDrei.\nVier.\n", b"One two.\nThree.\nFo\rur.\n"
        ),
        check=lambda p, d: check_pairs(
            d / "c",
            "train",
            [("Eins\rzwei.", "One two."), ("Drei.", "Three."), ("Vier.", "Fo\rur.")],
            "Eins zwei.",
        ),
    )
    case(
        8,
        "BOM at the start of a file",
        ["prepare", "files", "--out", "{d}/c", "--split", "train={d}/a.de,{d}/a.en"],
        expect="ok",
        setup=lambda d: files_split(d, "a", "\ufeffJa.\n".encode(), b"Yes.\n"),
        check=lambda p, d: check_pairs(d / "c", "train", [("Ja.", "Yes.")]),
    )
    case(
        8,
        "an empty split",
        ["prepare", "files", "--out", "{d}/c", "--split", "train={d}/a.de,{d}/a.en"],
        says=("train", "empty|no pairs"),
        setup=lambda d: files_split(d, "a", b"\n", b"\n"),
    )
    case(
        8,
        "the same split given twice",
        [
            "prepare",
            "files",
            "--out",
            "{d}/c",
            "--split",
            "train={d}/a.de,{d}/a.en",
            "--split",
            "train={d}/a.de,{d}/a.en",
        ],
        says=("train", "twice|more than once|again"),
        setup=lambda d: files_split(d, "a", b"Ja.\n", b"Yes.\n"),
    )
    case(
        8,
        "a Latin-1 file",
        ["prepare", "files", "--out", "{d}/c", "--split", "train={d}/a.de,{d}/a.en"],
        says=("a.de", "UTF-8"),
        setup=lambda d: files_split(d, "a", "Grüße.\n".encode("latin-1"), b"Greetings.\n"),
    )
    case(
        8,
        "a corrupt .gz",
        ["prepare", "files", "--out", "{d}/c", "--split", "train={d}/a.de.gz,{d}/a.en.gz"],
        says=("a.de.gz",),
        setup=lambda d: (
            files_split(d, "a", b"Ja.\n", b"Yes.\n", True),
            (d / "a.de.gz").write_bytes(b"\x1f\x8b\x08\x00garbage"),
        ),
    )
    case(
        8,
        "a Latin-1 TSV",
        ["prepare", "files", "--out", "{d}/c", "--split", "train={d}/a.tsv"],
        says=("a.tsv", "UTF-8"),
        setup=lambda d: (
            d.mkdir(parents=True, exist_ok=True),
            (d / "a.tsv").write_bytes("Grüße.\tHi.\n".encode("latin-1")),
        ),
    )
    case(
        8,
        "data.max_len drops every pair",
        [
            "train",
            "--out",
            "{d}/r",
            "--quiet",
            *tiny_translation_sets("{ws}/corpus", max_steps=3),
            "--set",
            "data.max_len=2",
        ],
        says=("max_len",),
    )
    case(
        8,
        "corrupt corpus .gz at training",
        ["train", "--out", "{d}/r", "--quiet", *tiny_translation_sets("{d}/c", max_steps=3)],
        says=("train.de.gz",),
        setup=lambda d: (
            shutil.copytree(WS.root / "corpus", d / "c"),
            (d / "c/train.de.gz").write_bytes(b"\x1f\x8b\x08\x00xx"),
        ),
    )
    case(
        8,
        "Latin-1 LM text at training",
        ["train", "--out", "{d}/r", "--quiet", *lm_sets("{d}/t", max_steps=3)],
        says=("train.txt.gz",),
        setup=lambda d: (
            shutil.copytree(WS.root / "text", d / "t"),
            (d / "t/train.txt.gz").write_bytes(
                gzip.compress("Grüße aus Köln. ".encode("latin-1") * 100)
            ),
        ),
    )

    # ----------------------------------------------------------------- more cases, each class
    tr_sets = lambda **k: tiny_translation_sets("{ws}/corpus", **k)  # noqa: E731
    case(
        1,
        "model.safetensors missing",
        ["translate", "{d}/m"],
        de,
        says=("model.safetensors",),
        setup=lambda d: copy_model_setup(
            d, "tr/model", lambda m: (m / "model.safetensors").unlink()
        ),
    )
    case(
        1,
        "tokenizer.model missing",
        ["translate", "{d}/m"],
        de,
        says=("tokenizer.model",),
        setup=lambda d: copy_model_setup(d, "tr/model", lambda m: (m / "tokenizer.model").unlink()),
    )
    case(
        1,
        "config.json unknown field",
        ["translate", "{d}/m"],
        de,
        says=("config.json", "heads_count"),
        setup=lambda d: copy_model_setup(
            d, "tr/model", lambda m: edit_config(m, lambda c: c["model"].update(heads_count=2))
        ),
    )
    case(
        1,
        "config.json vocab_size changed",
        ["translate", "{d}/m"],
        de,
        says=("vocab_size",),
        setup=lambda d: copy_model_setup(
            d, "tr/model", lambda m: edit_config(m, lambda c: c["model"].update(vocab_size=999))
        ),
    )
    case(
        1,
        "classifier run.json without labels",
        ["classify", "{d}/m"],
        b"good\n",
        says=("run.json", "labels"),
        setup=lambda d: copy_model_setup(
            d, "cls/model", lambda m: (m / "run.json").write_text("{}")
        ),
    )
    case(
        1,
        "last checkpoint damaged",
        ["train", "--out", "{d}/run", "--quiet", *tr_sets(max_steps=12)],
        says=("checkpoint-00000008.pt", "checkpoint-00000005.pt"),
        setup=lambda d: (
            shutil.copytree(WS.root / "tr", d / "run"),
            (d / "run/checkpoints/checkpoint-00000008.pt").write_bytes(b"PK\x03\x04 damaged"),
        ),
    )
    case(
        2,
        "average a model directory",
        ["average", "{ws}/tr/model", "--out", "{d}/a"],
        says=("checkpoints",),
    )
    case(
        2,
        "train --out a model directory",
        ["train", "--out", "{d}/m", "--quiet", *tr_sets(max_steps=2)],
        says=("model directory", "init_from"),
        protect=("{d}/m",),
        setup=lambda d: copy_model_setup(d, "tr/model"),
    )
    case(
        3,
        "generate --max-new-tokens 0",
        ["generate", "{ws}/lm/model", "--max-new-tokens", "0", "--prompt", "Ahab"],
        expect="ok",
    )
    case(
        3,
        "generate --top-k above the vocabulary",
        ["generate", "{ws}/lm/model", "--max-new-tokens", "3", "--top-k", "99999", "--seed", "1"],
        expect="ok",
    )
    case(
        3,
        "translate --beam 1e3",
        ["translate", "{ws}/tr/model", "--beam", "1e3"],
        de,
        says=("--beam",),
    )
    case(
        3,
        "evaluate --limit 0 (all)",
        ["evaluate", "{ws}/tr/model", "--limit", "0", "--output", "{d}/h.txt"],
        expect="ok",
        check=lambda p, d: (
            None if len((d / "h.txt").read_text().splitlines()) == 40 else "not every sentence"
        ),
    )
    case(
        3,
        "train --set data.extra_train as a string",
        ["train", "--out", "{d}/r", "--set", 'data.extra_train="phrases"'],
        says=("extra_train",),
    )
    case(
        3,
        "train --set model.dropout=nan",
        ["train", "--out", "{d}/r", "--set", "model.dropout=nan"],
        says=("dropout",),
    )
    case(
        4,
        "non-UTF-8 stdin replaced (classify)",
        ["classify", "{ws}/cls/model", "--errors", "replace"],
        b"good\n\xff bad\n",
        expect="ok",
        check=lambda p, d: None if len(p.stdout.splitlines()) == 2 else "wrong line count",
    )
    case(
        4,
        "only newlines (translate)",
        ["translate", "{ws}/tr/model"],
        b"\n\n\n",
        expect="ok",
        check=lambda p, d: None if len(p.stdout.splitlines()) == 3 else "wrong line count",
    )
    case(
        4,
        "translate --nbest 2 | head -1",
        shell="printf 'Das ist gut.\\n%.0s' $(seq 300) | {aiayn} translate {ws}/tr/model --beam 2 --nbest 2 --chunk 10 | head -1",
        expect="ok",
        check=quiet_head,
    )
    case(
        4,
        "overlong sentence (attention)",
        ["attention", "{ws}/tr/model", "Das ist gut. " * 30, "--out", "{d}/a.png"],
        expect="warn",
        says=("max_len",),
    )
    case(5, "resume a finished run with more steps", run=resume_finished, expect="ok")
    case(
        5,
        "run.json damaged, checkpoints present",
        run=damaged_run_json,
        expect="warn",
        says=("run.json: not valid JSON", "rewriting it"),
    )
    case(
        9,
        "attention --out under a file",
        ["attention", "{ws}/tr/model", "Hallo.", "--out", "{ws}/corpus/train.de.gz/a.png"],
        says=("train.de.gz",),
    )
    # ----------------------------------------------------------------- class 9: disk and permissions
    case(
        9,
        "train into a read-only directory",
        run=lambda d: mounted(
            WS,
            d / "mnt",
            1024,
            True,
            [
                "train",
                "--out",
                str(d / "mnt/run"),
                "--quiet",
                *tiny_translation_sets(WS.root / "corpus", max_steps=3),
            ],
        ),
        says=("mnt", "read-only"),
        needs_mount=True,
    )
    case(
        9,
        "train onto a full disk",
        run=lambda d: mounted(
            WS,
            d / "mnt",
            120,
            False,
            [
                "train",
                "--out",
                str(d / "mnt/run"),
                "--quiet",
                *tiny_translation_sets(WS.root / "corpus", max_steps=6),
            ],
        ),
        says=("mnt", "space"),
        check=lambda p, d: no_temp_left(p.extra.get("listing", "")),
        needs_mount=True,
    )
    case(
        9,
        "evaluate --output onto a full disk",
        run=lambda d: mounted(
            WS,
            d / "mnt",
            8,
            False,
            [
                "evaluate",
                str(WS.root / "tr/model"),
                "--limit",
                "40",
                "--output",
                str(d / "mnt/hyp.txt"),
            ],
            fill=f"dd if=/dev/zero of={d}/mnt/fill bs=1k count=8 2>/dev/null; true",
        ),
        says=("hyp.txt", "space"),
        check=lambda p, d: no_temp_left(p.extra.get("listing", "")),
        needs_mount=True,
    )
    case(
        9,
        "evaluate into a read-only model directory",
        run=lambda d: mounted(
            WS,
            d / "mnt",
            1024,
            True,
            ["evaluate", str(d / "mnt/m"), "--limit", "3"],
            fill=f"cp -r {WS.root}/tr/model {d}/mnt/m",
        ),
        says=("test.hyp.txt", "read-only"),
        needs_mount=True,
    )
    case(
        9,
        "attention --out into a read-only directory",
        run=lambda d: mounted(
            WS,
            d / "mnt",
            64,
            True,
            ["attention", str(WS.root / "tr/model"), "Hallo.", "--out", str(d / "mnt/a.png")],
        ),
        says=("a.png", "read-only"),
        needs_mount=True,
    )
    case(
        9,
        "average --out onto a full disk",
        run=lambda d: mounted(
            WS,
            d / "mnt",
            64,
            False,
            ["average", str(WS.root / "tr"), "--last", "1", "--out", str(d / "mnt/avg")],
        ),
        says=("avg", "space"),
        check=lambda p, d: no_temp_left(p.extra.get("listing", "")),
        needs_mount=True,
    )
    case(
        9,
        "prepare files into a read-only directory",
        run=lambda d: mounted(
            WS,
            d / "mnt",
            64,
            True,
            [
                "prepare",
                "files",
                "--out",
                str(d / "mnt/c"),
                "--split",
                f"train={WS.root}/corpus/valid.de.gz,{WS.root}/corpus/valid.en.gz",
            ],
        ),
        says=("mnt", "read-only"),
        needs_mount=True,
    )
    case(
        9,
        "evaluate --output is a directory",
        ["evaluate", "{ws}/tr/model", "--limit", "3", "--output", "{d}"],
        says=("{d}",),
    )
    case(
        9,
        "train --out is a file",
        [
            "train",
            "--out",
            "{ws}/corpus/stats.none",
            "--quiet",
            *tiny_translation_sets("{ws}/corpus", max_steps=3),
        ],
        says=("stats.none",),
        setup=lambda d: (WS.root / "corpus/stats.none").write_text("x"),
    )


# --------------------------------------------------------------------------- run-based cases


def quiet_head(p: Result, d: Path) -> str | None:
    if not p.stdout.strip():
        return "no output"
    if p.stderr.strip():
        return f"stderr not quiet: {p.stderr.strip().splitlines()[-1][:100]}"
    return None


def interrupt_translate(d: Path) -> Result:
    proc = subprocess.Popen(
        [PY, "-m", "aiayn.cli", "translate", str(WS.root / "tr/model")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=WS.env,
        cwd=ROOT,
        preexec_fn=default_signals,
    )
    proc.stdin.write(b"Das ist gut.\n")
    proc.stdin.flush()
    time.sleep(8)
    proc.send_signal(signal.SIGINT)
    return finish(proc)


def same_bytes_twice(d: Path) -> str | None:
    done = WS.aiayn(["average", str(WS.root / "tr"), "--last", "1", "--out", str(d / "b")])
    if done.returncode:
        return f"second save failed: {done.stderr[-300:]}"
    a, b = (d / "a/model.safetensors").read_bytes(), (d / "b/model.safetensors").read_bytes()
    return None if a == b else "two saves of the same weights differ in bytes"


def check_pairs(corpus: Path, split: str, wanted, *alternatives) -> str | None:
    try:
        src = gzip.decompress((corpus / f"{split}.de.gz").read_bytes()).decode().split("\n")[:-1]
        tgt = gzip.decompress((corpus / f"{split}.en.gz").read_bytes()).decode().split("\n")[:-1]
    except OSError as e:
        return f"unreadable output: {e}"
    pairs = list(zip(src, tgt, strict=False))
    if len(src) != len(tgt):
        return f"misaligned: {len(src)} vs {len(tgt)} lines"
    if pairs == list(wanted):
        return None
    if alternatives and pairs and pairs[0][0] in alternatives:
        return None
    return f"pairs {pairs!r}, wanted {list(wanted)!r}"


def train_in_background(d: Path, **train) -> tuple[Path, subprocess.Popen]:
    run = d / "run"
    settings = dict(max_steps=100000, checkpoint_every=1000, log_every=2, max_minutes=5)
    settings.update(train)
    proc = start_training(WS, run, tiny_translation_sets(WS.root / "corpus", **settings))
    return run, proc


def interrupt_training(d: Path, sig) -> Result:
    run, proc = train_in_background(d)
    if not wait_for(lambda: len(logged_steps(run)) >= 3 or proc.poll() is not None):
        proc.kill()
    time.sleep(0.3)
    proc.send_signal(sig)
    result = finish(proc)
    if result.returncode < 0:
        return Result(
            0, result.stdout, result.stderr, {"problem": "killed by the signal, nothing saved"}
        )
    steps = logged_steps(run)
    saved = checkpoint_steps(run) if (run / "checkpoints").exists() else []
    if result.returncode == 0:
        return result
    if not saved or (steps and saved[-1] < steps[-1]):
        result.returncode = 0  # judged as silent wrong: nothing (or an older step) saved
        result.stderr += (
            f"\n[audit: checkpoints {saved}, last logged step {steps[-1] if steps else None}]"
        )
    return result


def interrupt_resume_identical(d: Path) -> Result:
    import torch

    sets = tiny_translation_sets(
        WS.root / "corpus", max_steps=30, checkpoint_every=1000, log_every=2
    )
    full = WS.aiayn(["train", "--out", str(d / "full"), "--quiet", *sets])
    if full.returncode:
        return full
    run = d / "split"
    proc = start_training(WS, run, sets)
    wait_for(lambda: len(logged_steps(run)) >= 4 or proc.poll() is not None)
    proc.send_signal(signal.SIGINT)
    first = finish(proc)
    resumed = WS.aiayn(["train", "--out", str(run), "--quiet", *sets])
    if resumed.returncode:
        return Result(1, "", first.stderr + resumed.stderr)
    a = torch.load(sorted((d / "full/checkpoints").glob("*.pt"))[-1], weights_only=False)["model"]
    b = torch.load(sorted((run / "checkpoints").glob("*.pt"))[-1], weights_only=False)["model"]
    same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    return Result(0, "", first.stderr, {"problem": None if same else "resumed weights differ"})


def temp_files_cleaned(d: Path) -> Result:
    run = d / "run"
    sets = tiny_translation_sets(WS.root / "corpus", max_steps=5)
    first = WS.aiayn(["train", "--out", str(run), "--quiet", *sets])
    if first.returncode:
        return first
    stale = [
        run / "checkpoints/.checkpoint-00000010.pt.k1l2m3.tmp",
        run / ".run.json.a1b2c3.tmp",
        run / "model/.model.safetensors.x9y8.tmp",
    ]
    for p in stale:
        p.write_bytes(b"half")
    sets = tiny_translation_sets(WS.root / "corpus", max_steps=7)
    again = WS.aiayn(["train", "--out", str(run), "--quiet", *sets])
    left = [str(p) for p in stale if p.exists()]
    again.extra["problem"] = f"left: {left}" if left else None
    return again


def replayed_steps_logged_once(d: Path) -> Result:
    run, proc = train_in_background(d, checkpoint_every=6)
    wait_for(
        lambda: (
            (len(logged_steps(run)) >= 5 and bool(checkpoint_steps(run))) or proc.poll() is not None
        )
    )
    proc.kill()
    proc.communicate()
    sets = tiny_translation_sets(WS.root / "corpus", max_steps=14, checkpoint_every=6)
    again = WS.aiayn(["train", "--out", str(run), "--quiet", *sets])
    steps = logged_steps(run)
    dupes = sorted({s for s in steps if steps.count(s) > 1})
    again.extra["problem"] = f"steps logged twice: {dupes}" if dupes else None
    return again


def half_written_metrics(d: Path) -> Result:
    run = d / "run"
    first = WS.aiayn(
        [
            "train",
            "--out",
            str(run),
            "--quiet",
            *tiny_translation_sets(WS.root / "corpus", max_steps=5),
        ]
    )
    if first.returncode:
        return first
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 6, "epoch": 0, "lo')
    again = WS.aiayn(
        [
            "train",
            "--out",
            str(run),
            "--quiet",
            *tiny_translation_sets(WS.root / "corpus", max_steps=8),
        ]
    )
    bad = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        try:
            json.loads(line)
        except json.JSONDecodeError:
            bad.append(line)
    again.extra["problem"] = f"unparsable lines remain: {bad}" if bad else None
    return again


def two_trainings(d: Path) -> Result:
    run, first = train_in_background(d)
    wait_for(lambda: len(logged_steps(run)) >= 2 or first.poll() is not None)
    before = digest(run / "run.json")
    second = WS.aiayn(
        [
            "train",
            "--out",
            str(run),
            "--quiet",
            *tiny_translation_sets(WS.root / "corpus", max_steps=3, seed=7),
        ]
    )
    changed = digest(run / "run.json") != before
    first.send_signal(signal.SIGTERM)
    finish(first)
    if changed:
        second.extra["loss"] = "run.json rewritten by the second training"
    return second


def stale_lock(d: Path) -> Result:
    run, first = train_in_background(d)
    wait_for(lambda: len(logged_steps(run)) >= 2 or first.poll() is not None)
    first.kill()
    first.communicate()
    return WS.aiayn(
        [
            "train",
            "--out",
            str(run),
            "--quiet",
            *tiny_translation_sets(WS.root / "corpus", max_steps=3),
        ]
    )


def swapped_run_tokenizer(d: Path) -> Result:
    shutil.copytree(WS.root / "tr", d / "run")
    shutil.copy(WS.root / "cls/tokenizer.model", d / "run/tokenizer.model")
    return WS.aiayn(
        [
            "train",
            "--out",
            str(d / "run"),
            "--quiet",
            *tiny_translation_sets(WS.root / "corpus", max_steps=12),
        ]
    )


def vocab_changed_before_checkpoint(d: Path) -> Result:
    run = d / "run"
    shutil.copytree(WS.root / "tr", run)
    shutil.rmtree(run / "checkpoints")
    sets = tiny_translation_sets(WS.root / "corpus", max_steps=3) + ["--set", "data.vocab_size=350"]
    done = WS.aiayn(["train", "--out", str(run), "--quiet", *sets])
    if done.returncode == 0:
        size = json.loads((run / "model/config.json").read_text())["model"]["vocab_size"]
        done.extra["problem"] = (
            None if size == 350 else f"trained with the old tokenizer ({size} pieces, asked 350)"
        )
    return done


def resume_finished(d: Path) -> Result:
    shutil.copytree(WS.root / "tr", d / "run")
    done = WS.aiayn(
        [
            "train",
            "--out",
            str(d / "run"),
            "--quiet",
            *tiny_translation_sets(WS.root / "corpus", max_steps=11),
        ]
    )
    if done.returncode == 0:
        steps = logged_steps(d / "run")
        done.extra["problem"] = (
            None if steps == sorted(set(steps)) and 10 in steps else f"steps {steps}"
        )
    return done


def damaged_run_json(d: Path) -> Result:
    shutil.copytree(WS.root / "tr", d / "run")
    (d / "run/run.json").write_text("{oops")
    return WS.aiayn(
        [
            "train",
            "--out",
            str(d / "run"),
            "--quiet",
            *tiny_translation_sets(WS.root / "corpus", max_steps=10),
        ]
    )


def changed_setting(d: Path, sets: list[str], drop_run_json: bool = False) -> Result:
    shutil.copytree(WS.root / "tr", d / "run")
    if drop_run_json:
        (d / "run/run.json").unlink()
    argv = tiny_translation_sets(WS.root / "corpus", max_steps=12) + [
        x for s in sets for x in ("--set", s)
    ]
    return WS.aiayn(["train", "--out", str(d / "run"), "--quiet", *argv])


def foreign_checkpoint(d: Path) -> Result:
    shutil.copytree(WS.root / "tr", d / "run")
    shutil.copy(
        WS.root / "cls/checkpoints/checkpoint-00000006.pt",
        d / "run/checkpoints/checkpoint-00000099.pt",
    )
    return WS.aiayn(
        [
            "train",
            "--out",
            str(d / "run"),
            "--quiet",
            *tiny_translation_sets(WS.root / "corpus", max_steps=120),
        ]
    )


# --------------------------------------------------------------------------- judging


def expand(text: str, d: Path) -> str:
    return text.replace("{ws}", str(WS.root)).replace("{d}", str(d))


def run_case(c: Case, d: Path) -> tuple[str, Result, str]:
    d.mkdir(parents=True, exist_ok=True)
    if c.setup:
        c.setup(d)
    protected = {expand(p, d): digest(Path(expand(p, d))) for p in c.protect}
    if c.run:
        result = c.run(d)
    elif c.shell:
        aiayn = f"{shlex_quote(PY)} -m aiayn.cli"
        cmd = expand(c.shell.replace("{aiayn}", aiayn), d)
        done = subprocess.run(
            ["bash", "-c", cmd],
            capture_output=True,
            env=WS.env,
            timeout=300,
            cwd=ROOT,
            preexec_fn=default_signals,
        )
        result = Result(
            done.returncode,
            done.stdout.decode(errors="replace"),
            done.stderr.decode(errors="replace"),
        )
    else:
        result = WS.aiayn([expand(a, d) for a in c.argv], c.stdin)
    says = [expand(s, d) for s in c.says]
    err = result.stderr
    if "Traceback (most recent call last)" in err or result.returncode < 0:
        return "traceback", result, ""
    for path, before in protected.items():
        if digest(Path(path)) != before:
            return "data loss", result, f"{path} changed"
    if result.extra.get("loss"):
        return "data loss", result, result.extra["loss"]
    problem = result.extra.get("problem")
    if c.check and result.returncode == 0 and problem is None:
        problem = c.check(result, d)
    if c.expect == "fail":
        if result.returncode == 0:
            return "silent wrong", result, problem or "exit 0"
        missing = [s for s in says if not re.search(s, err, re.IGNORECASE)]
        if missing:
            return "unclear", result, f"message lacks {missing}"
        if problem:
            return "silent wrong", result, problem
        return "ok", result, ""
    if c.expect == "warn":
        if result.returncode != 0:
            return "failed", result, "non-zero exit"
        missing = [s for s in says if not re.search(s, err, re.IGNORECASE)]
        return ("silent wrong", result, f"no warning {missing}") if missing else ("ok", result, "")
    if result.returncode != 0:
        return "failed", result, "non-zero exit"
    if problem:
        return "silent wrong", result, problem
    return "ok", result, ""


WS: Workspace


def main() -> int:
    global WS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(ROOT / "src"), help="the aiayn source tree to audit")
    parser.add_argument("--only", type=int, action="append", help="only these classes (1-9)")
    parser.add_argument("--name", help="only cases whose name contains this")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--json", help="write the per-case outcomes here")
    parser.add_argument("--keep", action="store_true", help="keep the workspace")
    args = parser.parse_args()
    can_mount = subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0
    root = Path(tempfile.mkdtemp(prefix="aiayn-audit-"))
    env = {
        **os.environ,
        "PYTHONPATH": f"{args.src}:{ROOT}",
        "OMP_NUM_THREADS": "1",
        "PYTHONIOENCODING": "",
    }
    env.pop("AIAYN_DEBUG", None)
    WS = Workspace(root, env)
    print(f"workspace {root} (auditing {args.src}; host {socket.gethostname()})", flush=True)
    start = time.time()
    WS.build()
    define_cases()
    counts: dict[str, int] = {}
    rows = []
    for i, c in enumerate(CASES):
        if (args.only and c.cls not in args.only) or (args.name and args.name not in c.name):
            continue
        if c.needs_mount and not can_mount:
            outcome, result, why = "skipped", Result(0, "", ""), "no unshare -m"
        else:
            try:
                outcome, result, why = run_case(c, root / f"case{i:03d}")
            except Exception as e:  # the audit's own trouble: show it, keep going
                outcome, result, why = "audit error", Result(0, "", ""), f"{type(e).__name__}: {e}"
        counts[outcome] = counts.get(outcome, 0) + 1
        last = (result.stderr.strip().splitlines() or [""])[-1][:160]
        rows.append(
            {"class": c.cls, "case": c.name, "outcome": outcome, "why": why, "stderr_last": last}
        )
        mark = "  " if outcome == "ok" else "!!"
        print(f"{mark} [{c.cls}] {c.name}: {outcome}{' (' + why + ')' if why else ''}", flush=True)
        if args.verbose or outcome not in ("ok", "skipped"):
            print(f"      rc={result.returncode} stderr: {last}", flush=True)
    total = sum(counts.values())
    print(
        f"\n{total} cases in {time.time() - start:.0f}s: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    )
    by_class: dict[int, dict[str, int]] = {}
    for row in rows:
        by_class.setdefault(row["class"], {}).setdefault(row["outcome"], 0)
        by_class[row["class"]][row["outcome"]] += 1
    for cls in sorted(by_class):
        print(f"  class {cls}: " + ", ".join(f"{k} {v}" for k, v in sorted(by_class[cls].items())))
    if args.json:
        Path(args.json).write_text(json.dumps({"counts": counts, "cases": rows}, indent=1) + "\n")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    bad = sum(v for k, v in counts.items() if k not in ("ok", "skipped"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
