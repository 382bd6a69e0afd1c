"""``serve``: models over HTTP (``aiayn.serve``; needs the serve extra)."""

from __future__ import annotations

import argparse

from aiayn.cli.args import (
    add_device_arguments,
    add_engine_argument,
    add_quantize_argument,
    check_placement,
    int_range,
)


def add_serve(sub) -> None:
    from aiayn.serve.config import ServeConfig

    p = sub.add_parser("serve", help="serve models over HTTP (LibreTranslate and OpenAI APIs)")
    p.add_argument("model_dir", nargs="+", help="model directories to serve")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int_range(0, 65535), default=8000)
    p.add_argument("--name", action="append", help="name of each model, in order (default: dir)")
    p.add_argument("--languages", action="append", help="of each model, in order: SRC-TGT or LANG")
    p.add_argument(
        "--ensemble",
        action="store_true",
        help="serve the model directories (translators) as one ensemble: their per-step "
        "probabilities averaged",
    )
    p.add_argument(
        "--threads", type=int_range(0), default=0, help="torch threads (0 = torch's default)"
    )
    add_quantize_argument(p)
    add_engine_argument(p)
    add_device_arguments(p)
    for name, (default, text) in ServeConfig.flags().items():
        p.add_argument(
            "--" + name.replace("_", "-"), type=type(default), default=default, help=text
        )
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> None:
    import dataclasses

    from aiayn.serve.config import ServeConfig

    try:
        from aiayn.serve.server import model_specs, run_server
    except ImportError as e:
        raise RuntimeError(
            f"serve needs the serve extra: pip install 'aiayn[serve]' ({e})"
        ) from None
    config = ServeConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ServeConfig)})
    check_placement(args)
    if config.glossary:  # a bad glossary fails before any model loads
        from aiayn.data.terminology import Glossary

        Glossary.read(config.glossary)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    specs = model_specs(
        args.model_dir,
        args.name,
        args.languages,
        args.quantize,
        args.engine,
        args.cache_dir,
        ensemble=args.ensemble,
        device=args.device,
        dtype=args.dtype,
    )
    run_server(specs, config, args.host, args.port)
