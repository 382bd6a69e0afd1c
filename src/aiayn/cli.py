"""Command line: parse arguments, build a config, call the library. No logic of its own."""

from __future__ import annotations

import argparse
import sys

from aiayn.config import ModelConfig


def cmd_params(args: argparse.Namespace) -> None:
    import torch

    from aiayn.model import build_model
    from aiayn.model.summary import format_table, parameter_table

    config = ModelConfig.preset(args.preset, family=args.family)
    with torch.device("meta"):  # count shapes without allocating the weights
        model = build_model(config)
    title = (
        f"{args.preset} {config.family}: d_model={config.d_model} n_heads={config.n_heads} "
        f"d_ff={config.d_ff} layers={config.n_encoder_layers}+{config.n_decoder_layers} "
        f"vocab={config.vocab_size} tie={config.tie_embeddings}"
    )
    print(format_table(parameter_table(model), title))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aiayn", description="The Transformer of 'Attention Is All You Need'."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("params", help="print a per-component parameter table of a preset")
    p.add_argument("preset", choices=list(ModelConfig.PRESETS))
    p.add_argument(
        "--family",
        default="encoder-decoder",
        choices=["encoder-decoder", "encoder-only", "decoder-only"],
    )
    p.set_defaults(func=cmd_params)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"aiayn {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
