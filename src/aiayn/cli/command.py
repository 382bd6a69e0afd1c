"""The ``aiayn`` command: the parser of every command, and one-line errors."""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from aiayn import __version__
from aiayn.cli import (
    encode,
    generate,
    interop,
    keys,
    model_tools,
    prepare,
    serve,
    train,
    translate,
)
from aiayn.errors import (
    OptionError,
    TrainingInterrupted,
    UserError,
    describe_os_error,
    set_debugging,
)

# every command, in the order --help lists them: each adds its parser and its handler
COMMANDS = (
    model_tools.add_params,
    prepare.add_prepare,
    train.add_train,
    translate.add_translate,
    model_tools.add_average,
    generate.add_generate,
    encode.add_classify,
    encode.add_embed,
    model_tools.add_quantize,
    translate.add_attention,
    translate.add_evaluate,
    serve.add_serve,
    keys.add_keys,
    interop.add_interop,
)
FLAGS = {"sampling": "--sample"}  # API option -> flag, where the names differ


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="aiayn",
        description="The Transformer of 'Attention Is All You Need'.",
        debug_default=False,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors, and ``--debug`` on the main command and every subcommand
    (a subcommand's default is SUPPRESS, so ``aiayn --debug CMD`` is not overwritten)."""

    def __init__(self, *args, debug_default=argparse.SUPPRESS, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument(
            "--debug",
            action="store_true",
            default=debug_default,
            help="show the Python traceback of an error (also AIAYN_DEBUG=1)",
        )

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _first_line(text: str, limit: int = 400) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[:limit] + "..."


def _report(error: BaseException, command: str) -> int:
    """One line on stderr for ``error``; the exit status."""
    prefix = f"aiayn {command}"
    if isinstance(error, TrainingInterrupted):
        print(f"{prefix}: {error}", file=sys.stderr)
        return 128 + error.signal_number
    if isinstance(error, KeyboardInterrupt):
        print(f"{prefix}: interrupted", file=sys.stderr)
        return 130
    if isinstance(error, UnicodeError):  # a decode the code did not attribute to a file
        message = f"text that is not UTF-8 ({_first_line(str(error))}); rerun with --debug"
    elif isinstance(error, OptionError):  # named by its flag
        message = error.renamed(FLAGS)
    elif isinstance(error, (UserError, ValueError, ArithmeticError)):
        message = str(error).strip()
    elif isinstance(error, OSError):
        message = describe_os_error(error)
    elif isinstance(error, RuntimeError):
        message = _first_line(str(error))
    elif isinstance(error, MemoryError):
        message = "out of memory; use a smaller batch (train.max_tokens) or model"
    else:
        print(
            f"{prefix}: internal error: {type(error).__name__}: {_first_line(str(error))} "
            "(rerun with --debug for the traceback, and please report it)",
            file=sys.stderr,
        )
        return 1
    print(f"{prefix}: error: {message}", file=sys.stderr)
    return 2


def _quiet_broken_pipe() -> int:
    """stdout's reader went away (``| head``): stop quietly, as a SIGPIPE'd tool does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush at exit
    except (OSError, ValueError, AttributeError):
        pass
    return 128 + 13  # SIGPIPE


def _print_warning(message, category, filename, lineno, file=None, line=None, command="") -> None:
    print(f"aiayn {command}: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, or a bad flag (one line on stderr already)
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    args.argv = list(sys.argv[1:] if argv is None else argv)
    debug = getattr(args, "debug", False) or os.environ.get("AIAYN_DEBUG", "") not in ("", "0")
    previous = set_debugging(debug)
    try:
        return _run(args, debug)
    finally:
        set_debugging(previous)


def _run(args: argparse.Namespace, debug: bool) -> int:
    with warnings.catch_warnings():
        warnings.showwarning = lambda *w, **k: _print_warning(*w, **k, command=args.command)
        try:
            args.func(args)
            sys.stdout.flush()
        except BrokenPipeError:
            return _quiet_broken_pipe()
        except BaseException as error:
            if debug or isinstance(error, SystemExit):
                raise
            if not isinstance(error, Exception | KeyboardInterrupt):
                raise
            return _report(error, args.command)
    return 0
