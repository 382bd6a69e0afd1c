"""Check the documentation: every relative link resolves, and every command block runs.

    python scripts/check_docs.py                    # links, then every page's blocks
    python scripts/check_docs.py docs/training.md   # one page (links of all pages first)
    python scripts/check_docs.py --links-only
    python scripts/check_docs.py --slow             # also the blocks marked slow

Pages: README.md, docs/*.md and bench/README.md. Links: every ``[text](target)`` outside code
blocks that is not a URL must name an existing file, and its ``#anchor`` a heading of that page
(GitHub's anchors). Blocks: every fenced ``bash`` and ``python`` block runs, in page order, in
a scratch directory holding ``configs/``, ``models/ding-de-en`` and the first lines of each
bundled corpus under ``data/``, unless the line before it is an HTML comment that says
otherwise (docs/development.md lists them):

    <!-- not run: REASON -->          shown, never run; the reason is required
    <!-- check: slow ... -->          run only with --slow
    <!-- check: last ... -->          run after the page's other blocks
    <!-- check: background ... -->    started in the background (a server), stopped at the end

and ``needs MODULE`` in a check comment skips the block, saying so, where MODULE is missing.
Substitutions keep a page to seconds: ``aiayn train`` gets a tiny model and two steps (TINY),
the port 8000 becomes a free one, and ``curl`` fails on an HTTP error. ``aiayn`` commands (alone,
fed by ``echo``, with ``<`` / ``>`` and ``&&``) run inside this process, anything else in bash.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib.util
import io
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the environment's aiayn, torchrun, ...
LANGUAGES = {"bash", "python"}  # blocks in other languages (text, toml, json) are not commands
TINY = [  # appended to every `aiayn train`: a model and a run of seconds
    "--quiet",
    *("--set", "model.d_model=16", "--set", "model.n_heads=2", "--set", "model.d_ff=32"),
    *("--set", "data.vocab_size=400", "--set", "train.max_steps=2", "--set", "train.warmup=1"),
    *("--set", "train.checkpoint_every=1", "--set", "train.max_minutes=5"),
    *("--set", "train.threads=1"),
]
CORPUS_LINES = {"train": 400, "phrases": 400, "lexicon": 400}  # other files: 40 lines


def shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    directive: str  # the HTML comment before it, without <!-- -->, or ""

    @property
    def where(self) -> str:
        return f"{shown(self.page)}:{self.line}"

    def kind(self) -> str:
        """run, not run, slow, last or background."""
        if self.directive.startswith("not run"):
            return "not run"
        if self.directive.startswith("check:"):
            return self.directive.removeprefix("check:").split()[0].strip(",")
        return "run"

    def needs(self) -> list[str]:
        return re.findall(r"needs ([\w.]+)", self.directive)


def blocks(page: Path) -> list[Block]:
    found, lines = [], page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^(```+)\s*(\w*)", lines[i])
        if not fence:
            i += 1
            continue
        start, marker = i, fence.group(1)
        i += 1
        while i < len(lines) and not lines[i].startswith(marker):
            i += 1
        before = next((line for line in reversed(lines[:start]) if line.strip()), "")
        comment = re.fullmatch(r"\s*<!--\s*(.*?)\s*-->\s*", before)
        found.append(
            Block(
                page,
                start + 1,
                fence.group(2),
                "\n".join(lines[start + 1 : i]) + "\n",
                comment.group(1) if comment else "",
            )
        )
        i += 1
    return found


def directive_errors(block: Block) -> list[str]:
    """What is wrong with a block's check comment (an unknown kind, a not-run without reason)."""
    if block.language not in LANGUAGES:
        return []
    kind = block.kind()
    if kind == "not run" and not block.directive.removeprefix("not run").strip(" :"):
        return [f"{block.where}: 'not run' needs a reason: <!-- not run: REASON -->"]
    if kind not in {"run", "not run", "slow", "last", "background"}:
        return [f"{block.where}: unknown check {block.directive!r}"]
    return []


# links


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (match := re.match(r"^#{1,6}\s+(.*)", line)):
            base = slug(match.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            result.add(base if n == 0 else f"{base}-{n}")
    return result


def link_errors(page: Path) -> list[str]:
    errors, in_code = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            where = f"{shown(page)}:{number}: link {target!r}"
            if not file.exists():
                errors.append(f"{where}: no file {shown(file)}")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                errors.append(f"{where}: no heading with anchor #{anchor} in {file.name}")
    return errors


# the scratch directory


def scratch_directory(directory: Path) -> Path:
    """configs/, models/ding-de-en and the first lines of each bundled corpus."""
    shutil.copytree(ROOT / "configs", directory / "configs")
    shipped = directory / "models" / "ding-de-en"  # links to its files: what commands write
    shipped.mkdir(parents=True)  # there (hypotheses) stays in the scratch directory
    for file in (ROOT / "models" / "ding-de-en").iterdir():
        (shipped / file.name).symlink_to(file)
    for name in ("bench", "scripts"):
        (directory / name).symlink_to(ROOT / name)
    for corpus in sorted(p for p in (ROOT / "data").iterdir() if p.is_dir()):
        out = directory / "data" / corpus.name
        out.mkdir(parents=True)
        for file in corpus.iterdir():
            if file.suffix == ".gz":
                keep = CORPUS_LINES.get(file.name.split(".")[0], 40)
                lines = gzip.decompress(file.read_bytes()).splitlines(keepends=True)[:keep]
                (out / file.name).write_bytes(gzip.compress(b"".join(lines)))
            elif file.is_file():
                shutil.copy(file, out / file.name)
    return directory


# running


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def strip_comment(line: str) -> str:
    """``line`` without a trailing ``# comment`` (outside quotes)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands(code: str) -> list[str]:
    """The logical lines of a bash block: continuations and open quotes joined, comments
    dropped."""
    result, current, in_quote = [], "", False
    for raw in code.splitlines():
        current = current + "\n" + raw if in_quote else current + strip_comment(raw)
        in_quote = False
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        try:
            shlex.split(current)
        except ValueError:  # no closing quotation yet: the quote goes on on the next line
            in_quote = True
            continue
        if current.strip():
            result.append(current.strip())
        current = ""
    if current.strip():
        result.append(current.strip())
    return result


def substitute(command: str, port: int) -> str:
    parts = []
    for part in command.split("&&"):
        if re.search(r"\baiayn(?:\.cli)?\s+train\b", part):
            part = part.rstrip() + " " + shlex.join(TINY) + " "
        parts.append(part)
    command = "&&".join(parts)
    command = re.sub(r"(localhost:|127\.0\.0\.1:|--port )8000\b", rf"\g<1>{port}", command)
    return re.sub(r"\bcurl\b", "curl --fail-with-body --max-time 120", command)


def in_process_plan(command: str) -> list[tuple[str | None, list[str], str | None, str | None]]:
    """``[(stdin text, aiayn argv, stdin file, stdout file)]`` for a command made only of
    ``[echo ... |] aiayn ... [< FILE] [> FILE]`` joined by ``&&``; [] for anything else."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return []
    plan, segments, current = [], [], []
    for token in tokens:
        if token == "&&":
            segments.append(current)
            current = []
        else:
            current.append(token)
    segments.append(current)
    for segment in segments:
        stdin_text = stdin_file = stdout_file = None
        if segment[:1] == ["echo"] and "|" in segment:
            bar = segment.index("|")
            stdin_text = " ".join(segment[1:bar]) + "\n"
            segment = segment[bar + 1 :]
        words: list[str] = []
        it = iter(segment)
        for token in it:
            if token == "<":
                stdin_file = next(it, None)
            elif token == ">":
                stdout_file = next(it, None)
            elif token in {"|", "||", ";", "&", ">>", "(", ")", "<(", "2>"} or "$" in token:
                return []
            else:
                words.append(token)
        if words[:1] != ["aiayn"] or (stdin_file is None and "<" in segment):
            return []
        plan.append((stdin_text, words[1:], stdin_file, stdout_file))
    return plan


def run_in_process(plan) -> tuple[int, str]:
    from aiayn.cli import main

    log = []
    for stdin_text, argv, stdin_file, stdout_file in plan:
        data = stdin_text.encode() if stdin_text is not None else b""
        if stdin_file:
            data = Path(stdin_file).read_bytes()
        stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
        out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
        stdout = io.TextIOWrapper(out_bytes, encoding="utf-8", write_through=True)
        stderr = io.TextIOWrapper(err_bytes, encoding="utf-8", write_through=True)
        saved = sys.stdin, sys.stdout, sys.stderr
        sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            code, _ = 1, stderr.write(traceback.format_exc())
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved
        if stdout_file:
            Path(stdout_file).write_bytes(out_bytes.getvalue())
        log.append(f"$ aiayn {shlex.join(argv)}\n{out_bytes.getvalue().decode(errors='replace')}")
        log.append(err_bytes.getvalue().decode(errors="replace"))
        if code:
            return code, "".join(log)
    return 0, "".join(log)


def environment() -> dict[str, str]:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_bash(command: str) -> tuple[int, str]:
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        capture_output=True, text=True, env=environment(), timeout=600,
    )  # fmt: skip
    return done.returncode, f"$ {command}\n{done.stdout}{done.stderr}"


def run_python(code: str, where: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, where, "exec"), {"__name__": "__main__"})
    except BaseException:
        return 1, out.getvalue() + traceback.format_exc()
    return 0, out.getvalue()


class Page:
    """One page's blocks, run in order in one scratch directory."""

    def __init__(self, page: Path, slow: bool, verbose: bool = False) -> None:
        self.page, self.slow, self.verbose = page, slow, verbose
        self.port = free_port()
        self.servers: list[subprocess.Popen] = []

    def skip_reason(self, block: Block) -> str | None:
        kind = block.kind()
        if kind == "not run":
            return block.directive
        if kind == "slow" and not self.slow:
            return "slow (run with --slow)"
        missing = [m for m in block.needs() if importlib.util.find_spec(m) is None]
        if missing:
            return f"needs {', '.join(missing)}, not installed"
        return None

    def start_server(self, block: Block) -> tuple[int, str]:
        (command,) = commands(block.code)
        log = open("server.log", "w")  # noqa: SIM115 (closed with the scratch directory)
        self.servers.append(
            subprocess.Popen(
                ["bash", "-c", "exec " + substitute(command, self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment(),
            )  # fmt: skip
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.servers[-1].poll() is not None:
                return 1, Path("server.log").read_text()
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5):
                    return 0, f"server on port {self.port}\n"
            time.sleep(0.5)
        return 1, "the server did not answer /health in 300 s\n" + Path("server.log").read_text()

    def run_block(self, block: Block) -> tuple[int, str]:
        if block.language == "python":
            return run_python(block.code, block.where)
        if block.kind() == "background":
            return self.start_server(block)
        log = []
        for command in commands(block.code):
            command = substitute(command, self.port)
            plan = in_process_plan(command)
            code, output = run_in_process(plan) if plan else run_bash(command)
            log.append(output)
            if code:
                return code, "".join(log)
        return 0, "".join(log)

    def run(self) -> int:
        todo = [b for b in blocks(self.page) if b.language in LANGUAGES]
        todo = [b for b in todo if b.kind() != "last"] + [b for b in todo if b.kind() == "last"]
        failures = 0
        with tempfile.TemporaryDirectory(prefix="aiayn-docs-") as scratch:
            here = Path.cwd()
            os.chdir(scratch_directory(Path(scratch)))
            try:
                for block in todo:
                    reason = self.skip_reason(block)
                    if reason:
                        print(f"skip {block.where}: {reason}")
                        continue
                    start = time.monotonic()
                    code, output = self.run_block(block)
                    took = time.monotonic() - start
                    if code:
                        failures += 1
                        shown = output if len(output) < 6000 else "...\n" + output[-6000:]
                        print(f"FAIL {block.where} (exit {code}, {took:.1f} s)\n{shown}")
                    else:
                        print(f"ok   {block.where} ({block.language}, {took:.1f} s)")
                        if self.verbose:
                            print(output)
            finally:
                for server in self.servers:
                    server.terminate()
                    server.wait(timeout=60)
                os.chdir(here)
        return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help="pages to run (default: all)")
    parser.add_argument("--slow", action="store_true", help="also run the blocks marked slow")
    parser.add_argument("--links-only", action="store_true", help="check links and comments only")
    parser.add_argument("-v", "--verbose", action="store_true", help="show every block's output")
    args = parser.parse_args()
    problems = [e for page in pages() for e in link_errors(page)]
    problems += [e for page in pages() for b in blocks(page) for e in directive_errors(b)]
    for problem in problems:
        print(problem)
    if problems or args.links_only:
        return 1 if problems else 0
    failures = 0
    for page in [p.resolve() for p in args.pages] or pages():
        failures += Page(page, args.slow, args.verbose).run()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
