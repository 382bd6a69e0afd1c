"""What several commands share: argument types and groups, reading stdin, naming output."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator
from pathlib import Path

from aiayn.api.device import DTYPES, Placement, placement
from aiayn.api.engine import ENGINES
from aiayn.errors import UserError, decode_utf8
from aiayn.fileio import check_replaceable


def int_range(low: int, high: int | None = None):
    """An argparse ``type``: an integer in [low, high] (no upper bound when ``high`` is None)."""
    allowed = f">= {low}" if high is None else f"in [{low}, {high}]"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer {allowed}, got {text!r}"
            ) from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {value}")
        return value

    return parse


def float_range(low: float, high: float = math.inf, low_open: bool = False):
    """An argparse ``type``: a finite number in [low, high] ((low, high] with ``low_open``);
    NaN and infinities are refused."""
    bound = "(" if low_open else "["
    allowed = f"a finite number >= {low}" if high == math.inf else f"in {bound}{low}, {high}]"
    if low_open and high == math.inf:
        allowed = f"a finite number > {low}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        too_low = value <= low if low_open else value < low
        if not math.isfinite(value) or too_low or value > high:
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text}")
        return value

    return parse


def add_stdin_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--errors",
        choices=("strict", "replace", "ignore"),
        default="strict",
        help="bytes of stdin that are not UTF-8: an error naming the line (strict), read as "
        "U+FFFD (replace) or dropped (ignore)",
    )


def add_search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--beam",
        type=int_range(1),
        help="beam size (1 = greedy; the paper: 4); default 1, for an Argos Translate package "
        "Argos Translate's max(N, 4) (N: --nbest)",
    )
    p.add_argument(
        "--lenpen",
        type=float_range(0.0),
        help="length penalty alpha >= 0 (§6.1); default 0.6, for an Argos Translate package "
        "Argos Translate's 0.2 (CTranslate2's penalty, log P / |Y|**alpha)",
    )
    p.add_argument(
        "--max-len-offset",
        type=int_range(0),
        help="max output length = source length + N (N >= 0); default 50, for an Argos "
        "Translate package none (up to 256 tokens, as Argos Translate decodes)",
    )
    p.add_argument(
        "--early-stop",
        action="store_true",
        help="beam: stop a sentence once its best live hypothesis, finished now, would lose "
        "(faster; the default stops only when no live hypothesis can still win)",
    )


def add_quantize_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quantize",
        choices=["int8"],
        help="quantize the linear layers after loading (CPU; int8: dynamic int8, faster)",
    )


def add_device_arguments(p: argparse.ArgumentParser) -> None:
    """``--device`` and ``--dtype``: where the model runs and its weights' precision
    (``aiayn.api.device``); ``check_placement`` reads them before any work."""
    p.add_argument(
        "--device",
        default="auto",
        metavar="{auto,cpu,cuda,cuda:N}",
        help="where the model runs: auto (the default) is cuda when torch finds a CUDA GPU, "
        "else cpu (cpu for int8 layers); cuda:N is GPU N",
    )
    p.add_argument(
        "--dtype",
        choices=tuple(DTYPES),
        default="float32",
        help="the floating weights' dtype, cast after loading (torch engine): float32 (the "
        "default, as saved), bfloat16, or float16 (CUDA only)",
    )


def check_placement(args: argparse.Namespace) -> Placement:
    """``--device`` and ``--dtype`` resolved and checked against ``--quantize`` and
    ``--engine``: a ``UserError`` naming the flag, before any model loads or input is read."""
    return placement(
        args.device,
        args.dtype,
        quantize=getattr(args, "quantize", None),
        engine=getattr(args, "engine", "torch"),
    )


def add_engine_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="what decodes: auto (the default: CTranslate2 for greedy and beam search where it "
        "is installed and runs the model as asked, aiayn's PyTorch model for the rest: n-best "
        "lists, scores, glossary terms, kept spans...), torch (aiayn's model), or ctranslate2 "
        "(converted once and cached; pip install 'aiayn[ctranslate2]')",
    )
    p.add_argument(
        "--cache-dir",
        help="where the ctranslate2 engine caches its conversion (default: $AIAYN_CACHE_DIR, "
        "else MODEL/.ctranslate2, else, where MODEL cannot be written, "
        "$XDG_CACHE_HOME/aiayn/ctranslate2), and, under argos/, where an Argos Translate "
        "package is extracted and imported (default: $AIAYN_CACHE_DIR/argos, else "
        "$XDG_CACHE_HOME/aiayn/argos)",
    )


def load_translator(command: str, args: argparse.Namespace):
    """The translator of ``args.model_dir`` with the engine and device flags
    (``add_engine_argument``, ``add_device_arguments``); several directories (translate):
    their ensemble."""
    from aiayn.api import load, load_for

    dirs = args.model_dir if isinstance(args.model_dir, list) else [args.model_dir]
    if len(dirs) > 1:
        if args.engine == "ctranslate2":
            raise UserError(
                f"--engine {args.engine} decodes one model; an ensemble decodes with --engine torch"
            )
        return load(dirs, quantize=args.quantize, device=args.device, dtype=args.dtype)
    return load_for(
        command,
        dirs[0],
        quantize=args.quantize,
        device=args.device,
        dtype=args.dtype,
        engine=args.engine,
        cache_dir=args.cache_dir,
    )


SEARCH_DEFAULTS = {"beam": 1, "lenpen": 0.6, "max_len_offset": 50}  # Translator.translate's


def search_options(args: argparse.Namespace) -> dict:
    """The search flags given (``add_search_arguments``); one not given is left out, so that
    the translator's own default applies (an Argos Translate package's are Argos's)."""
    given = dict(beam=args.beam, lenpen=args.lenpen, max_len_offset=args.max_len_offset)
    return {**{k: v for k, v in given.items() if v is not None}, "early_stop": args.early_stop}


def file_lines(path: str, what: str) -> Iterator[str]:
    """Lines of the UTF-8 file ``path`` without their line ending; a missing file or bytes
    that are not UTF-8 are an error naming ``what`` (the option), the file and the line."""
    try:
        stream = open(path, "rb")  # noqa: SIM115 (closed when the lines run out)
    except OSError as e:
        raise UserError(f"{what} {path}: {e.strerror or e}") from None
    with stream:
        for number, raw in enumerate(stream, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise UserError(
                    f"{what} {path}, line {number}: not UTF-8 (byte 0x{raw[e.start]:02x} at "
                    f"column {e.start + 1})"
                ) from None
            yield text.rstrip("\r\n")


def stdin_lines(errors: str) -> Iterator[str]:
    """Lines of stdin without their line ending; bytes that are not UTF-8 are an error naming
    the line, unless ``errors`` is "replace" (U+FFFD) or "ignore"."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text stream (tests): already decoded
        for line in sys.stdin:
            yield line.rstrip("\r\n")
        return
    for number, raw in enumerate(stream, 1):
        try:
            text = raw.decode("utf-8", errors)
        except UnicodeDecodeError as e:
            raise UserError(
                f"stdin, line {number}: not UTF-8 (byte 0x{raw[e.start]:02x} at column "
                f"{e.start + 1}); pass --errors replace to read bad bytes as U+FFFD, or convert "
                "the input, e.g. iconv -f latin1 -t utf-8"
            ) from None
        yield text.rstrip("\r\n")


def stdin_text(errors: str) -> str:
    """All of stdin as one text (its line endings kept); bytes that are not UTF-8 as in
    ``stdin_lines``."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text stream (tests): already decoded
        return sys.stdin.read()
    fix = (
        "pass --errors replace to read bad bytes as U+FFFD, or convert the input, e.g. "
        "iconv -f latin1 -t utf-8"
    )
    return decode_utf8(stream.read(), "stdin", errors, fix)


def text_argument(value: str, flag: str) -> str:
    """A text given on the command line; bytes that were not UTF-8 are an error."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UserError(f"{flag}: the text is not UTF-8; give it in UTF-8") from None
    return value


def fresh_output(out: Path, force: bool, keep=()) -> Path:

    check_replaceable(out, force, keep)
    return out
