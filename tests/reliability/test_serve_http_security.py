"""M5 (RELIABILITY.md section 4): the HTTP transport against DNS rebinding and without its token.

Raw HTTP requests against a real `kgr serve --http` subprocess: loopback bind by default,
Host and Origin validated (421/403), a rebinding simulation gets no tool result, the bearer
token is required (401) and compared in constant time, a non-loopback bind without a token
is refused, and the token never reaches the logs.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))
from serve_fixtures import built_kb, spawn_http, stop  # noqa: E402,F401 - built_kb is a fixture

TOKEN = "m5-secret-token-7f3a9c1e5b2d4680"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "m5", "version": "1"}},
}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "status", "arguments": {}}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def listening_addresses(port: int) -> set[str]:
    """Local addresses of sockets listening on ``port`` (from /proc/net/tcp and tcp6)."""
    out = set()
    for name in ("tcp", "tcp6"):
        path = Path(f"/proc/net/{name}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            addr, prt = fields[1].rsplit(":", 1)
            if int(prt, 16) == port and fields[3] == "0A":  # LISTEN
                if name == "tcp":
                    out.add(".".join(str(int(addr[i : i + 2], 16)) for i in (6, 4, 2, 0)))
                else:
                    out.add("::" if set(addr) == {"0"} else addr)
    return out


def post(url, body, **headers):
    return httpx.post(url, json=body, headers={**HEADERS, **headers}, timeout=30)


@pytest.fixture()
def open_server(built_kb):
    proc, url, _ = spawn_http(built_kb[0])
    yield proc, url
    stop(proc)


@pytest.fixture()
def token_server(built_kb):
    proc, url, _ = spawn_http(built_kb[0], "--token-env", "M5_TOKEN", env={"M5_TOKEN": TOKEN})
    yield proc, url
    assert TOKEN not in stop(proc)


def test_m5_default_bind_is_loopback(open_server):
    _, url = open_server
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert listening_addresses(port) == {"127.0.0.1"}


def test_m5_host_and_origin(open_server):
    _, url = open_server
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    ok = post(url, INIT, Host=f"localhost:{port}")  # no Origin, a loopback Host: allowed
    assert ok.status_code == 200, ok.text
    assert post(url, INIT, Host=f"127.0.0.1:{port}", Origin=f"http://localhost:{port}").status_code == 200
    assert post(url, INIT, Origin="http://evil.test").status_code == 403
    assert post(url, INIT, Origin=f"http://evil.test:{port}").status_code == 403
    assert post(url, INIT, Host=f"evil.test:{port}").status_code == 421
    assert post(url, INIT, Host="localhost:1").status_code == 421  # right name, wrong port
    # A rebinding page: evil.test resolved to 127.0.0.1 (curl --resolve), so the browser sends
    # Host: evil.test and Origin: http://evil.test. It must get no tool result.
    sid = ok.headers.get("mcp-session-id")
    r = post(url, CALL, Host=f"evil.test:{port}", Origin=f"http://evil.test:{port}", **{"mcp-session-id": sid})
    assert r.status_code in (403, 421) and "counts" not in r.text
    # other routes are guarded too
    assert httpx.get(url.replace("/mcp", "/anything"), headers={"Host": f"evil.test:{port}"}).status_code == 421


def test_m5_token(token_server):
    proc, url = token_server
    assert post(url, INIT).status_code == 401
    wrong = post(url, INIT, Authorization="Bearer " + TOKEN[:-1] + "x")
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer")
    assert post(url, INIT, Authorization=TOKEN).status_code == 401  # no scheme
    assert post(url, INIT, Authorization=f"Basic {TOKEN}").status_code == 401
    ok = post(url, INIT, Authorization=f"Bearer {TOKEN}")
    assert ok.status_code == 200
    sid = ok.headers["mcp-session-id"]
    assert len(sid) >= 32 and int(sid, 16) > 0  # uuid4().hex: 128 bits, 122 of them random
    # the session id is useless without the token
    r = post(
        url,
        CALL,
        Authorization="Bearer nope-nope-nope-nope",
        **{"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"},
    )
    assert r.status_code == 401 and "counts" not in r.text


def test_m5_token_never_logged(built_kb, tmp_path):
    proc, url, lines = spawn_http(built_kb[0], "--token-env", "M5_TOKEN", env={"M5_TOKEN": TOKEN, "KGR_TRACEBACK": "1"})
    try:
        for auth in (f"Bearer {TOKEN}x", f"Bearer {TOKEN}", TOKEN, f"Bearer {TOKEN[:8]}"):
            post(url, INIT, Authorization=auth)
        post(
            url,
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "tools/call",
                "params": {"name": "explain_entity", "arguments": {"entity": TOKEN}},
            },
            Authorization=f"Bearer {TOKEN}",
        )
    finally:
        log = "".join(lines) + stop(proc)
    assert TOKEN not in log
    assert TOKEN[:8] not in log


def test_m5_non_loopback_bind_needs_a_token(built_kb):
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "kgr", "serve", "--db", str(built_kb[0]), "--http", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2, proc.stderr
    assert "refusing to listen on 0.0.0.0 without a token" in proc.stderr
    assert time.perf_counter() - t0 < 30


def test_m5_a_short_token_is_refused(built_kb):
    proc = subprocess.run(
        [sys.executable, "-m", "kgr", "serve", "--db", str(built_kb[0]), "--http", "--port", "0", "--token", "short"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2 and "too short" in proc.stderr and "short" not in proc.stdout


def test_m5_sdk_pin_and_explicit_allow_lists():
    from kgr.mcp import server as serve

    major, minor = (int(x) for x in version("mcp").split(".")[:2])
    assert (major, minor) >= (1, 23)
    hosts, origins = serve.allowed("127.0.0.1", 8765)
    assert hosts == {"127.0.0.1:8765", "localhost:8765", "[::1]:8765"}
    assert "http://localhost:8765" in origins and not any("*" in o for o in origins)
    # the SDK's own check is configured explicitly (its default is off for non-loopback hosts)
    src = inspect.getsource(serve.serve_http)
    assert "TransportSecuritySettings(enable_dns_rebinding_protection=True" in "".join(src.split())  # any layout
    assert "hmac.compare_digest" in inspect.getsource(serve.Guard)
