"""``lightmem serve``, ``lightmem mcp`` and ``lightmem keys``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lightmem.errors import BackendError, InvalidInputError


def dispatch(args: argparse.Namespace, config: dict[str, Any]) -> int:
    try:
        from lightmem.server.tenancy import KeyRegistry, TenantPool
    except ImportError as exc:  # pragma: no cover - without the extra
        raise BackendError("serving needs: pip install 'lightmem[server]'") from exc
    if args.command == "keys":
        Path(args.data_dir).mkdir(parents=True, exist_ok=True)
        keys = KeyRegistry(Path(args.data_dir) / "keys.db")
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
    import uvicorn

    tenant_config = {k: v for k, v in config.items() if k != "store"}
    if args.command == "serve":
        from lightmem.server.rest import create_app

        if args.max_body_mb <= 0:
            raise InvalidInputError("--max-body-mb: must be positive")
        Path(args.data_dir).mkdir(parents=True, exist_ok=True)
        pool = TenantPool(args.data_dir, tenant_config)
        app = create_app(
            pool,
            KeyRegistry(Path(args.data_dir) / "keys.db"),
            max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        )
        _warn_public(args.host)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        pool.close()
        return 0
    from lightmem.server.mcp import KeyVerifier, create_mcp, http_resolver
    from lightmem.server.tenancy import open_tenant

    if args.transport == "stdio":
        local = open_tenant("local", config)
        create_mcp(lambda: local).run(transport="stdio", show_banner=False)
        local.memory.close()
        return 0
    Path(args.data_dir).mkdir(parents=True, exist_ok=True)
    pool = TenantPool(args.data_dir, tenant_config)
    keys = KeyRegistry(Path(args.data_dir) / "keys.db")
    server = create_mcp(http_resolver(pool), auth=KeyVerifier(keys))
    _warn_public(args.host)
    uvicorn.run(server.http_app(path="/mcp"), host=args.host, port=args.port, log_level="warning")
    pool.close()
    return 0


def _warn_public(host: str) -> None:
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: listening on {host}, reachable beyond this machine", file=sys.stderr)
