"""Fixtures and helpers for `kgr serve` (tests/serve and the M tests in tests/reliability): a knowledge base built once from examples/ with the real model,
servers on it, and real MCP clients (in memory, stdio subprocess, streamable HTTP)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

REPO = Path(__file__).resolve().parents[2]
INSPECTOR = REPO / ".ci" / "node" / "node_modules" / ".bin" / "mcp-inspector"


def build_kb(dest: Path) -> tuple[Path, Path]:
    """A copy of examples/ at ``dest`` ingested into dest/kb.sqlite (real model): (db, root)."""
    shutil.copytree(REPO / "examples", dest, ignore=shutil.ignore_patterns("*.sqlite*"))
    db = dest / "kb.sqlite"
    env = {**os.environ, "KGR_REDACT_KEY": "test-key"}
    proc = subprocess.run([sys.executable, "-m", "kgr", "ingest", str(dest / "kb"), "--db", str(db), "--config",
                           str(dest / "config.yaml")], capture_output=True, text=True, timeout=600, env=env,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return db, dest / "kb"


_BUILT: dict[str, tuple[Path, Path]] = {}


@pytest.fixture(scope="session")
def built_kb() -> tuple[Path, Path]:
    """Built once per test process, whichever test directory asks first."""
    if "kb" not in _BUILT:
        import atexit
        import tempfile

        tmp = Path(tempfile.mkdtemp(prefix="kgr-serve-"))
        atexit.register(shutil.rmtree, tmp, True)
        _BUILT["kb"] = build_kb(tmp / "examples")
    return _BUILT["kb"]


@pytest.fixture()
def kb_copy(built_kb, tmp_path) -> tuple[Path, Path]:
    """A private copy of the built knowledge base (database and folder) a test may change."""
    src = built_kb[0].parent
    dest = tmp_path / "examples"
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("*.writer.lock"))
    return dest / "kb.sqlite", dest / "kb"


@pytest.fixture(scope="session")
def kb_config(built_kb):
    from kgr import config

    return config.load(str(built_kb[0].parent / "config.yaml"))


def make_service(db, cfg, root=None, **kw):
    from kgr import serve

    return serve.Service(Path(db), cfg, root=Path(root) if root else None, **kw)


@pytest.fixture(scope="session")
def service(built_kb, kb_config):
    svc = make_service(built_kb[0], kb_config)
    yield svc
    svc.close()


def call_with(server, fn):
    """Run ``await fn(client)`` against ``server`` through the SDK's in-memory client."""
    from mcp import Client

    async def main():
        async with Client(server) as client:
            return await fn(client)

    try:
        return anyio.run(main)
    except BaseExceptionGroup as group:  # the client's task group wraps a protocol error
        leaves = list(_leaves(group))
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


def _leaves(group):
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


class Mcp:
    """A synchronous face over the SDK's in-memory client, one connection per call."""

    def __init__(self, server):
        self.server = server

    def tools(self):
        return call_with(self.server, lambda c: c.list_tools()).tools

    def call(self, name, args=None):
        return call_with(self.server, lambda c: c.call_tool(name, args or {}))

    def read(self, uri):
        return call_with(self.server, lambda c: c.read_resource(uri))


@pytest.fixture(scope="session")
def mcp_all(service):
    from kgr import serve

    return Mcp(serve.build_server(service, "all"))


def error_text(result) -> str:
    assert result.is_error, result
    return " ".join(getattr(c, "text", "") for c in result.content)


def spawn_http(db, *args, env=None, timeout=60):
    """`kgr serve --http --port 0` as a subprocess; returns (process, url) once it listens."""
    cmd = [sys.executable, "-m", "kgr", "serve", "--db", str(db), "--http", "--port", "0", *args]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        lines.append(line)
        m = re.search(r"on (http://\S+/mcp)", line)
        if m:
            return proc, m.group(1), lines
    proc.kill()
    raise AssertionError("kgr serve --http did not start: " + "".join(lines) + (proc.stderr.read() or ""))


def stop(proc) -> str:
    """Terminate a server subprocess; return the rest of its stderr."""
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err or ""
