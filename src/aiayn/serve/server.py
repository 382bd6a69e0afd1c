"""The ``aiayn serve`` process: uvicorn running the app, with a graceful SIGTERM.

On SIGTERM (or Ctrl-C) uvicorn stops accepting connections and waits for the requests in
flight (at most the request timeout); the queues then finish their work and the process
exits with status 0.
"""

from __future__ import annotations

import errno
import importlib
import logging
import signal
import socket
import sys
from pathlib import Path

import uvicorn

from aiayn.serve.access import AccessConfig
from aiayn.serve.app import create_app
from aiayn.serve.config import FrontendConfig, ServeConfig
from aiayn.serve.models import ModelSpec, check_spec, default_name
from aiayn.serve.protocol import MAX_HEAD_BYTES, protocol_class
from aiayn.serve.redact import redact_target

log = logging.getLogger("aiayn.serve")


def model_specs(
    model_dirs: list[str],
    names: list[str] | None = None,
    languages: list[str] | None = None,
    quantize: str | None = None,
    engine: str = "auto",
    cache_dir: str | None = None,
    ensemble: bool = False,
    device: str = "cpu",
    dtype: str = "float32",
    argos_packages: str | None = None,
    load_only: list[str] | None = None,
) -> list[ModelSpec]:
    """``--name`` and ``--languages`` apply to the model directories in order, ``--quantize``,
    ``--engine``, ``--cache-dir``, ``--device`` and ``--dtype`` to all of them. ``ensemble``:
    the directories are one translator, an ensemble (named and given languages as one). A
    model directory may also be an Argos Translate package (``.argosmodel`` or a package
    folder) or a CTranslate2 model directory (``aiayn.interop.foreign``).

    ``argos_packages``: a packages directory as Argos Translate installs them, each of its
    packages served after the model directories, named by its folder (a package that cannot
    be served is skipped with a warning naming it); without it and without model
    directories, Argos Translate's own (``argos_packages_dir``) where it holds packages.
    ``load_only``: language codes (LibreTranslate's ``--load-only``): only the packages of
    the directory between two of them are served."""
    specs = _model_dir_specs(
        model_dirs, names, languages, quantize, engine, cache_dir, ensemble, device, dtype
    )
    if argos_packages is None and not model_dirs:
        argos_packages = argos_packages_dir()
    if argos_packages is not None:
        specs += _package_specs(
            Path(argos_packages), load_only, quantize, engine, cache_dir, device, dtype
        )
    elif load_only:
        raise ValueError("--load-only chooses among the packages of --argos-packages; give it")
    if not specs:
        where = f"in {argos_packages}" if argos_packages is not None else "given"
        raise ValueError(
            f"no model to serve: no model directory given, and no Argos Translate package "
            f"{where}{' between the --load-only languages' if load_only else ''} (give model "
            "directories, .argosmodel files, or --argos-packages DIR)"
        )
    return specs


def argos_packages_dir() -> Path | None:
    """Argos Translate's packages directory (``$ARGOS_PACKAGES_DIR``, its settings, else
    ``~/.local/share/argos-translate/packages``: where LibreTranslate's packages are installed)
    where it exists, else None."""
    from aiayn.interop.argos_package import packages_dir

    directory = packages_dir()
    return directory if directory.is_dir() else None


def _package_specs(
    directory: Path,
    load_only: list[str] | None,
    quantize: str | None,
    engine: str,
    cache_dir: str | None,
    device: str,
    dtype: str,
) -> list[ModelSpec]:
    """A spec for each package of the packages ``directory`` (``model_specs``)."""
    import warnings

    from aiayn.interop.argos_package import find_packages

    if not directory.is_dir():
        raise ValueError(f"--argos-packages {directory}: no such folder")
    specs = []
    for package in find_packages(directory):  # a broken one: warned about, skipped
        if load_only and not {package.source, package.target} <= set(load_only):
            continue
        spec = ModelSpec(
            package.path,
            package.name,
            None,
            quantize,
            engine,
            Path(cache_dir) if cache_dir else None,
            device=device,
            dtype=dtype,
        )
        try:
            check_spec(spec)
        except (ValueError, OSError) as e:  # a UserError too: read, but not servable here
            warnings.warn(f"{package.path}: skipped, it cannot be served: {e}", stacklevel=2)
            continue
        specs.append(spec)
    log.info("%d Argos Translate packages in %s", len(specs), directory)
    return specs


def _model_dir_specs(
    model_dirs: list[str],
    names: list[str] | None,
    languages: list[str] | None,
    quantize: str | None,
    engine: str,
    cache_dir: str | None,
    ensemble: bool,
    device: str,
    dtype: str,
) -> list[ModelSpec]:
    """The specs of the model directories given (``model_specs``)."""
    names, languages = names or [], languages or []
    if ensemble:
        if len(model_dirs) < 2:
            raise ValueError(f"--ensemble: {len(model_dirs)} model directory; give two or more")
        for flag, values in (("--name", names), ("--languages", languages)):
            if len(values) > 1:
                raise ValueError(f"--ensemble serves one model: give at most one {flag}")
        first = Path(model_dirs[0])
        spec = ModelSpec(
            first,
            names[0] if names else default_name(first),
            tuple(languages[0].split("-")) if languages else None,
            quantize,
            engine,
            Path(cache_dir) if cache_dir else None,
            members=tuple(Path(p) for p in model_dirs[1:]),
            device=device,
            dtype=dtype,
        )
        check_spec(spec)
        return [spec]
    for flag, values in (("--name", names), ("--languages", languages)):
        if len(values) > len(model_dirs):
            raise ValueError(f"{len(values)} {flag} for {len(model_dirs)} model directories")
    specs = []
    for i, path in enumerate(model_dirs):
        name = names[i] if i < len(names) else default_name(Path(path))
        langs = tuple(languages[i].split("-")) if i < len(languages) else None
        spec = ModelSpec(
            Path(path),
            name,
            langs,
            quantize,
            engine,
            Path(cache_dir) if cache_dir else None,
            device=device,
            dtype=dtype,
        )
        check_spec(spec)
        specs.append(spec)
    return specs


def listen_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound before any model loads: an address in use is one clear
    error (``OSError`` naming the address) rather than a failure after start-up.

    The protocol is named (IPPROTO_TCP, not 0): asyncio sets TCP_NODELAY only on connections
    accepted from such a socket, and without it a keep-alive client waits for its delayed
    ACK (~40 ms) between the response's head and body, which uvicorn writes apart."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        cause = e.strerror or str(e)
        if e.errno == errno.EADDRINUSE:
            cause += "; another process listens there: stop it or choose another --port"
        raise OSError(e.errno, f"cannot listen on {host}:{port}: {cause}") from None
    sock.set_inheritable(True)
    return sock


def run_server(
    specs: list[ModelSpec],
    config: ServeConfig,
    host: str,
    port: int,
    access: AccessConfig | None = None,
    frontend: FrontendConfig | None = None,
) -> int:
    """Serve until SIGTERM or Ctrl-C; 0 after a graceful stop, 2 if the models fail to load."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")
    sock = listen_socket(host, port)
    try:
        app = create_app(specs, config, access=access, frontend=frontend)
        return _serve(sock, app, config, host, port)
    finally:
        sock.close()


def http_stack() -> str:
    """What uvicorn serves with, chosen as it chooses: its C HTTP parser on libuv's event loop
    where they import (the serve extra), otherwise h11 on asyncio's own loop."""

    def imports(name: str) -> bool:
        try:
            importlib.import_module(name)
        except ImportError:
            return False
        return True

    parser = "httptools" if imports("httptools") else "h11"
    return f"{parser} on {'uvloop' if imports('uvloop') else 'asyncio'}"


class RedactKeys(logging.Filter):
    """On uvicorn's access log, whose record's arguments are (client, method, target,
    HTTP version, status): no API key written to the log, in any spelling of its name that
    the access check reads (``redact_target``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (*args[:2], redact_target(args[2]), *args[3:])
        return True


def server_config(
    app, config: ServeConfig, host: str, port: int, log_level: str = "info"
) -> uvicorn.Config:
    """uvicorn's settings for ``app``: a request head bounded in bytes and time
    (``aiayn.serve.protocol``), the connection's address as the client's, a graceful stop
    within the request timeout, and an access log (``--access-log``) without API keys."""
    settings = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=config.access_log,
        timeout_graceful_shutdown=int(config.timeout) + 5,
        http=protocol_class(),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        # the client is the connection's: uvicorn's default would take X-Forwarded-For's
        # word from any client on 127.0.0.1 (a proxy on this host passing a client's header
        # on), and a client could then name any address to the request limits;
        # --trust-forwarded-for is the one place that reads it
        proxy_headers=False,
    )
    access = logging.getLogger("uvicorn.access")  # set up by uvicorn.Config just now
    if not any(isinstance(f, RedactKeys) for f in access.filters):
        access.addFilter(RedactKeys())
    return settings


def _serve(sock, app, config: ServeConfig, host: str, port: int) -> int:
    server = uvicorn.Server(server_config(app, config, host, port))
    failure: list[str] = []

    def stop(error: str) -> None:
        failure.append(error)
        server.should_exit = True

    app.state.registry.on_error = stop
    # uvicorn re-raises the signal it stopped on once it has shut down; take it as a clean exit
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    shown = f"[{host}]" if ":" in host else host
    where = sock.getsockname()[1]
    log.info("serving on http://%s:%d (%s; Ctrl-C to stop)", shown, where, http_stack())
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    except SystemExit as e:  # uvicorn exits 1 when it cannot start
        if e.code:
            raise RuntimeError(f"could not serve on {host}:{port} (see the log above)") from None
    if failure:
        raise ValueError(f"could not load the models: {failure[0]}")
    return 0
