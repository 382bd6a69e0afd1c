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
    p.add_argument(
        "model_dir",
        nargs="*",
        help="model directories to serve: aiayn's, Argos Translate packages (.argosmodel or "
        "an installed package folder) or CTranslate2 model directories; none: the Argos "
        "Translate packages installed (--argos-packages' default)",
    )
    p.add_argument(
        "--argos-packages",
        metavar="DIR",
        help="serve every translation package of this Argos Translate packages directory too "
        "(one model a pair, loaded on first use; pairs between them pivot); by default, "
        "where no model directory is given: Argos Translate's own ($ARGOS_PACKAGES_DIR, else "
        "~/.local/share/argos-translate/packages), where LibreTranslate installs them",
    )
    p.add_argument(
        "--load-only",
        type=lambda text: [c.strip() for c in text.split(",") if c.strip()],
        metavar="CODES",
        help="with --argos-packages: only the packages between these languages (comma "
        "separated, e.g. en,de,fr), as LibreTranslate's --load-only",
    )
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
        "--threads",
        type=int_range(0),
        default=0,
        help="decoding threads of each decoder (--decoders), torch's and CTranslate2's (0: "
        "the cores this process may use, less one for the HTTP side, shared among the "
        "decoders, at least 1); given without --decoders: one decoder",
    )
    add_quantize_argument(p)
    add_engine_argument(p)
    add_device_arguments(p)
    aliases = {"max_chars": ["--char-limit"], "max_texts": ["--batch-limit"]}  # LibreTranslate's
    for name, (default, text) in ServeConfig.flags().items():
        flags = ["--" + name.replace("_", "-"), *aliases.get(name, [])]
        text = text.replace("%", "%%")  # argparse formats help with %
        if isinstance(default, bool):  # a switch
            p.add_argument(*flags, dest=name, action="store_true", help=text)
        else:
            p.add_argument(*flags, dest=name, type=type(default), default=default, help=text)
    add_access_arguments(p)
    p.set_defaults(func=cmd_serve)


def add_access_arguments(p: argparse.ArgumentParser) -> None:
    """API keys, request limits and LibreTranslate's settings, by LibreTranslate's names."""
    from aiayn.serve.keys import DEFAULT_DB

    g = p.add_argument_group("access and limits (LibreTranslate's flags)")
    g.add_argument(
        "--api-keys",
        action="store_true",
        help="require an API key (aiayn keys add) on every route that runs a model",
    )
    g.add_argument(
        "--api-keys-db",
        "--api-keys-db-path",
        default=DEFAULT_DB,
        help=f"the API keys' SQLite file (default: {DEFAULT_DB} here)",
    )
    g.add_argument(
        "--require-api-key-origin",
        default="",
        metavar="REGEX",
        help="a request whose Origin header matches (whole) needs no key (your own page), "
        "any other needs one; without --api-keys, or with no key database, the server is "
        "origin-only (no key is valid)",
    )
    g.add_argument(
        "--under-attack",
        action="store_true",
        help="with --api-keys: every request needs a key, whatever its Origin",
    )
    g.add_argument(
        "--get-api-key-link", default="", help="where to get a key, named to a client without one"
    )
    for flag, alias, per in (
        ("--requests-per-minute", "--req-limit", "minute"),
        ("--requests-per-hour", "--hourly-req-limit", "hour"),
        ("--requests-per-day", "--daily-req-limit", "day"),
    ):
        g.add_argument(
            flag,
            alias,
            dest=alias.removeprefix("--").replace("-", "_"),
            type=int,
            default=0,
            help=f"requests per {per} per API key or client address (0 or -1: no limit; "
            "a key's own limit replaces it); 429 with Retry-After above",
        )
    g.add_argument(
        "--key-failures-limit",
        type=int,
        default=10,
        metavar="N",
        help="with --api-keys: wrong API keys per minute per client address (0 or -1: no "
        "limit); above it, every key from that address (a right one too) is answered 429 "
        "with Retry-After until the minute's window frees; default 10",
    )
    g.add_argument(
        "--shared-storage",
        "--req-limit-storage",
        default="memory://",
        help="where the limits count: memory:// (this process) or redis://HOST:PORT (shared "
        "by every server using it)",
    )
    g.add_argument(
        "--trust-forwarded-for",
        action="store_true",
        help="the client address is X-Forwarded-For's last, the one the proxy in front of "
        "this server added (only behind such a proxy)",
    )
    g.add_argument(
        "--metrics",
        action="store_true",
        help="serve Prometheus metrics at /metrics (401 to every request without one of the "
        "next two)",
    )
    g.add_argument(
        "--metrics-auth-token",
        default="",
        metavar="TOKEN",
        help="with --metrics: /metrics needs Authorization: Bearer TOKEN",
    )
    g.add_argument(
        "--metrics-open",
        action="store_true",
        help="with --metrics: /metrics answers anyone (LibreTranslate's --metrics without a token)",
    )
    g.add_argument(
        "--alternatives-limit",
        type=int,
        default=-1,
        help="most alternatives per text on /translate (-1: --max-beam's)",
    )
    g.add_argument("--suggestions", action="store_true", help="store /suggest's suggestions")
    g.add_argument(
        "--suggestions-db", default="aiayn-suggestions.db", help="the suggestions' SQLite file"
    )
    g.add_argument(
        "--suggestions-max-rows",
        type=int,
        default=10_000,
        metavar="N",
        help="suggestions kept at most (the oldest are removed first); default 10000",
    )
    g.add_argument("--disable-web-ui", action="store_true", help="no page at /")
    g.add_argument(
        "--frontend-timeout",
        type=int,
        default=500,
        help="/frontend/settings' frontendTimeout (milliseconds)",
    )
    g.add_argument(
        "--frontend-language-source",
        default="auto",
        metavar="CODE",
        help="the source language /frontend/settings names for a page to start with: a served "
        "code, or auto (each text's language detected among the served ones) (default: auto)",
    )
    g.add_argument(
        "--frontend-language-target",
        default="locale",
        metavar="CODE",
        help="the target language /frontend/settings names: a served code, or locale (the "
        "browser's first language served, from Accept-Language) (default: locale)",
    )


def cmd_serve(args: argparse.Namespace) -> None:
    import dataclasses

    from aiayn.errors import UserError
    from aiayn.serve.config import ServeConfig, serving_threads

    try:
        from aiayn.serve.server import model_specs, run_server
    except ImportError as e:
        raise RuntimeError(
            f"serve needs the serve extra: pip install 'aiayn[serve]' ({e})"
        ) from None
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.config import FrontendConfig

    config = ServeConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ServeConfig)})
    access = AccessConfig(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(AccessConfig)}
    )
    frontend = FrontendConfig(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(FrontendConfig)}
    )
    check_placement(args)
    if args.engine == "ctranslate2" and (config.glossary or config.kept):
        flag = "--glossary" if config.glossary else "--keep-placeholders / --keep"
        raise UserError(
            f"{flag}: CTranslate2 has no constrained search, so --engine ctranslate2 would "
            "refuse every request holding a term; serve with --engine auto (CTranslate2 for "
            "the rest) or --engine torch"
        )
    import torch

    if args.threads and not config.decoders:  # --threads alone: one decoder of that many
        config = dataclasses.replace(config, decoders=1)
    torch.set_num_threads(args.threads or serving_threads(config.model_decoders))
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
        argos_packages=args.argos_packages,
        load_only=args.load_only,
    )
    run_server(specs, config, args.host, args.port, access=access, frontend=frontend)
