"""The viz page in a real browser: headless Chromium (Debian's package) driven by Playwright.

The page is loaded from a real server, nodes are clicked with the mouse at the place
vis-network drew them, and the graph is changed through the MCP tool ingest_docs of a
real `kgr serve` subprocess: the page must show the change within its 2 s polling.
Set KGR_VIZ_SCREENSHOT=PATH to also save the screenshot there (docs/viz.png for the README).
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from kgr.store import Store, now_ms

from .conftest import STUB_ENV, wait_until

POLL_S = 2.0
SLACK_S = 4.0  # a poll in flight, the server's recomputation, a loaded machine
# Read at import: the suite's autouse fixture clears KGR_* variables before each test.
SCREENSHOT = os.environ.get("KGR_VIZ_SCREENSHOT")


@pytest.fixture()
def page(chromium):
    context = chromium.new_context(viewport={"width": 1400, "height": 850})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    page.problems = problems
    yield page
    context.close()


def open_page(page, server):
    page.goto(server.url)
    wait_until(
        page,
        "() => window.kgrViz && kgrViz.state.updates > 0 && kgrViz.state.stable",
        timeout=30,
        what="the first graph, laid out",
    )


def entity_id(db, name):
    with Store(db, readonly=True) as store:
        return store.scalar("SELECT id FROM entities WHERE name = ?", (name,))


def click_node(page, node_id):
    """Click with the mouse where the network drew the node."""
    wait_until(page, "() => kgrViz.state.stable", timeout=30, what="the layout to settle")
    x, y = page.evaluate(
        """id => { const net = kgrViz.network, p = net.canvasToDOM(net.getPositions([id])[id]);
                   const r = document.getElementById('graph').getBoundingClientRect();
                   return [p.x + r.left, p.y + r.top]; }""",
        node_id,
    )
    page.mouse.click(x, y)


def node_labels(page):
    return set(page.evaluate("() => kgrViz.nodes.get().map(n => n.label)"))


def visible_node_ids(page):
    return set(page.evaluate("() => kgrViz.network.body.nodeIndices.slice()"))


def mcp_ingest(db: Path, paths: list[str]) -> dict:
    """Call the MCP tool ingest_docs of a `kgr serve` subprocess over stdio (the SDK's client)."""
    import anyio
    import orjson
    from mcp import Client, StdioServerParameters

    async def main():
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "kgr", "serve", "--db", str(db)], env={**os.environ, **STUB_ENV}
        )
        async with Client(params) as client:
            result = await client.call_tool("ingest_docs", {"paths": paths})
            assert not result.is_error, result
            return orjson.loads(result.content[0].text)

    # Its own thread and event loop: Playwright's sync API owns this thread's.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, main).result(timeout=300)


def test_page_draws_the_graph_and_shows_details_of_a_clicked_node(built_kb, serve_viz, page):
    db, _ = built_kb
    server = serve_viz(db)
    open_page(page, server)
    api = page.evaluate("() => kgrViz.state.lastGraph")
    assert page.evaluate("() => kgrViz.nodes.length") == len(api["nodes"]) > 0
    assert page.evaluate("() => kgrViz.edges.length") == len(api["edges"]) > 0
    status = page.inner_text("#status")
    assert f"{len(api['nodes'])} of {api['totals']['entities']} entities" in status and "live" in status

    # Legend: one entry per type in view, in the type's colour.
    legend = page.evaluate("""() => [...document.querySelectorAll('#legend li')].map(li =>
        [li.querySelector('input').dataset.type, getComputedStyle(li.querySelector('.swatch')).backgroundColor])""")
    assert [t for t, _ in legend] == sorted(api["types"])
    for t, css in legend:
        hex_ = api["types"][t]
        assert css == "rgb({}, {}, {})".format(*(int(hex_[i : i + 2], 16) for i in (1, 3, 5))), t

    # Click a node: its details, and its neighbourhood grows.
    fare = entity_id(db, "Fare Engine")
    click_node(page, fare)
    page.wait_for_selector("#details:not([hidden]) h2")
    assert page.inner_text("#details h2") == "Fare Engine"
    assert page.inner_text("#details .type-badge") == "SERVICE"
    assert "FE" in page.inner_text("#details .aliases").split(", ")
    relations = page.inner_text("#details ul.relations")
    assert "owned_by" in relations and "Rider Systems" in relations and "services/fare-engine.md" in relations
    marks = page.evaluate("() => [...document.querySelectorAll('#details ul.sources mark')].map(m => m.textContent)")
    assert marks and all(m.lower() in ("fare engine", "fe", "fare-engine") for m in marks), marks
    wait_until(page, "id => kgrViz.state.expand.includes(id)", arg=fare, what="the click to expand the node")

    # A relation in the details panel leads to that entity.
    page.click("#details ul.relations .entity-link >> text=Rider Systems")
    wait_until(
        page,
        "() => document.querySelector('#details h2').textContent === 'Rider Systems'",
        what="Rider Systems' details",
    )

    # Drag a node, zoom with the wheel, pan by dragging the background.
    wait_until(page, "() => kgrViz.state.stable", timeout=30, what="the layout to settle")
    before = page.evaluate("id => kgrViz.network.getPositions([id])[id]", fare)
    x, y = page.evaluate(
        """id => { const net = kgrViz.network, p = net.canvasToDOM(net.getPositions([id])[id]);
        const r = document.getElementById('graph').getBoundingClientRect(); return [p.x + r.left, p.y + r.top]; }""",
        fare,
    )
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 60, y + 40, steps=8)
    page.mouse.move(x + 120, y + 80, steps=8)
    after_drag = page.evaluate("id => kgrViz.network.getPositions([id])[id]", fare)
    page.mouse.up()
    assert abs(after_drag["x"] - before["x"]) > 30 and abs(after_drag["y"] - before["y"]) > 20, (before, after_drag)
    scale = page.evaluate("() => kgrViz.network.getScale()")
    box = page.locator("#graph").bounding_box()
    page.mouse.move(box["x"] + 10, box["y"] + 10)
    page.mouse.wheel(0, -400)
    wait_until(page, "s => kgrViz.network.getScale() > s * 1.05", arg=scale, what="zoom in")
    view = page.evaluate("() => kgrViz.network.getViewPosition()")
    page.mouse.down()
    page.mouse.move(box["x"] + 110, box["y"] + 90, steps=8)
    page.mouse.up()
    moved = page.evaluate("() => kgrViz.network.getViewPosition()")
    assert abs(moved["x"] - view["x"]) > 20 and abs(moved["y"] - view["y"]) > 20, (view, moved)

    # Labels toggle.
    page.uncheck("#labels")
    assert page.evaluate("id => kgrViz.network.body.nodes[id].options.font.size", fare) == 0
    page.check("#labels")
    assert page.evaluate("id => kgrViz.network.body.nodes[id].options.font.size", fare) == 14

    # Filter by type, then by relation.
    services = {n["id"] for n in page.evaluate("() => kgrViz.state.lastGraph.nodes") if n["type"] == "SERVICE"}
    assert services and services <= visible_node_ids(page)
    page.uncheck("#legend input[data-type=SERVICE]")
    assert not services & visible_node_ids(page) and visible_node_ids(page)
    page.check("#legend input[data-type=SERVICE]")
    assert services <= visible_node_ids(page)
    owned = {e["id"] for e in page.evaluate("() => kgrViz.state.lastGraph.edges") if e["rel"] == "owned_by"}
    page.uncheck("#rel-filters input[data-rel=owned_by]")
    shown_edges = set(page.evaluate("() => kgrViz.network.body.edgeIndices.slice()"))
    assert owned and not owned & shown_edges and shown_edges
    page.check("#rel-filters input[data-rel=owned_by]")

    # Search: pick a hit, the view focuses on it.
    ledger = entity_id(db, "Ledger Store")
    page.fill("#search", "Ledger")
    page.wait_for_selector(f"#search-results li[data-id='{ledger}']")
    page.click(f"#search-results li[data-id='{ledger}']")
    wait_until(
        page,
        "() => document.querySelector('#details h2').textContent === 'Ledger Store'",
        what="Ledger Store's details",
    )
    assert page.evaluate("() => kgrViz.state.focus") == [ledger]
    assert page.evaluate("() => kgrViz.state.lastGraph.nodes[0].id") == ledger

    # Enter searches: the view starts from every hit; Overview goes back.
    page.fill("#search", "fare")
    page.press("#search", "Enter")
    wait_until(
        page,
        "() => kgrViz.state.q === 'fare' && kgrViz.state.lastGraph.nodes.some(n => n.seed && n.name === 'Fare Engine')",
        what="the search view",
    )
    page.click("#overview")
    wait_until(
        page,
        "() => kgrViz.state.q === null && kgrViz.state.focus.length === 0 && kgrViz.state.lastGraph.nodes.length === "
        + str(len(api["nodes"])),
        what="the overview again",
    )
    assert not page.problems, page.problems


def test_page_follows_changes_made_through_mcp_and_pauses(kb, serve_viz, page, tmp_path):
    db, root = kb
    server = serve_viz(db)
    open_page(page, server)
    fare = entity_id(db, "Fare Engine")
    click_node(page, fare)
    wait_until(
        page,
        "id => kgrViz.state.expand.includes(id) && document.querySelector('#details h2')",
        arg=fare,
        what="Fare Engine expanded",
    )
    assert "Ticket Office Gateway" not in node_labels(page)

    (root / "services" / "ticket-office.md").write_text(
        "# Ticket Office Gateway\n\nThe Ticket Office Gateway is the counter service for paper tickets.\n\n"
        "- **Owner:** Rider Systems\n- The Ticket Office Gateway depends on the Fare Engine to price each ticket.\n"
    )
    summary = mcp_ingest(db, ["services/ticket-office.md"])
    assert summary["ingested"] == 1 and summary["failed"] == 0
    done = time.monotonic()
    wait_until(
        page,
        "() => kgrViz.nodes.get().some(n => n.label === 'Ticket Office Gateway')",
        timeout=POLL_S + SLACK_S,
        what="the new entity on the page",
    )
    seen_after = time.monotonic() - done
    gateway = entity_id(db, "Ticket Office Gateway")
    edge = page.evaluate(
        "([a, b]) => kgrViz.edges.get().filter(e => e.from === a && e.to === b).map(e => e.rel)", [gateway, fare]
    )
    assert edge == ["depends_on"]
    # The open details panel follows too.
    wait_until(
        page,
        "() => document.querySelector('#details ul.relations').textContent.includes('Ticket Office Gateway')",
        timeout=POLL_S + SLACK_S,
        what="the new relation in the details panel",
    )
    wait_until(page, "() => kgrViz.state.stable", timeout=30, what="the layout to settle")

    box = page.locator("#graph").bounding_box()
    page.mouse.move(box["x"] + 8, box["y"] + 8)  # an empty corner: no hover tooltip in the picture
    page.wait_for_timeout(400)
    shot = tmp_path / "viz.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 20_000
    if SCREENSHOT:
        Path(SCREENSHOT).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)

    # Paused, the page keeps what it shows; resumed, it catches up.
    page.click("#pause")
    assert "paused" in page.inner_text("#status") and page.inner_text("#pause") == "Resume"
    (root / "services" / "kiosk.md").write_text("# Ticket Kiosk\n\nThe Ticket Kiosk depends on the Fare Engine.\n")
    assert mcp_ingest(db, ["services/kiosk.md"])["ingested"] == 1
    assert entity_id(db, "Ticket Kiosk") is not None
    updates = page.evaluate("() => kgrViz.state.updates")
    time.sleep(POLL_S * 2 + 0.5)
    assert page.evaluate("() => kgrViz.state.updates") == updates
    assert "Ticket Kiosk" not in node_labels(page)
    page.click("#pause")
    wait_until(
        page,
        "() => kgrViz.nodes.get().some(n => n.label === 'Ticket Kiosk')",
        timeout=POLL_S + SLACK_S,
        what="the change made while paused",
    )
    assert "live" in page.inner_text("#status")

    # An observation changes no node or edge, and still reaches the open details panel.
    note = "Also prices paper tickets, for the Ticket Office Gateway"
    with Store(db) as store, store.write() as conn:
        conn.execute(
            "INSERT INTO observations(entity_id, content, source, created_ms) VALUES (?, ?, 'manual', ?)",
            (fare, note, now_ms()),
        )
    wait_until(
        page,
        "t => [...document.querySelectorAll('#details ul.observations li')].some(li => li.textContent === t)",
        arg=note,
        timeout=POLL_S + SLACK_S,
        what="the new observation in the details panel",
    )
    assert page.inner_text("#details h2") == "Fare Engine"
    assert not page.problems, page.problems
    print(f"new entity on the page {seen_after:.1f} s after ingest_docs returned; screenshot {shot}")


HOSTILE = '<img src=x onerror="window.pwned=1">Evil & "Co"'


def test_names_from_documents_are_shown_as_text_never_as_markup(tmp_path, serve_viz, page):
    db = tmp_path / "hostile.sqlite"
    with Store(db) as store, store.write() as conn:
        conn.execute(
            "INSERT INTO entities(id, key, name, type, norm, aliases, origin) VALUES "
            "(1, 'x:evil', ?, '<b>TYPE</b>', 'evil', ?, 'manual')",
            (HOSTILE, '["<script>window.pwned=2</script>"]'),
        )
        conn.execute(
            "INSERT INTO entities(id, key, name, type, norm, origin) VALUES (2, 'x:ok', 'Plain', 'ORG', 'plain', 'manual')"
        )
        conn.execute("INSERT INTO relations(src_id, dst_id, rel, origin) VALUES (1, 2, '<i>uses</i>', 'manual')")
        conn.execute(
            "INSERT INTO observations(entity_id, content) VALUES (1, '<img src=y onerror=\"window.pwned=3\">')"
        )
    server = serve_viz(db)
    open_page(page, server)
    click_node(page, 1)
    page.wait_for_selector("#details:not([hidden]) h2")
    assert page.inner_text("#details h2") == HOSTILE
    assert page.inner_text("#details .aliases") == "<script>window.pwned=2</script>"
    assert page.inner_text("#details ul.observations") == '<img src=y onerror="window.pwned=3">'
    assert "<b>TYPE</b>" in page.inner_text("#legend")
    page.mouse.move(
        *page.evaluate("""() => { const net = kgrViz.network, p = net.canvasToDOM(net.getPositions([1])[1]);
        const r = document.getElementById('graph').getBoundingClientRect(); return [p.x + r.left + 1, p.y + r.top + 1]; }""")
    )
    page.wait_for_selector(".vis-tooltip", state="visible")
    assert page.inner_text(".vis-tooltip").startswith(HOSTILE)
    assert (
        page.evaluate(
            "() => document.querySelectorAll('#details img, #details script, .vis-tooltip img, #legend b, "
            "#rel-filters i').length"
        )
        == 0
    )
    assert page.evaluate("() => window.pwned") is None
    assert not page.problems, page.problems
