"""Fixtures and helpers for `kgr serve` (tests/mcp and the serve tests in tests/reliability): a knowledge base built once from examples/ with the real model,
servers on it, and real MCP clients (in memory, stdio subprocess, streamable HTTP)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

if sys.version_info < (3, 11):  # anyio depends on the backport there
    from exceptiongroup import BaseExceptionGroup

REPO = Path(__file__).resolve().parents[2]
INSPECTOR = REPO / ".ci" / "node" / "node_modules" / ".bin" / "mcp-inspector"


def build_kb(dest: Path) -> tuple[Path, Path]:
    """A copy of examples/ at ``dest`` ingested into dest/kb.sqlite (real model): (db, root)."""
    shutil.copytree(REPO / "examples", dest, ignore=shutil.ignore_patterns("*.sqlite*"))
    db = dest / "kb.sqlite"
    env = {**os.environ, "KGR_REDACT_KEY": "test-key"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kgr",
            "ingest",
            str(dest / "kb"),
            "--db",
            str(db),
            "--config",
            str(dest / "config.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        stdin=subprocess.DEVNULL,
    )
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
    from kgr.mcp import server as serve

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
    from kgr.mcp import server as serve

    return Mcp(serve.build_server(service, "all"))


def error_text(result) -> str:
    assert result.is_error, result
    return " ".join(getattr(c, "text", "") for c in result.content)


def spawn_http(db, *args, env=None, timeout=60):
    """`kgr serve --http --port 0` as a subprocess; returns (process, url) once it listens."""
    cmd = [sys.executable, "-m", "kgr", "serve", "--db", str(db), "--http", "--port", "0", *args]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
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


class RawStdio:
    """`kgr serve` over stdio spoken to byte by byte: every stdout line is kept to check it parses."""

    def __init__(self, args: list[str], env: dict | None = None, command: list[str] | None = None):
        import queue
        import threading

        command = command or [sys.executable, "-m", "kgr", "serve"]
        self.proc = subprocess.Popen(
            [*command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "KGR_REDACT_KEY": "test-key", **(env or {})},
        )
        self.lines: list[bytes] = []
        self.frames: "queue.Queue[dict]" = queue.Queue()
        self.stderr_chunks: list[bytes] = []
        self._next_id = 100

        def read_out():
            for line in self.proc.stdout:
                self.lines.append(line)
                try:
                    self.frames.put(json.loads(line))
                except ValueError:
                    pass

        def read_err():
            for line in self.proc.stderr:
                self.stderr_chunks.append(line)

        threading.Thread(target=read_out, daemon=True).start()
        threading.Thread(target=read_err, daemon=True).start()
        init = self.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        )
        assert "result" in init, init
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict | None = None, timeout: float = 120) -> dict:
        self._next_id += 1
        rid = self._next_id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        return self.wait_for(rid, timeout)

    def wait_for(self, rid, timeout: float = 120) -> dict:
        import queue

        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no answer to request {rid} within {timeout}s; stderr: {self.stderr[-2000:]}")
            try:
                frame = self.frames.get(timeout=left)
            except queue.Empty:
                continue
            if frame.get("id") == rid:
                return frame

    def call(self, name: str, args: dict | None = None, timeout: float = 120) -> dict:
        return self.request("tools/call", {"name": name, "arguments": args or {}}, timeout)

    @property
    def stderr(self) -> str:
        return b"".join(self.stderr_chunks).decode("utf-8", "replace")

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
