"""``generate``: continue a prompt with a decoder-only model."""

from __future__ import annotations

import argparse

from aiayn.cli.args import (
    add_device_arguments,
    add_quantize_argument,
    check_placement,
    float_range,
    int_range,
    text_argument,
)
from aiayn.data.tokenizer import warn_unknown_characters


def add_generate(sub) -> None:
    p = sub.add_parser("generate", help="continue a prompt with a decoder-only model")
    p.add_argument("model_dir")
    p.add_argument("--prompt", default="", help="text to continue")
    p.add_argument("--max-new-tokens", type=int_range(0), default=200)
    p.add_argument("--temperature", type=float_range(0.0), default=0.8, help="0 = greedy")
    p.add_argument("--top-k", type=int_range(0), default=0, help="0 = no top-k filter")
    p.add_argument(
        "--top-p",
        type=float_range(0.0, 1.0, low_open=True),
        default=1.0,
        help="in (0, 1]; 1 = no nucleus filter",
    )
    p.add_argument(
        "--seed", type=int_range(0, 2**63 - 1), default=None, help="seed for reproducible samples"
    )
    p.add_argument(
        "--stop",
        action="append",
        metavar="TEXT",
        help="end the continuation before this text where it first appears (repeatable)",
    )
    add_quantize_argument(p)
    add_device_arguments(p)
    p.set_defaults(func=cmd_generate)


def cmd_generate(args: argparse.Namespace) -> None:
    from aiayn.api import Sampling, load_for

    sampling = Sampling(args.temperature, args.top_k or None, args.top_p, args.seed)
    check_placement(args)
    generator = load_for(
        "generate", args.model_dir, quantize=args.quantize, device=args.device, dtype=args.dtype
    )
    text = text_argument(args.prompt, "--prompt")
    warn_unknown_characters(generator.tokenizer, [text], "--prompt")
    (out,) = generator.generate(
        [text],
        max_new_tokens=args.max_new_tokens,
        sampling=sampling,
        stop_at_eos=False,
        stop=args.stop or (),
    )
    print(out.full_text)
