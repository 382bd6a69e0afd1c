"""The ``aiayn`` command line: one module per command (or small group), each declaring its
arguments beside its handler, over the Python API (``aiayn.api``)."""

from aiayn.cli.args import stdin_lines as _stdin_lines
from aiayn.cli.command import build_parser, main

__all__ = ["_stdin_lines", "build_parser", "main"]
