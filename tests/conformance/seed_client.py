"""Helpers shared by the seed conformance tests (one module per seed in ../shared/seeds): a real `kgr serve`
subprocess driven over stdio by the MCP Python SDK client, with the seed's own argument names."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

if sys.version_info < (3, 11):  # anyio depends on the backport there
    from exceptiongroup import BaseExceptionGroup


def serve_params(db: Path, *args: str, profile: str = "all", env: dict[str, str] | None = None):
    """`python -m kgr serve --profile PROFILE --db DB ARGS...` as stdio server parameters."""
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "kgr", "serve", "--profile", profile, "--db", str(db), *args],
        env={"KGR_REDACT_KEY": "test-key", **(env or {})},
    )


def session(params, fn, errlog: Path | None = None):
    """Run ``await fn(client)`` against one server subprocess (kept alive for the whole of fn); its
    result. The server's stderr goes to ``errlog`` when given."""
    from mcp import Client
    from mcp.client.stdio import stdio_client

    async def main():
        if errlog is None:
            async with Client(params) as client:
                return await fn(client)
        with open(errlog, "a") as err:
            async with Client(stdio_client(params, errlog=err)) as client:
                return await fn(client)

    try:
        return anyio.run(main)
    except BaseExceptionGroup as group:  # the client's task group wraps one protocol error
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


def payload(result) -> dict:
    """A successful tool result's JSON answer (structured content, else the text block)."""
    assert not result.is_error, text(result)
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def text(result) -> str:
    """All text blocks of a tool result, joined (an error's message)."""
    return " ".join(getattr(c, "text", "") for c in result.content)
