"""`kgr viz`: a live page of the knowledge graph, served on 127.0.0.1.

The page (kgr/viz_static/) draws with vis-network, whose JavaScript comes inside the
pyvis package (no CDN, no network). It never asks for the whole graph: it starts from
the most connected entities, a search or one entity, and grows the neighbourhood of each
node clicked. Every view is a pure function of its parameters (q, focus, expand), so
the page polls /api/graph every 2 s with If-None-Match and gets 304 while nothing it
shows has changed; the server recomputes a view only when SQLite's data_version says
another connection committed.

JSON API (GET only):
    /api/graph?q=TEXT&focus=ID,ID&expand=ID,ID&max=N   nodes, edges, type colours
    /api/entity/ID                                     details: aliases, definition,
                                                       observations, relations, sources
    /api/search?q=TEXT                                 entities by name and alias
"""

from __future__ import annotations

import errno
import hashlib
import http.server
import importlib.util
import re
import sys
import threading
import urllib.parse
from pathlib import Path
from typing import Any

import orjson

from kgr.errors import EntityNotFound, KgrError
from kgr.export import snapshot, type_color
from kgr.retrieval import entities as ents
from kgr.store import Store, dumps, loads
from kgr.store.lock import reading

STATIC = Path(__file__).parent / "viz_static"
DEFAULT_PORT = 8766  # kgr serve --http takes 8765
DEFAULT_MAX_NODES = 200
START_NODES = 30  # most connected entities shown when the page has no query
PER_NODE = 40  # neighbours added per expanded or found entity (hubs stay readable)
SEARCH_SEEDS = 10


class VizError(KgrError):
    pass


# -- the graph views (library: no HTTP here) -------------------------------------------


def _ids_json(ids) -> str:
    return dumps([int(i) for i in ids])


def top_entities(store: Store, limit: int) -> list[int]:
    """The most connected entities (by edges both ways), then the most popular when few have edges."""
    ids = [
        r[0]
        for r in store.query(
            "SELECT id FROM (SELECT src_id AS id FROM relations UNION ALL SELECT dst_id FROM relations) "
            "GROUP BY id ORDER BY count(*) DESC, id LIMIT ?",
            (limit,),
        )
    ]
    if len(ids) < limit:
        ids += [
            r[0]
            for r in store.query(
                "SELECT id FROM entities WHERE id NOT IN (SELECT value FROM json_each(?)) "
                "ORDER BY popularity DESC, id LIMIT ?",
                (_ids_json(ids), limit - len(ids)),
            )
        ]
    return ids


def neighbours(store: Store, eid: int, limit: int = PER_NODE) -> list[int]:
    """Entities one edge away (either direction), strongest edges first."""
    return [
        r[0]
        for r in store.query(
            "SELECT other FROM (SELECT dst_id AS other, confidence FROM relations WHERE src_id = ? "
            "UNION ALL SELECT src_id, confidence FROM relations WHERE dst_id = ?) "
            "GROUP BY other ORDER BY max(confidence) DESC, other LIMIT ?",
            (eid, eid, limit),
        )
    ]


def graph_view(
    store: Store,
    *,
    q: str | None = None,
    focus: list[int] | None = None,
    expand: list[int] | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> dict[str, Any]:
    """A bounded view of the graph: seeds (``focus`` ids, else the hits of ``q``, else the
    most connected entities), their neighbours, the neighbours of each ``expand`` id, and
    every edge among the nodes kept."""
    if focus:
        seeds = [
            r[0]
            for r in store.query(
                "SELECT id FROM entities WHERE id IN (SELECT value FROM json_each(?))", (_ids_json(focus),)
            )
        ]
        seeds.sort(key=focus.index)
        grow = list(seeds)
    elif q and q.strip():
        seeds = [h["id"] for h in ents.lookup(store, q, limit=SEARCH_SEEDS)]
        grow = list(seeds)
    else:
        seeds = top_entities(store, min(START_NODES, max_nodes))
        grow = []
    order: dict[int, None] = dict.fromkeys(seeds)
    truncated = False
    for eid in grow + [int(x) for x in expand or []]:
        for other in [eid, *neighbours(store, eid)]:
            if other in order:
                continue
            if len(order) >= max_nodes:
                truncated = True
                break
            order[other] = None
    ids = list(order)[:max_nodes]
    truncated = truncated or len(order) > max_nodes
    ids_json = _ids_json(ids)
    rows = {
        r[0]: r
        for r in store.query(
            "SELECT id, key, name, type, aliases FROM entities WHERE id IN (SELECT value FROM json_each(?))",
            (ids_json,),
        )
    }
    degree = dict(
        store.query(
            "SELECT id, count(*) FROM (SELECT src_id AS id FROM relations WHERE src_id IN (SELECT value FROM json_each(?1)) "
            "UNION ALL SELECT dst_id FROM relations WHERE dst_id IN (SELECT value FROM json_each(?1))) GROUP BY id",
            (ids_json,),
        )
    )
    edges = [
        {"id": rid, "from": src, "to": dst, "rel": rel, "confidence": round(conf, 4), "origin": origin}
        for rid, src, dst, rel, conf, origin in store.query(
            "SELECT id, src_id, dst_id, rel, confidence, origin FROM relations "
            "WHERE src_id IN (SELECT value FROM json_each(?1)) AND dst_id IN (SELECT value FROM json_each(?1)) ORDER BY id",
            (ids_json,),
        )
    ]
    shown: dict[int, int] = {}
    for e in edges:
        shown[e["from"]] = shown.get(e["from"], 0) + 1
        shown[e["to"]] = shown.get(e["to"], 0) + 1
    seed_set = set(seeds)
    expanded = set(grow) | {int(x) for x in expand or []}
    nodes = []
    for eid in ids:
        if eid not in rows:  # deleted between the queries
            continue
        _, key, name, typ, aliases = rows[eid]
        nodes.append(
            {
                "id": eid,
                "key": key,
                "name": name,
                "type": typ,
                "aliases": loads(aliases, []),
                "degree": degree.get(eid, 0),
                "hidden": degree.get(eid, 0) - shown.get(eid, 0),
                "seed": eid in seed_set,
                "expanded": eid in expanded,
            }
        )
    types = {n["type"] for n in nodes}
    totals = dict(
        zip(
            ("entities", "relations"),
            store.query("SELECT (SELECT count(*) FROM entities), (SELECT count(*) FROM relations)")[0],
        )
    )
    return {
        "nodes": nodes,
        "edges": edges,
        "truncated": truncated,
        "types": {t: type_color(t) for t in sorted(types)},
        "totals": totals,
    }


def snippet(text: str, start: int | None, end: int | None, width: int = 110) -> dict[str, Any]:
    """A window of ``text`` around [start, end), with the mention's offsets inside the window."""
    start = max(0, min(start or 0, len(text)))
    end = max(start, min(end if end is not None else start, len(text)))
    lo, hi = max(0, start - width), min(len(text), end + width)
    if lo > 0:  # start at a word
        space = text.find(" ", lo, start)
        lo = space + 1 if space != -1 else lo
    if hi < len(text):
        space = text.rfind(" ", end, hi)
        hi = space if space != -1 else hi
    piece = text[lo:hi]
    prefix, suffix = ("…" if lo > 0 else ""), ("…" if hi < len(text) else "")
    flat = re.sub(r"\s", " ", piece)
    return {"text": prefix + flat + suffix, "mark": [len(prefix) + start - lo, len(prefix) + end - lo]}


def entity_details(store: Store, eid: int, *, max_sources: int = 8, max_observations: int = 50) -> dict[str, Any]:
    """Everything the details panel shows about one entity."""
    ent = ents.entity(store, eid)
    observations = [
        {
            "id": oid,
            "content": content,
            "source": source,
            "created_ms": created,
            "valid_from_ms": vf,
            "valid_until_ms": vu,
        }
        for oid, content, source, created, vf, vu in store.query(
            "SELECT id, content, source, created_ms, valid_from_ms, valid_until_ms FROM observations "
            "WHERE entity_id = ? ORDER BY importance DESC, id LIMIT ?",
            (eid, max_observations),
        )
    ]
    sources = []
    for doc_id, path, title, count, first in store.query(
        # The snippet shows the first mention by name (a pronoun says little out of context).
        "SELECT d.id, d.path, d.title, count(*), coalesce(min(CASE WHEN m.source != 'coref' THEN m.id END), min(m.id)) "
        "FROM mentions m JOIN docs d ON d.id = m.doc_id "
        "WHERE m.entity_id = ? GROUP BY d.id ORDER BY count(*) DESC, d.path LIMIT ?",
        (eid, max_sources),
    ):
        text, start, end, section = store.query(
            'SELECT c.text, m.start, m."end", c.section FROM mentions m JOIN chunks c ON c.id = m.chunk_id WHERE m.id = ?',
            (first,),
        )[0]
        sources.append(
            {"path": path, "title": title, "mentions": count, "section": section, "snippet": snippet(text, start, end)}
        )
    return {
        **ent,
        "color": type_color(ent["type"]),
        "definition": ents.definition_of(store, ent),
        "observations": observations,
        "relations": ents.relations_of(store, eid, limit=50),
        "sources": sources,
    }


def search(store: Store, q: str, *, limit: int = 20) -> list[dict[str, Any]]:
    return [{**hit, "color": type_color(hit["type"])} for hit in ents.lookup(store, q, limit=limit)]


# -- the page's files ---------------------------------------------------------------------


def vendor_files() -> dict[str, Path]:
    """vis-network's browser build, as shipped inside the pyvis wheel (newest version found)."""
    spec = importlib.util.find_spec("pyvis")  # finds the package without importing it (and IPython)
    if spec is None or not spec.submodule_search_locations:
        raise VizError("the viz page needs vis-network, which comes with the pyvis package", hint="pip install pyvis")
    found: list[tuple[tuple[int, ...], Path]] = []
    for location in spec.submodule_search_locations:
        for js in Path(location).glob("lib/vis-*/vis-network.min.js"):
            version = tuple(int(x) for x in re.findall(r"\d+", js.parent.name.removeprefix("vis-")))
            found.append((version, js.parent))
    if not found:
        raise VizError(
            "pyvis is installed but has no lib/vis-*/vis-network.min.js", hint="pip install --force-reinstall pyvis"
        )
    folder = max(found)[1]
    return {"vis-network.min.js": folder / "vis-network.min.js", "vis-network.css": folder / "vis-network.css"}


CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}
# The page loads only its own files; no inline script, nothing from elsewhere.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


# -- the server ---------------------------------------------------------------------------


class VizServer(http.server.ThreadingHTTPServer):
    """The page and its JSON API over one read-only connection."""

    daemon_threads = True

    def __init__(self, db: str | Path, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT):
        if host not in ("127.0.0.1", "localhost"):
            raise VizError(f"kgr viz serves on loopback only, not {host}")
        self.store = reading(db)
        self.vendor = vendor_files()
        self.lock = threading.Lock()
        self.cache: dict[str, tuple[int, str, bytes]] = {}
        try:
            super().__init__((host, port), VizHandler)
        except OSError as exc:
            self.store.close()
            if exc.errno == errno.EADDRINUSE:
                raise VizError(
                    f"port {port} on {host} is in use", hint="choose another with --port, or --port 0 for any free port"
                ) from None
            raise VizError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self.port = self.server_address[1]
        self.allowed_hosts = {f"{name}:{self.port}" for name in ("127.0.0.1", "localhost")}
        if self.port == 80:
            self.allowed_hosts |= {"127.0.0.1", "localhost"}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def data_version(self) -> int:
        # Changes whenever another connection commits to the file: a cheap "anything new?".
        return self.store.scalar("PRAGMA data_version")

    def graph_json(self, params: dict[str, str]) -> tuple[str, bytes]:
        """(etag, body) of a view; recomputed only when the database changed since it was cached."""
        cache_key = dumps(sorted(params.items()))
        with self.lock:
            version = self.data_version()
            hit = self.cache.get(cache_key)
            if hit and hit[0] == version:
                return hit[1], hit[2]
            focus = _int_list(params.get("focus"), "focus")
            expand = _int_list(params.get("expand"), "expand")
            max_nodes = _int(params.get("max"), "max", DEFAULT_MAX_NODES, 1, 5000)
            with snapshot(self.store):  # nodes and edges from one state of the file
                view = graph_view(self.store, q=params.get("q"), focus=focus, expand=expand, max_nodes=max_nodes)
            body = orjson.dumps(view)
            etag = '"' + hashlib.sha1(body).hexdigest()[:20] + '"'
            body = orjson.dumps({"version": etag.strip('"'), **view})
            if len(self.cache) > 256:
                self.cache.clear()
            self.cache[cache_key] = (version, etag, body)
            return etag, body

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return  # the browser went away (a reload, a closed tab)
        super().handle_error(request, client_address)

    def server_close(self) -> None:
        super().server_close()
        self.store.close()


class BadParam(ValueError):
    pass


def _int(text: str | None, name: str, default: int, lo: int, hi: int) -> int:
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadParam(f"{name} must be a whole number, not {text!r}") from None
    if not lo <= value <= hi:
        raise BadParam(f"{name} must be between {lo} and {hi}")
    return value


def _int_list(text: str | None, name: str) -> list[int]:
    if not text:
        return []
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BadParam(f"{name} must be entity ids separated by commas, not {text!r}") from None
    return values[:500]


class VizHandler(http.server.BaseHTTPRequestHandler):
    server: VizServer
    server_version = "kgr-viz"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # the page polls every 2 s: an access log would drown the terminal

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        # DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends its own Host.
        if self.headers.get("Host", "") not in self.server.allowed_hosts:
            return self._json(403, {"error": "forbidden host; open the page at " + self.server.url})
        url = urllib.parse.urlsplit(self.path)
        params = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        try:
            self._route(url.path, params)
        except BadParam as exc:
            self._json(400, {"error": str(exc)})
        except EntityNotFound as exc:
            self._json(404, {"error": exc.message})
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # noqa: BLE001 - the one boundary of a request: report, keep serving
            self.log_error("%s: %s", type(exc).__name__, exc)
            self._json(500, {"error": f"{type(exc).__name__}: {exc}"})

    def _refuse(self) -> None:
        # A body is never read, so the connection cannot carry another request.
        self.close_connection = True
        self._json(405, {"error": "the viz API is read-only: GET only"}, {"Allow": "GET", "Connection": "close"})

    do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse  # noqa: N815

    def _route(self, path: str, params: dict[str, str]) -> None:
        server = self.server
        if path == "/":
            return self._file(STATIC / "index.html")
        if path.startswith("/static/"):
            name = path.removeprefix("/static/")
            candidates = {p.name: p for p in STATIC.iterdir() if p.is_file()}
            return self._file(candidates[name]) if name in candidates else self._json(404, {"error": "not found"})
        if path.startswith("/vendor/"):
            name = path.removeprefix("/vendor/")
            return self._file(server.vendor[name]) if name in server.vendor else self._json(404, {"error": "not found"})
        if path == "/api/graph":
            etag, body = server.graph_json(params)
            if self.headers.get("If-None-Match") == etag:
                return self._send(304, b"", None, {"ETag": etag})
            return self._send(200, body, "application/json", {"ETag": etag})
        m = re.fullmatch(r"/api/entity/(\d+)", path)
        if m:
            with server.lock, snapshot(server.store):
                body = orjson.dumps(entity_details(server.store, int(m.group(1))))
            etag = '"' + hashlib.sha1(body).hexdigest()[:20] + '"'
            if self.headers.get("If-None-Match") == etag:
                return self._send(304, b"", None, {"ETag": etag})
            return self._send(200, body, "application/json", {"ETag": etag})
        if path == "/api/search":
            limit = _int(params.get("limit"), "limit", 20, 1, 200)
            with server.lock:
                return self._json(
                    200, {"q": params.get("q", ""), "hits": search(server.store, params.get("q", ""), limit=limit)}
                )
        if path == "/favicon.ico":
            return self._send(204, b"", None)
        return self._json(404, {"error": f"no such page: {path}"})

    def _file(self, path: Path) -> None:
        self._send(200, path.read_bytes(), CONTENT_TYPES.get(path.suffix, "application/octet-stream"))

    def _json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, orjson.dumps(value), "application/json", headers)

    def _send(self, status: int, body: bytes, content_type: str | None, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)


def make_server(db: str | Path, *, port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> VizServer:
    """A server ready to ``serve_forever()``; raises VizError for a port in use, StoreError for a missing db."""
    return VizServer(db, host=host, port=port)


def serve_in_thread(db: str | Path, *, port: int = 0) -> VizServer:
    """A page server on 127.0.0.1 (``port`` 0: any free port), serving on a daemon thread of
    this process, so that it ends with the process; :func:`stop` ends it sooner."""
    server = make_server(db, port=port)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5}, name="kgr-viz", daemon=True)
    server.thread = thread
    thread.start()
    return server


def stop(server: VizServer) -> None:
    """Stop a server of :func:`serve_in_thread` and close its connection."""
    server.shutdown()
    server.server_close()


def open_in_browser(url: str) -> bool:
    """Open ``url`` in the desktop's browser, as the seed's ``openInBrowser`` does (macOS
    ``open``, Windows' default handler, ``xdg-open`` under a graphical session); whether a
    browser was asked to open it. Nothing is inherited from this process's standard streams:
    an MCP server's stdout is the protocol, and a terminal browser must never take it."""
    import os
    import shutil
    import subprocess

    if sys.platform == "win32":
        os.startfile(url)  # noqa: S606 - the user's default handler for an http URL
        return True
    if sys.platform == "darwin":
        command = shutil.which("open")
    elif os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        command = shutil.which("xdg-open")
    else:
        command = None  # no graphical session: nothing to open the page in
    if command is None:
        return False
    try:
        subprocess.Popen(  # noqa: S603 - a fixed program and our own loopback URL
            [command, url],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return False
    return True
