"""The viz server's JSON API and files, over real HTTP; the command's errors."""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys

import orjson
from click.testing import CliRunner

from kgr import viz
from kgr.cli import cli
from kgr.store import Store, now_ms


def get(server, path, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{server.port}", **(headers or {})})
        resp = conn.getresponse()
        body = resp.read()
        return resp.status, dict(resp.getheaders()), body
    finally:
        conn.close()


def get_json(server, path, headers=None):
    status, head, body = get(server, path, headers)
    return status, head, (orjson.loads(body) if body else None)


def entity_id(db, name):
    with Store(db, readonly=True) as store:
        return store.scalar("SELECT id FROM entities WHERE name = ?", (name,))


def degrees(db):
    with Store(db, readonly=True) as store:
        return dict(
            store.query(
                "SELECT id, count(*) FROM (SELECT src_id AS id FROM relations UNION ALL "
                "SELECT dst_id FROM relations) GROUP BY id"
            )
        )


def check_edges_are_the_induced_subgraph(db, data):
    ids = {n["id"] for n in data["nodes"]}
    with Store(db, readonly=True) as store:
        expected = {
            (s, d, r) for s, d, r in store.query("SELECT src_id, dst_id, rel FROM relations") if s in ids and d in ids
        }
    assert {(e["from"], e["to"], e["rel"]) for e in data["edges"]} == expected


def test_the_overview_is_the_most_connected_entities_and_their_edges(built_kb, serve_viz):
    db, _ = built_kb
    server = serve_viz(db)
    status, head, data = get_json(server, "/api/graph")
    assert status == 200 and head["Content-Type"] == "application/json"
    deg = degrees(db)
    assert len(data["nodes"]) == min(viz.START_NODES, len(deg))
    shown = [n["id"] for n in data["nodes"]]
    cutoff = sorted(deg.values(), reverse=True)[len(shown) - 1]
    assert all(deg[i] >= cutoff for i in shown)  # nothing less connected than what was left out
    assert all(n["degree"] == deg[n["id"]] and n["seed"] for n in data["nodes"])
    check_edges_are_the_induced_subgraph(db, data)
    for n in data["nodes"]:
        in_view = sum(1 for e in data["edges"] if n["id"] in (e["from"], e["to"]))
        assert n["hidden"] == n["degree"] - in_view
    assert set(data["types"]) == {n["type"] for n in data["nodes"]}
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in data["types"].values())
    with Store(db, readonly=True) as store:
        assert data["totals"] == {
            "entities": store.scalar("SELECT count(*) FROM entities"),
            "relations": store.scalar("SELECT count(*) FROM relations"),
        }


def test_focus_expand_and_search_views(built_kb, serve_viz):
    db, _ = built_kb
    server = serve_viz(db)
    fare = entity_id(db, "Fare Engine")
    with Store(db, readonly=True) as store:
        neighbours = {
            r[0]
            for r in store.query(
                "SELECT dst_id FROM relations WHERE src_id = ? UNION SELECT src_id FROM relations WHERE dst_id = ?",
                (fare, fare),
            )
        }
        far = store.scalar(
            "SELECT r.dst_id FROM relations r WHERE r.src_id IN (SELECT value FROM json_each(?)) "
            "AND r.dst_id != ? AND r.dst_id NOT IN (SELECT value FROM json_each(?)) LIMIT 1",
            (orjson.dumps(sorted(neighbours)).decode(), fare, orjson.dumps(sorted(neighbours)).decode()),
        )
    _, _, focus = get_json(server, f"/api/graph?focus={fare}")
    assert {n["id"] for n in focus["nodes"]} == {fare} | neighbours
    assert [n["id"] for n in focus["nodes"] if n["seed"]] == [fare]
    check_edges_are_the_induced_subgraph(db, focus)
    # Clicking a neighbour grows its neighbourhood: a node two hops away appears.
    via = next(n for n in neighbours if far in {r for r in neighbours_of(db, n)})
    _, _, grown = get_json(server, f"/api/graph?focus={fare}&expand={via}")
    assert far in {n["id"] for n in grown["nodes"]} and far not in {n["id"] for n in focus["nodes"]}
    assert next(n for n in grown["nodes"] if n["id"] == via)["expanded"]
    # A search starts from its hits.
    _, _, found = get_json(server, "/api/graph?q=ledger")
    assert entity_id(db, "Ledger Store") in {n["id"] for n in found["nodes"] if n["seed"]}
    # Bounded: max caps the nodes and says so.
    _, _, small = get_json(server, f"/api/graph?focus={fare}&max=3")
    assert len(small["nodes"]) == 3 and small["truncated"] and small["nodes"][0]["id"] == fare


def neighbours_of(db, eid):
    with Store(db, readonly=True) as store:
        return [
            r[0]
            for r in store.query(
                "SELECT dst_id FROM relations WHERE src_id = ? UNION SELECT src_id FROM relations WHERE dst_id = ?",
                (eid, eid),
            )
        ]


def test_polling_is_cheap_until_another_connection_commits(kb, serve_viz):
    db, _ = kb
    server = serve_viz(db)
    fare = entity_id(db, "Fare Engine")
    path = f"/api/graph?focus={fare}"
    status, head, first = get_json(server, path)
    etag = head["ETag"]
    assert status == 200 and first["version"] == etag.strip('"')
    status, head, body = get(server, path, {"If-None-Match": etag})
    assert status == 304 and body == b"" and head["ETag"] == etag
    # A write elsewhere that the view does not show: data_version moves, the content (and ETag) does not.
    with Store(db) as store, store.write() as conn:
        conn.execute("INSERT INTO events(ts_ms, kind, message) VALUES (?, 'note', 'unrelated')", (now_ms(),))
    assert get(server, path, {"If-None-Match": etag})[0] == 304
    # A new entity linked to the focus: the next poll brings it.
    with Store(db) as store, store.write() as conn:
        conn.execute(
            "INSERT INTO entities(key, name, type, norm, origin, created_ms, updated_ms) "
            "VALUES ('service:kiosk', 'Ticket Kiosk', 'SERVICE', 'ticketkiosk', 'manual', ?, ?)",
            (now_ms(), now_ms()),
        )
        kiosk = conn.last_insert_rowid()
        conn.execute(
            "INSERT INTO relations(src_id, dst_id, rel, confidence, origin) VALUES (?, ?, 'uses', 1.0, 'manual')",
            (kiosk, fare),
        )
    status, head, after = get_json(server, path, {"If-None-Match": etag})
    assert status == 200 and head["ETag"] != etag
    assert kiosk in {n["id"] for n in after["nodes"]}
    assert {"from": kiosk, "to": fare, "rel": "uses"} in [
        {k: e[k] for k in ("from", "to", "rel")} for e in after["edges"]
    ]


def test_entity_details_have_aliases_relations_sources_with_snippets(kb, serve_viz):
    db, _ = kb
    server = serve_viz(db)
    vls = entity_id(db, "Vehicle Locator Service")
    status, _, e = get_json(server, f"/api/entity/{vls}")
    assert status == 200
    assert e["name"] == "Vehicle Locator Service" and e["type"] == "SERVICE" and "VLS" in e["aliases"]
    assert ("Vehicle Locator Service", "owned_by", "Fleet Operations") in {
        (r["src_name"], r["rel"], r["dst_name"]) for r in e["relations"]
    }
    assert all(r["evidence"] and r["evidence"][0]["sentence"] for r in e["relations"])
    paths = [s["path"] for s in e["sources"]]
    assert "services/vehicle-locator.md" in paths
    names = {x.lower() for x in [e["name"], *e["aliases"]]}
    for s in e["sources"]:
        a, b = s["snippet"]["mark"]
        assert s["snippet"]["text"][a:b].lower() in names, s
    assert e["observations"] == []
    status, head, _ = get(server, f"/api/entity/{vls}")
    assert get(server, f"/api/entity/{vls}", {"If-None-Match": head["ETag"]})[0] == 304  # the open panel polls cheaply
    with Store(db) as store, store.write() as conn:
        conn.execute(
            "INSERT INTO observations(entity_id, content, source, created_ms) VALUES (?, ?, 'manual', ?)",
            (vls, "Moved to the new cluster in May", now_ms()),
        )
    status, _, again = get_json(server, f"/api/entity/{vls}", {"If-None-Match": head["ETag"]})
    assert status == 200 and [o["content"] for o in again["observations"]] == ["Moved to the new cluster in May"]


def test_views_of_a_large_graph_stay_bounded(tmp_path, serve_viz):
    """5,000 entities, a hub with 1,000 edges: every view is bounded, and says what it left out."""
    db = tmp_path / "big.sqlite"
    with Store(db) as store, store.write() as conn:
        conn.executemany(
            "INSERT INTO entities(id, key, name, type, norm, origin) VALUES (?, ?, ?, ?, ?, 'manual')",
            [(i, f"k{i}", f"Entity {i}", ("SERVICE", "TEAM", "PERSON")[i % 3], f"entity{i}") for i in range(1, 5001)],
        )
        edges = [(1, i, "uses") for i in range(2, 1002)] + [(i, i + 1, "part_of") for i in range(1002, 5000)]
        conn.executemany("INSERT INTO relations(src_id, dst_id, rel, origin) VALUES (?, ?, ?, 'manual')", edges)
    server = serve_viz(db)
    _, _, overview = get_json(server, "/api/graph")
    assert len(overview["nodes"]) == viz.START_NODES and overview["nodes"][0]["id"] == 1
    _, _, hub = get_json(server, "/api/graph?focus=1")
    assert len(hub["nodes"]) == 1 + viz.PER_NODE
    assert hub["nodes"][0]["hidden"] == 1000 - viz.PER_NODE  # the page can say how much is left
    many = ",".join(str(i) for i in range(1002, 1400))
    _, _, grown = get_json(server, f"/api/graph?focus=1&expand={many}")
    assert len(grown["nodes"]) == viz.DEFAULT_MAX_NODES and grown["truncated"]
    check_edges_are_the_induced_subgraph(db, grown)


def test_an_empty_database_is_an_empty_view(tmp_path, serve_viz):
    db = tmp_path / "empty.sqlite"
    Store(db).close()
    server = serve_viz(db)
    _, _, data = get_json(server, "/api/graph")
    assert (data["nodes"], data["edges"], data["totals"]) == ([], [], {"entities": 0, "relations": 0})
    assert get_json(server, "/api/graph?q=anything")[2]["nodes"] == []


def test_search_finds_by_name_and_alias(built_kb, serve_viz):
    server = serve_viz(built_kb[0])
    _, _, res = get_json(server, "/api/search?q=FE")
    assert res["hits"][0]["name"] == "Fare Engine" and res["hits"][0]["color"].startswith("#")
    _, _, none = get_json(server, "/api/search?q=")
    assert none["hits"] == []


def test_bad_requests_get_clear_errors(built_kb, serve_viz):
    server = serve_viz(built_kb[0])
    assert get_json(server, "/api/entity/999999")[::2] == (404, {"error": "no entity with id 999999"})
    assert get_json(server, "/api/entity/abc")[0] == 404
    status, _, body = get_json(server, "/api/graph?max=lots")
    assert status == 400 and "max must be a whole number" in body["error"]
    assert get_json(server, "/api/graph?max=0")[0] == 400
    assert get_json(server, "/api/graph?focus=1,x")[0] == 400
    assert get_json(server, "/static/../viz.py")[0] == 404
    assert get_json(server, "/vendor/../../etc/passwd")[0] == 404
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("POST", "/api/graph", body=b"{}", headers={"Host": f"127.0.0.1:{server.port}"})
    resp = conn.getresponse()
    assert resp.status == 405 and resp.getheader("Allow") == "GET"
    assert get(server, "/api/graph")[0] == 200  # still serving


def test_host_header_is_checked_against_dns_rebinding(built_kb, serve_viz):
    server = serve_viz(built_kb[0])
    assert get(server, "/api/graph", {"Host": "evil.example"})[0] == 403
    assert get(server, "/", {"Host": f"attacker.test:{server.port}"})[0] == 403
    assert get(server, "/api/graph", {"Host": f"localhost:{server.port}"})[0] == 200


def test_the_page_and_its_script_come_from_this_server_only(built_kb, serve_viz):
    server = serve_viz(built_kb[0])
    status, head, html = get(server, "/")
    assert status == 200 and head["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in head["Content-Security-Policy"]
    srcs = re.findall(rb'(?:src|href)="([^"]+)"', html)
    assert srcs and all(s.startswith(b"/") for s in srcs), srcs
    for src in srcs:
        status, head, body = get(server, src.decode())
        assert status == 200 and body, src
        assert not re.search(rb"(?:src|href)=[\"']?https?://", body), f"{src} loads something from elsewhere"
    status, head, js = get(server, "/vendor/vis-network.min.js")
    assert head["Content-Type"].startswith("text/javascript") and b"vis-network" in js[:400]
    assert re.search(rb"@version 9\.\d+\.\d+", js[:400])


def test_vendor_files_come_from_the_pyvis_wheel():
    files = viz.vendor_files()
    assert files["vis-network.min.js"].is_file() and "pyvis" in files["vis-network.min.js"].parts
    assert files["vis-network.min.js"].parent.name == "vis-9.1.2"  # the newest pyvis 0.3.2 ships


def test_snippet_marks_the_mention():
    text = "word " * 60 + "the Fare Engine prices taps. " + "more " * 60
    start = text.index("Fare Engine")
    s = viz.snippet(text, start, start + len("Fare Engine"))
    a, b = s["mark"]
    assert s["text"][a:b] == "Fare Engine"
    assert s["text"].startswith("…") and s["text"].endswith("…") and len(s["text"]) < 260
    whole = viz.snippet("Fare Engine", 0, 11)
    assert whole == {"text": "Fare Engine", "mark": [0, 11]}


# -- the command ------------------------------------------------------------------------------


def test_missing_database_is_an_error(tmp_path):
    result = CliRunner().invoke(cli, ["viz", "--db", str(tmp_path / "none.sqlite"), "--no-open"])
    assert result.exit_code == 1 and result.stderr.startswith("Error: database not found")


def test_port_in_use_is_an_error(built_kb):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(cli, ["viz", "--db", str(built_kb[0]), "--port", str(port), "--no-open"])
    assert result.exit_code == 1
    assert f"Error: port {port} on 127.0.0.1 is in use" in result.stderr and "--port 0" in result.stderr


def test_the_command_serves_until_interrupted(built_kb):
    proc = subprocess.Popen(
        [sys.executable, "-m", "kgr", "viz", "--db", str(built_kb[0]), "--port", "0", "--no-open"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
        start_new_session=True,
    )
    try:
        line = proc.stderr.readline()
        m = re.search(r"serving http://127\.0\.0\.1:(\d+)/", line)
        assert m, line + proc.stderr.read()
        port = int(m.group(1))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/api/graph", headers={"Host": f"127.0.0.1:{port}"})
        resp = conn.getresponse()
        assert resp.status == 200 and orjson.loads(resp.read())["nodes"]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "Interrupted" in err
    assert out == ""  # stdout is for data; the URL went to stderr
