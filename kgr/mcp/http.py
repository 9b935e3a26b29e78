"""``kgr serve --http``: streamable HTTP on a socket bound here, behind :class:`Guard`
(Host and Origin checks against DNS rebinding, and the bearer token)."""

from __future__ import annotations

import hmac
import ipaddress
import socket
from typing import Any, Callable


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Guard:
    """ASGI middleware in front of everything: Host (421), Origin (403) and bearer token (401).

    Host and Origin stop DNS rebinding (a page on evil.test resolving to 127.0.0.1); the
    token is compared in constant time and never logged.
    """

    def __init__(self, app, *, hosts: set[str], origins: set[str], token: str | None):
        self.app = app
        self.hosts = {h.lower() for h in hosts}
        self.origins = {o.lower() for o in origins}
        self.token = token.encode() if token else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "").lower()
        if host not in self.hosts:
            return await _plain(send, 421, "Invalid Host header")
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self.origins:
            return await _plain(send, 403, "Invalid Origin header")
        if self.token is not None:
            auth = headers.get("authorization", "")
            scheme, _, given = auth.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token):
                return await _plain(send, 401, "Unauthorized", extra=[(b"www-authenticate", b'Bearer realm="kgr"')])
        return await self.app(scope, receive, send)


async def _plain(send, status: int, text: str, extra: list | None = None) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def allowed(host: str, port: int, extra_hosts: list[str] | tuple[str, ...] = ()) -> tuple[set[str], set[str]]:
    """The Host and Origin values accepted for a server bound to ``host:port``."""
    names = {"127.0.0.1", "localhost", "[::1]"}
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):
        names.add(f"[{host}]" if ":" in host else host)
    names.update(extra_hosts)
    hosts = {f"{n}:{port}" for n in names}
    origins = {f"{scheme}://{n}:{port}" for n in names for scheme in ("http", "https")}
    return hosts, origins


def serve_http(
    server,
    svc: Any,
    *,
    host: str,
    port: int,
    token: str | None,
    extra_hosts=(),
    ready: Callable[[str], None] | None = None,
) -> None:
    import anyio
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    port = sock.getsockname()[1]
    hosts, origins = allowed(host, port, extra_hosts)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=sorted(hosts), allowed_origins=sorted(origins)
    )
    app = server.streamable_http_app(transport_security=security, host=host)
    guarded = Guard(app, hosts=hosts, origins=origins, token=token)
    config = uvicorn.Config(guarded, log_level="warning", access_log=False, lifespan="on")
    userver = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/mcp"

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(userver.serve, [sock])
            while not userver.started:
                await anyio.sleep(0.02)
            if ready:
                ready(url)

    anyio.run(main)
