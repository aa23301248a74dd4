"""Serving lightmem: REST API (+ viewer), MCP server, tenants and API keys.

Needs the ``server`` extra (``pip install 'lightmem[server]'``)."""

__all__ = []
