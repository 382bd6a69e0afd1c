"""Replay one bad-input, interruption or concurrency case against the command line; judge it.

The cases live in ``cases.toml`` (one table per case); the code some of them need (a set-up
step, a custom run, a check of the result) lives in ``registry.py`` under the names the table
uses. Every case runs ``python -m aiayn.cli`` in a subprocess and ends in one outcome:

* ``traceback``: a Python traceback on stderr, or the process died from a signal it was not sent;
* ``silent wrong``: exit 0 where the input is bad, or a wrong result with exit 0;
* ``unclear``: a non-zero exit whose message lacks what it must name (file, line, flag, cause);
* ``data loss``: a file the case protects was changed or removed;
* ``failed``: valid input that did not give its result (a regression);
* ``ok``.

Placeholders in a case's strings: ``{d}`` (the case's own directory), the workspace parts
``{corpus}`` ``{text}`` ``{labelled}`` (small corpora), ``{ding}`` (the shipped model), ``{tr}``
``{lm}`` ``{cls}`` (tiny runs of each family, trained on first use), ``{text:NAME}`` (a named
text of the registry). ``argv`` and ``stdin`` take Python bytes escapes (``\\n``, ``\\xff``).
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES_FILE = Path(__file__).with_name("cases.toml")
PY = sys.executable
EXPECTS = ("fail", "ok", "warn")
PARTS = ("corpus", "text", "labelled", "ding", "tr", "lm", "cls")
TRAINED = ("tr", "lm", "cls")


@dataclass(frozen=True)
class Case:
    id: str
    cls: int
    name: str
    argv: tuple[str, ...] = ()
    shell: str | None = None  # a shell command line instead of argv ({aiayn} expands)
    run: dict | None = None  # a registry run: {fn = NAME, ...arguments}
    stdin: str = ""
    sets: dict | None = None  # the --set overrides that replace "{sets}" in argv
    setup: tuple[dict, ...] = ()  # registry steps: {do = NAME, ...arguments}
    mount: dict | None = None  # run argv with {d}/mnt a fresh tmpfs: {size_kb, readonly, fill}
    expect: str = "fail"  # fail | ok | warn
    says: tuple[str, ...] = ()  # regexes the message (stderr) must match, case-insensitive
    check: dict | None = None  # a registry check of an exit-0 result: {fn = NAME, ...}
    protect: tuple[str, ...] = ()  # paths that must not change
    slow: bool = False

    @property
    def parts(self) -> set[str]:
        """The workspace parts this case names (what it costs to set up)."""
        return set(re.findall(r"\{(\w+)\}", repr(self))) & set(PARTS)


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    extra: dict = field(default_factory=dict)


def load_cases(path: Path = CASES_FILE) -> list[Case]:
    """Read the case table; a row with an unknown key, a bad value or a repeated id is an error."""
    from tests.audit import registry

    rows = tomllib.loads(path.read_text(encoding="utf-8")).get("case", [])
    known = set(Case.__dataclass_fields__) - {"cls"} | {"class"}
    cases, seen = [], set()
    for i, row in enumerate(rows, 1):
        where = f"{path.name}: case {i} ({row.get('id', 'no id')})"
        unknown = set(row) - known
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}; allowed {sorted(known)}")
        row = dict(row)
        row["cls"] = row.pop("class", 0)
        for key in ("argv", "setup", "says", "protect"):
            row[key] = tuple(row.get(key, ()))
        c = Case(**row)
        if c.id in seen or not re.fullmatch(r"[a-z0-9][a-z0-9_.=+-]*", c.id):
            raise ValueError(f"{where}: id repeated or not lower-case words joined by '-'")
        seen.add(c.id)
        if not 1 <= c.cls <= 9 or c.expect not in EXPECTS:
            raise ValueError(f"{where}: class must be 1-9 and expect one of {EXPECTS}")
        if sum(map(bool, (c.argv, c.shell, c.run))) != 1:
            raise ValueError(f"{where}: give exactly one of argv, shell, run")
        names = [(registry.STEPS, s.get("do")) for s in c.setup] + [
            (registry.RUNS, (c.run or {}).get("fn")),
            (registry.CHECKS, (c.check or {}).get("fn")),
        ]
        for table, name in names:
            if name is not None and name not in table:
                raise ValueError(f"{where}: {name!r} is not in the registry ({sorted(table)})")
        if c.parts & set(TRAINED) and not c.slow:
            raise ValueError(f"{where}: it needs a trained run ({c.parts}), so it is slow")
        cases.append(c)
    return cases


def audit_env(src: Path) -> dict[str, str]:
    """The children's environment: ``src`` first on the path, one thread, default encodings."""
    env = {**os.environ, "PYTHONPATH": f"{src}:{ROOT}", "OMP_NUM_THREADS": "1"}
    env["PYTHONIOENCODING"] = ""
    env.pop("AIAYN_DEBUG", None)
    return env


def default_signals() -> None:
    """In the child: SIGINT as in a terminal (a background shell job inherits it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def can_mount() -> bool:
    """Whether a private mount namespace (``unshare -m``) is allowed here."""
    try:
        return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


def train_sets(task: str, corpus: str, **train) -> list[str]:
    """--set overrides for a seconds-long run of one family on ``corpus``."""
    first = {"model.preset": '"tiny"'}
    per_task = {
        "translation": {
            "model.max_len": "64",
            "data.corpus": f'"{corpus}"',
            "data.vocab_size": "400",
            "data.max_len": "48",
            "train.max_tokens": "400",
            "train.warmup": "20",
            "train.lr_scale": "2.0",
        },
        "lm": {
            "model.n_encoder_layers": "0",
            "model.max_len": "64",
            "data.task": '"lm"',
            "data.tokenizer": '"char"',
            "data.corpus": f'"{corpus}"',
            "data.block_size": "32",
            "train.max_tokens": "256",
            "train.warmup": "10",
        },
        "classification": {
            "model.n_decoder_layers": "0",
            "model.max_len": "64",
            "data.task": '"classification"',
            "data.corpus": f'"{corpus}"',
            "data.vocab_size": "500",
            "data.max_len": "32",
            "train.max_tokens": "400",
            "train.warmup": "10",
        },
    }[task]
    settings = {
        **first,
        **per_task,
        "train.log_every": "2",
        "train.checkpoint_every": "5",
        "train.threads": "1",
        **{f"train.{k}": str(v) for k, v in train.items()},
    }
    return [x for k, v in settings.items() for x in ("--set", f"{k}={v}")]


def gz(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, mtime=0))


def head_lines(path: Path, n: int) -> bytes:
    lines = gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()[:n]
    return ("\n".join(lines) + "\n").encode()


class Workspace:
    """Shared inputs of the cases under ``root``, each built the first time a case names it."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env

    def part(self, name: str) -> Path:
        path = self.root / name
        if not path.exists():
            getattr(self, f"_build_{name}")(path)
        return path

    def _build_corpus(self, path: Path) -> None:
        src = ROOT / "data" / "ding-de-en"
        for split, n in (("train", 400), ("valid", 40), ("test", 40)):
            for lang in ("de", "en"):
                name = f"{split}.{lang}.gz"
                gz(path / name, head_lines(src / name, n))

    def _build_text(self, path: Path) -> None:
        text = gzip.decompress((ROOT / "data/moby-dick/train.txt.gz").read_bytes()).decode()
        gz(path / "train.txt.gz", text[:20000].encode())
        gz(path / "valid.txt.gz", text[20000:24000].encode())

    def _build_labelled(self, path: Path) -> None:
        src = ROOT / "data" / "rotten-tomatoes"
        for split, n in (("train", 300), ("valid", 60), ("test", 60)):
            gz(path / f"{split}.tsv.gz", head_lines(src / f"{split}.tsv.gz", n))

    def _build_ding(self, path: Path) -> None:
        shutil.copytree(ROOT / "models" / "ding-de-en", path)

    def _train(self, path: Path, task: str, corpus: str, steps: int) -> None:
        argv = train_sets(task, str(self.part(corpus)), max_steps=steps)
        done = self.aiayn(["train", "--out", str(path), "--quiet", *argv])
        if done.returncode:
            shutil.rmtree(path, ignore_errors=True)
            raise RuntimeError(f"workspace: training {path.name} failed:\n{done.stderr[-3000:]}")

    def _build_tr(self, path: Path) -> None:
        self._train(path, "translation", "corpus", 8)

    def _build_lm(self, path: Path) -> None:
        self._train(path, "lm", "text", 6)

    def _build_cls(self, path: Path) -> None:
        self._train(path, "classification", "labelled", 6)

    def expand(self, text: str, d: Path) -> str:
        """Fill the placeholders of one case string (see the module doc)."""
        from tests.audit.registry import TEXTS

        def fill(m: re.Match) -> str:
            name, arg = m.group(1), m.group(2)
            if name == "d":
                return str(d)
            if name == "text" and arg:
                return TEXTS[arg]
            if name in PARTS:
                return str(self.part(name))
            raise KeyError(f"unknown placeholder {m.group(0)} in {text!r}")

        return re.sub(r"\{(\w+)(?::(\w+))?\}", fill, text)

    def expand_all(self, value, d: Path):
        if isinstance(value, str):
            return self.expand(value, d)
        if isinstance(value, list | tuple):
            return [self.expand_all(v, d) for v in value]
        if isinstance(value, dict):
            return {k: self.expand_all(v, d) for k, v in value.items()}
        return value

    def argv(self, c: Case, d: Path) -> list[str]:
        """The case's aiayn arguments: placeholders filled, escapes decoded, {sets} spread."""
        out = []
        for arg in c.argv:
            if arg == "{sets}":
                sets = self.expand_all(dict(c.sets or {}), d)
                out += train_sets(sets.pop("task"), sets.pop("corpus"), **sets)
            else:
                out.append(os.fsdecode(unescape(self.expand(arg, d))))
        return out

    def aiayn(self, argv, stdin: bytes = b"", timeout: float = 300) -> Result:
        done = subprocess.run(
            [PY, "-m", "aiayn.cli", *argv],
            input=stdin,
            capture_output=True,
            env=self.env,
            timeout=timeout,
            cwd=ROOT,
            preexec_fn=default_signals,
        )
        return Result(done.returncode, decode(done.stdout), decode(done.stderr))

    def start(self, argv, **popen) -> subprocess.Popen:
        """``aiayn argv`` in the background, stdout and stderr piped."""
        return subprocess.Popen(
            [PY, "-m", "aiayn.cli", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            cwd=ROOT,
            preexec_fn=default_signals,
            **popen,
        )

    def shell(self, line: str, stdin: bytes = b"", timeout: float = 300) -> Result:
        done = subprocess.run(
            ["bash", "-c", line],
            input=stdin,
            capture_output=True,
            env=self.env,
            timeout=timeout,
            cwd=ROOT,
            preexec_fn=default_signals,
        )
        return Result(done.returncode, decode(done.stdout), decode(done.stderr))

    def mounted(self, mnt: Path, argv: list[str], stdin: bytes, size_kb: int, **how) -> Result:
        """Run aiayn with ``mnt`` a fresh tmpfs of ``size_kb`` (filled, then read-only, if asked).

        The files left on it come back as ``extra["listing"]``.
        """
        mnt.mkdir(parents=True, exist_ok=True)
        steps = [f"mount -t tmpfs -o size={size_kb}k none {mnt}"]
        if how.get("fill"):
            steps.append(how["fill"])
        if how.get("readonly"):
            steps.append(f"mount -o remount,ro {mnt}")
        cmd = shlex.join([PY, "-m", "aiayn.cli", *argv])
        steps.append(f"{cmd}; rc=$?; ls -A -R {mnt} > {mnt}.listing 2>&1; exit $rc")
        done = self.shell_in_namespace(" && ".join(steps), stdin)
        listing = Path(f"{mnt}.listing")
        extra = {"listing": listing.read_text() if listing.exists() else ""}
        return Result(done.returncode, done.stdout, done.stderr, extra)

    def shell_in_namespace(self, line: str, stdin: bytes) -> Result:
        done = subprocess.run(
            ["unshare", "-m", "sh", "-c", line],
            input=stdin,
            capture_output=True,
            env=self.env,
            timeout=300,
            cwd=ROOT,
            preexec_fn=default_signals,
        )
        return Result(done.returncode, decode(done.stdout), decode(done.stderr))


def decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def unescape(text: str) -> bytes:
    """Python bytes escapes (``\\n``, ``\\xff``) in ``text`` -> the bytes they stand for."""
    return codecs.escape_decode(text.encode("utf-8"))[0]


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


def execute(ws: Workspace, c: Case, d: Path) -> tuple[Result, dict[str, str | None]]:
    """Set the case up, run it; the result and the protected paths' digests from before."""
    from tests.audit import registry

    d.mkdir(parents=True, exist_ok=True)
    for step in c.setup:
        args = ws.expand_all(dict(step), d)
        registry.STEPS[args.pop("do")](ws, d, **args)
    protected = {p: digest(Path(p)) for p in ws.expand_all(list(c.protect), d)}
    stdin = unescape(ws.expand(c.stdin, d))
    if c.run:
        args = ws.expand_all(dict(c.run), d)
        return registry.RUNS[args.pop("fn")](ws, d, **args), protected
    if c.shell:
        line = ws.expand(c.shell.replace("{aiayn}", f"{shlex.quote(PY)} -m aiayn.cli"), d)
        return ws.shell(line, stdin), protected
    if c.mount:
        how = ws.expand_all(dict(c.mount), d)
        return ws.mounted(d / "mnt", ws.argv(c, d), stdin, **how), protected
    return ws.aiayn(ws.argv(c, d), stdin), protected


def judge(
    ws: Workspace, c: Case, d: Path, result: Result, protected: dict[str, str | None]
) -> tuple[str, str]:
    """The outcome of a finished case, and why when it is not ``ok``."""
    from tests.audit import registry

    says = [ws.expand(s, d) for s in c.says]
    err = result.stderr
    if "Traceback (most recent call last)" in err or result.returncode < 0:
        return "traceback", ""
    for path, before in protected.items():
        if digest(Path(path)) != before:
            return "data loss", f"{path} changed"
    if result.extra.get("loss"):
        return "data loss", result.extra["loss"]
    problem = result.extra.get("problem")
    if c.check and result.returncode == 0 and problem is None:
        args = ws.expand_all(dict(c.check), d)
        problem = registry.CHECKS[args.pop("fn")](ws, d, result, **args)
    missing = [s for s in says if not re.search(s, err, re.IGNORECASE)]
    if c.expect == "fail":
        if result.returncode == 0:
            return "silent wrong", problem or "exit 0"
        if missing:
            return "unclear", f"message lacks {missing}"
        if problem:
            return "silent wrong", problem
        return "ok", ""
    if result.returncode != 0:
        return "failed", "non-zero exit"
    if c.expect == "warn" and missing:
        return "silent wrong", f"no warning {missing}"
    if problem:
        return "silent wrong", problem
    return "ok", ""


@dataclass
class Report:
    """One case's outcome and what it cost (wall seconds; CPU seconds of this process and its
    children, the aiayn subprocesses)."""

    case: Case
    outcome: str
    why: str
    result: Result
    wall_s: float
    cpu_s: float

    def explain(self) -> str:
        c, r = self.case, self.result
        wanted = {"fail": "a non-zero exit", "ok": "exit 0", "warn": "exit 0 with a warning"}
        lines = [
            f"[{c.cls}] {c.name}: {self.outcome}" + (f" ({self.why})" if self.why else ""),
            f"  wanted {wanted[c.expect]}"
            + (f" whose message matches {list(c.says)}" if c.says else ""),
            f"  exit {r.returncode}; stderr ends:",
            *("    " + line for line in r.stderr.strip().splitlines()[-12:]),
        ]
        return "\n".join(lines)


def cpu_now() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def run_case(ws: Workspace, c: Case, d: Path) -> Report:
    """Set up, run and judge one case (the workspace parts it names are built first, untimed)."""
    for name in sorted(c.parts):
        ws.part(name)
    wall, cpu = time.perf_counter(), cpu_now()
    result, protected = execute(ws, c, d)
    outcome, why = judge(ws, c, d, result, protected)
    return Report(c, outcome, why, result, time.perf_counter() - wall, cpu_now() - cpu)
