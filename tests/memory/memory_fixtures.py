"""Helpers for the memory profile's tests and benchmark: a fresh database, kgr's memory
server and the reference server (npm @modelcontextprotocol/server-memory) over stdio."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import anyio
import pytest

REPO = Path(__file__).resolve().parents[2]
REFERENCE_VERSION = "2026.8.31"  # pinned in .ci/run
REFERENCE = REPO / ".ci" / "node" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
INSTALL = f"npm install --prefix .ci/node @modelcontextprotocol/server-memory@{REFERENCE_VERSION} (as .ci/run does)"


def reference_or_skip() -> tuple[str, Path]:
    """(node, the reference server's script); skip when absent, but fail under CI=true."""
    node = shutil.which("node")
    missing = None
    if node is None:
        missing = "node is not installed"
    elif not REFERENCE.is_file():
        missing = f"the reference memory server is not installed: {INSTALL}"
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(missing)
        pytest.skip(missing)
    return node, REFERENCE


def reference_params(memory_file: Path):
    from mcp import StdioServerParameters

    node, script = reference_or_skip()
    return StdioServerParameters(command=node, args=[str(script)], env={"MEMORY_FILE_PATH": str(memory_file)})


def kgr_params(db: Path, *args: str):
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "kgr", "serve", "--profile", "memory", "--db", str(db), *args],
        env={"KGR_REDACT_KEY": "test-key"},
    )


def run_sessions(*pairs):
    """Run ``await fn(client)`` for each (server params, fn), one after another; their results."""
    from mcp import Client

    async def main():
        out = []
        for params, fn in pairs:
            async with Client(params) as client:
                out.append(await fn(client))
        return out

    return anyio.run(main)


def in_memory(server, fn):
    from mcp import Client

    async def main():
        async with Client(server) as client:
            return await fn(client)

    return anyio.run(main)


def norm_graph(result: dict) -> dict:
    """A graph result (entities and relations) normalised for order; other keys dropped."""
    return {
        "entities": sorted((e["name"], e["entityType"], tuple(e["observations"])) for e in result.get("entities", [])),
        "relations": sorted((r["from"], r["to"], r["relationType"]) for r in result.get("relations", [])),
    }


@pytest.fixture()
def memory_db(tmp_path) -> Path:
    from kgr.store import Store

    path = tmp_path / "memory.sqlite"
    Store(path).close()
    return path


@pytest.fixture()
def memory_service(memory_db):
    from kgr import config
    from kgr.mcp import server as serve

    svc = serve.Service(memory_db, config.load(None))
    yield svc
    svc.close()


@pytest.fixture()
def memory_server(memory_service):
    from kgr.mcp import server as serve

    return serve.build_server(memory_service, "memory")
