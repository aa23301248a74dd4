"""``lightmem serve``, ``lightmem mcp`` and ``lightmem keys``."""

from __future__ import annotations

import argparse
import errno
import json
import os
import socket
import sys
from pathlib import Path

from lightmem.cli.args import load_config, read_config
from lightmem.embed.base import importable
from lightmem.errors import BackendError, InvalidInputError
from lightmem.server.env import (
    DEFAULT_MAX_BODY,
    MAX_BODY_VAR,
    SERVER_CONFIG_VAR,
    TENANT_MAX_MB_VAR,
    bytes_from_env,
    config_from_env,
    tenant_max_mb_from_env,
)

__all__ = ["SERVER_MODULES", "dispatch", "require_server_extra"]

#: The modules the ``server`` extra installs (pyproject.toml); the servers and the server
#: benchmarks need them all.
SERVER_MODULES = ("fastapi", "uvicorn", "fastmcp", "threadpoolctl", "swagger_ui_bundle")


def require_server_extra(what: str, *also: str) -> None:
    """Refuse to start ``what`` when a module of the ``server`` extra (or one of ``also``) is
    missing, with the pip line, rather than fail on an import halfway through."""
    missing = [m for m in (*SERVER_MODULES, *also) if not importable(m)]
    if missing:
        raise BackendError(
            f"{what} needs: pip install 'lightmem[server]' (not installed: {', '.join(missing)})"
        )


def dispatch(args: argparse.Namespace) -> int:
    """``keys``, ``serve`` and ``mcp``. The HTTP servers keep each tenant's store under
    ``--data-dir`` (or ``--dsn``): a ``--store``, or a ``--config`` naming a store, is refused
    (by :class:`TenantPool`) rather than ignored; ``mcp`` over stdio serves the ``--store``."""
    # The key registry needs no server package: ``keys`` works on a core install.
    from lightmem.server.tenancy import TenantPool, check_server_config

    dsn = args.dsn or os.environ.get("LIGHTMEM_PG_DSN") or None
    if args.command == "keys":
        if dsn is None and args.keys != "create" and not Path(args.data_dir).is_dir():
            # a mistyped directory would otherwise be created and list no keys
            raise InvalidInputError(
                f"--data-dir: no directory {args.data_dir!r}; 'keys create' makes one"
            )
        if dsn is None:
            Path(args.data_dir).mkdir(parents=True, exist_ok=True)
        keys = TenantPool(None if dsn else args.data_dir, dsn=dsn).keys()
        if args.keys == "create":
            key = keys.create(args.tenant)
            print(json.dumps({"tenant": args.tenant, "key": key, "note": "shown once; store it"}))
        elif args.keys == "list":
            for k in keys.list():
                print(json.dumps({"prefix": k.prefix, "tenant": k.tenant, "revoked": k.revoked}))
        else:
            keys.revoke(args.prefix)
            print(json.dumps({"revoked": args.prefix}))
        return 0
    require_server_extra(f"lightmem {args.command}")
    import uvicorn

    from lightmem.server.access_log import log_config
    from lightmem.server.connections import uvicorn_options

    if args.command == "mcp" and args.transport == "stdio":
        if args.tenant_max_mb is not None:
            raise InvalidInputError(
                "--tenant-max-mb: for --transport http; over stdio the --config's "
                'store.max_mb limits the --store file (e.g. {"store": {"max_mb": 500}})'
            )
        return _stdio_mcp(args)
    if args.store is not None:
        raise InvalidInputError(
            f"--store: lightmem {args.command} keeps each tenant's store under --data-dir "
            "(or --dsn); remove it"
        )
    # --config, else the variable uvicorn --factory reads (a flag wins over the environment)
    tenant_config = read_config(args) if args.config else config_from_env(SERVER_CONFIG_VAR)
    check_server_config(tenant_config)  # here too: serve's workers would only log it
    _check_listen(args.host, args.port)  # before saying it listens
    if args.command == "serve":
        if args.max_body_mb is None:
            max_body = bytes_from_env(MAX_BODY_VAR, DEFAULT_MAX_BODY)
        elif args.max_body_mb > 0:
            max_body = int(args.max_body_mb * 1024 * 1024)
        else:
            raise InvalidInputError("--max-body-mb: must be positive")
        if args.workers < 1:
            raise InvalidInputError("--workers: must be at least 1")
        Path(args.data_dir).mkdir(parents=True, exist_ok=True)
        # Worker processes rebuild the app from the environment (uvicorn's factory mode);
        # every process opens the same tenant files, which SQLite's WAL mode allows.
        os.environ["LIGHTMEM_DATA_DIR"] = str(Path(args.data_dir).resolve())
        os.environ["LIGHTMEM_SERVER_DSN"] = dsn or ""
        os.environ[MAX_BODY_VAR] = str(max_body)
        if args.tenant_max_mb is not None:  # else the variable as it is (the workers read it)
            os.environ[TENANT_MAX_MB_VAR] = str(args.tenant_max_mb)
        tenant_max_mb_from_env()  # read here too: the workers would only log it
        os.environ[SERVER_CONFIG_VAR] = json.dumps(tenant_config)
        _warn_public(args.host)
        base = _url(args.host, args.port)
        _say(
            f"lightmem serve: REST API {base}/v1, OpenAPI docs {base}/docs, viewer {base}/ui/ "
            f"({args.workers} worker{'s' if args.workers > 1 else ''}; Ctrl-C stops)"
        )
        uvicorn.run(
            "lightmem.server.rest:app_from_env",
            factory=True,
            host=args.host,
            port=args.port,
            workers=args.workers,
            log_level="warning",
            log_config=log_config(not args.no_access_log),
            **uvicorn_options(),
        )
        _say("lightmem serve: stopped")
        return 0
    from lightmem.server.mcp import http_app
    from lightmem.server.tenancy import single_threaded_blas

    single_threaded_blas()
    max_mb = args.tenant_max_mb or tenant_max_mb_from_env()
    pool = TenantPool(None if dsn else args.data_dir, tenant_config, dsn=dsn, tenant_max_mb=max_mb)
    keys = pool.keys()
    _warn_public(args.host)
    _say(
        f"lightmem mcp: streamable HTTP at {_url(args.host, args.port)}/mcp "
        "(clients send Authorization: Bearer <key>; Ctrl-C stops)"
    )
    app = http_app(pool, keys)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        log_config=log_config(not args.no_access_log),
        **uvicorn_options(),
    )
    pool.close()
    _say("lightmem mcp: stopped")
    return 0


def _stdio_mcp(args: argparse.Namespace) -> int:
    from lightmem.server.mcp import create_mcp
    from lightmem.server.tenancy import open_tenant, single_threaded_blas

    config = load_config(args)
    single_threaded_blas()
    local = open_tenant("local", config)
    create_mcp(lambda: local).run(transport="stdio", show_banner=False)
    local.memory.close()
    return 0


def _check_listen(host: str, port: int) -> None:
    """Refuse an address the server could not listen on (taken, not this machine's, a name
    that does not resolve) before announcing it, with the flag to change. It binds as
    uvicorn does: IPv6 for a host with a colon, else IPv4."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except socket.gaierror as exc:
            raise InvalidInputError(f"--host: cannot listen on {host!r}: {exc.strerror}") from exc
        except OSError as exc:
            flag = "--port" if exc.errno == errno.EADDRINUSE else "--host"
            raise InvalidInputError(
                f"{flag}: cannot listen on {_url(host, port)}: {exc.strerror or exc}"
            ) from exc


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _warn_public(host: str) -> None:
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: listening on {host}, reachable beyond this machine", file=sys.stderr)
