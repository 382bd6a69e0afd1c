"""``classify`` and ``embed``: encoder-only models over lines of stdin."""

from __future__ import annotations

import argparse
import sys

from aiayn.cli.args import (
    add_device_arguments,
    add_quantize_argument,
    add_stdin_arguments,
    check_placement,
    stdin_lines,
)


def add_classify(sub) -> None:
    p = sub.add_parser("classify", help="label each line of stdin: label<TAB>probability")
    p.add_argument(
        "model_dir", nargs="+", help="a classifier; several: their probabilities are averaged"
    )
    add_stdin_arguments(p)
    add_quantize_argument(p)
    add_device_arguments(p)
    p.set_defaults(func=cmd_classify)


def cmd_classify(args: argparse.Namespace) -> None:
    from aiayn.api import ensemble_probabilities, load_for

    check_placement(args)
    texts = list(stdin_lines(args.errors))
    classifiers = [
        load_for("classify", d, quantize=args.quantize, device=args.device, dtype=args.dtype)
        for d in args.model_dir
    ]
    labels, probs = ensemble_probabilities(classifiers, texts)
    for row in probs:  # (C,)
        best = int(row.argmax())
        print(f"{labels[best]}\t{row[best]:.4f}")


def add_embed(sub) -> None:
    p = sub.add_parser("embed", help="embed each line of stdin: one JSON list of floats per line")
    p.add_argument("model_dir", help="an encoder-only model (pooled as its model.pooling says)")
    p.add_argument("--normalize", action="store_true", help="scale each vector to unit length")
    p.add_argument("--chunk", type=int, default=2000, help="lines read and embedded at a time")
    add_quantize_argument(p)
    add_device_arguments(p)
    add_stdin_arguments(p)
    p.set_defaults(func=cmd_embed)


def cmd_embed(args: argparse.Namespace) -> None:
    """One JSON list of floats (the pooled encoder states) per line of stdin, in order."""
    import warnings

    from aiayn.api import load_for

    if args.chunk < 1:
        raise ValueError(f"--chunk must be >= 1, got {args.chunk}")
    check_placement(args)
    encoder = load_for(
        "embed", args.model_dir, quantize=args.quantize, device=args.device, dtype=args.dtype
    )
    stdin = stdin_lines(args.errors)
    while True:  # stream: read a chunk, embed it (length-sorted inside), print in order
        lines = [line for _, line in zip(range(args.chunk), stdin, strict=False)]
        if not lines:
            break
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            vectors = encoder.embed(lines, normalize=args.normalize)  # (N, D)
        for warning in caught:
            print(f"warning: {warning.message}", file=sys.stderr)
        for row in vectors.numpy():  # float32's shortest exact decimal form
            print("[" + ", ".join(str(x) for x in row) + "]")
        sys.stdout.flush()
