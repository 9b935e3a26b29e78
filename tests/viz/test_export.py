"""kgr export: GraphML read back by networkx, DOT checked by Graphviz, Mermaid by its grammar."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import networkx as nx
import orjson
import pytest
from click.testing import CliRunner

from kgr import export
from kgr.cli import cli
from kgr.store import Store

# Mermaid's browser build, put there by .ci/run (npm registry tarball); read at import, before
# the suite's autouse fixture clears KGR_* variables.
MERMAID_JS = Path(
    os.environ.get("KGR_MERMAID_JS") or Path(__file__).resolve().parents[2] / ".ci/node/mermaid/mermaid.min.js"
)

TRICKY = 'Q&A <Desk> "quoted" \\ back|pipe #1 `tick`\nsecond line\x01'


def tiny_db(path) -> dict[str, int]:
    """Three entities (one with every character the formats must escape) and two edges."""
    with Store(path) as store, store.write() as conn:
        ids = {}
        for key, name, typ, aliases in (
            ("svc:a", "Alpha Service", "SERVICE", ["AS"]),
            ("team:b", "Team Bravo", "TEAM", []),
            ("x:tricky", TRICKY, "WEIRD TYPE", ["ünïcode ✓"]),
        ):
            conn.execute(
                "INSERT INTO entities(key, name, type, norm, aliases, origin) VALUES (?, ?, ?, ?, ?, 'manual')",
                (key, name, typ, key, orjson.dumps(aliases).decode()),
            )
            ids[key] = conn.last_insert_rowid()
        conn.execute(
            "INSERT INTO relations(src_id, dst_id, rel, confidence, origin) VALUES (?, ?, 'owned_by', 0.9, 'manual')",
            (ids["svc:a"], ids["team:b"]),
        )
        conn.execute(
            "INSERT INTO relations(src_id, dst_id, rel, confidence, origin) VALUES (?, ?, 'uses', 0.4, 'manual')",
            (ids["x:tricky"], ids["svc:a"]),
        )
    return ids


def run_export(db, *args) -> str:
    out = io.StringIO()
    with Store(db, readonly=True) as store:
        export.export(store, args[0], out, **(args[1] if len(args) > 1 else {}))
    return out.getvalue()


def test_graphml_of_the_examples_is_read_back_by_networkx(built_kb, tmp_path):
    db, _ = built_kb
    target = tmp_path / "kb.graphml"
    result = CliRunner().invoke(cli, ["export", "--format", "graphml", "--db", str(db), "-o", str(target)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""  # data went to the file
    graph = nx.read_graphml(target)
    with Store(db, readonly=True) as store:
        n_ent = store.scalar("SELECT count(*) FROM entities")
        n_rel = store.scalar("SELECT count(*) FROM relations")
        fe_id, fe_aliases = store.query("SELECT id, aliases FROM entities WHERE name = 'Fare Engine'")[0]
        owner = store.scalar(
            "SELECT b.name FROM relations r JOIN entities b ON b.id = r.dst_id "
            "WHERE r.src_id = ? AND r.rel = 'owned_by'",
            (fe_id,),
        )
    assert f"exported {n_ent} entities and {n_rel} relations as graphml" in result.stderr
    assert graph.number_of_nodes() == n_ent and graph.number_of_edges() == n_rel
    fare = graph.nodes[f"n{fe_id}"]
    assert fare["label"] == "Fare Engine" and fare["type"] == "SERVICE"
    assert sorted(orjson.loads(fare["aliases"])) == sorted(orjson.loads(fe_aliases))
    owned = [graph.nodes[v]["label"] for _, v, d in graph.out_edges(f"n{fe_id}", data=True) if d["rel"] == "owned_by"]
    assert owned == [owner]


def test_graphml_escapes_markup_and_drops_characters_xml_cannot_hold(tmp_path):
    db = tmp_path / "t.sqlite"
    ids = tiny_db(db)
    text = run_export(db, "graphml")
    ET.fromstring(text.encode())  # well-formed XML
    graph = nx.read_graphml(io.BytesIO(text.encode()))
    tricky = graph.nodes[f"n{ids['x:tricky']}"]
    assert tricky["label"] == TRICKY.replace("\x01", "\ufffd")
    assert tricky["type"] == "WEIRD TYPE" and orjson.loads(tricky["aliases"]) == ["ünïcode ✓"]
    edge = graph.edges[f"n{ids['svc:a']}", f"n{ids['team:b']}"]
    assert edge["rel"] == "owned_by" and edge["confidence"] == pytest.approx(0.9)


DOT_STRING = r'"((?:[^"\\]|\\.)*)"'


def dot_unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def test_dot_labels_round_trip_and_graphviz_accepts_the_file(tmp_path):
    db = tmp_path / "t.sqlite"
    ids = tiny_db(db)
    text = run_export(db, "dot")
    assert text.startswith("digraph kgr {\n") and text.endswith("}\n")
    labels = {
        int(m.group(1)): dot_unescape(m.group(2)) for m in re.finditer(r"^  n(\d+) \[label=" + DOT_STRING, text, re.M)
    }
    assert labels[ids["x:tricky"]] == TRICKY.replace("\x01", " ")
    assert labels[ids["svc:a"]] == "Alpha Service"
    edges = re.findall(r"^  n(\d+) -> n(\d+) \[label=" + DOT_STRING + r"\];$", text, re.M)
    assert sorted(edges) == sorted(
        [(str(ids["svc:a"]), str(ids["team:b"]), "owned_by"), (str(ids["x:tricky"]), str(ids["svc:a"]), "uses")]
    )
    assert f'fillcolor="{export.type_color("SERVICE")}"' in text
    dot = shutil.which("dot")
    if dot is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("graphviz is not installed; .ci/run installs it")
        pytest.skip("graphviz (dot) is not installed: the syntax check needs it")
    proc = subprocess.run([dot, "-Tsvg"], input=text, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    assert "Alpha Service" in proc.stdout and "Q&amp;A &lt;Desk&gt;" in proc.stdout


def test_dot_of_the_examples_is_accepted_by_graphviz(built_kb):
    dot = shutil.which("dot")
    if dot is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("graphviz is not installed; .ci/run installs it")
        pytest.skip("graphviz (dot) is not installed")
    text = run_export(built_kb[0], "dot")
    proc = subprocess.run([dot, "-Tsvg"], input=text, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count('class="node"') == text.count("[label=") - text.count(" -> ")


MERMAID_LINE = re.compile(
    r'^  (?:n\d+\["[^"\n|<>#`]*(?:#\w+;[^"\n|<>#`]*)*"\]:::t_\w+'  # node
    r'|n\d+ -->\|"[^"\n|<>#`]*"\| n\d+'  # edge
    r"|classDef t_\w+ fill:#[0-9a-f]{6},stroke:#333,color:#111)$"  # class
)


def test_mermaid_is_a_flowchart_with_escaped_labels(tmp_path):
    db = tmp_path / "t.sqlite"
    ids = tiny_db(db)
    text = run_export(db, "mermaid")
    lines = text.splitlines()
    assert lines[0] == "graph LR"
    bad = [line for line in lines[1:] if not MERMAID_LINE.match(line)]
    assert not bad, bad
    tricky = next(line for line in lines if line.startswith(f"  n{ids['x:tricky']}["))
    assert (
        "#quot;quoted#quot;" in tricky and "#lt;Desk#gt;" in tricky and "back#124;pipe" in tricky and "#35;1" in tricky
    )
    assert tricky.endswith(":::t_WEIRD_TYPE")
    assert f'  n{ids["svc:a"]} -->|"owned_by"| n{ids["team:b"]}' in lines
    assert f"  classDef t_SERVICE fill:{export.type_color('SERVICE')},stroke:#333,color:#111" in lines


def test_mermaid_itself_parses_and_draws_the_export(tmp_path, built_kb, chromium):
    if not MERMAID_JS.is_file():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{MERMAID_JS} is missing; .ci/run puts it there")
        pytest.skip(f"needs Mermaid's browser build at {MERMAID_JS} (see .ci/run) or $KGR_MERMAID_JS")
    db = tmp_path / "t.sqlite"
    tiny_db(db)
    page = chromium.new_page()
    try:
        page.set_content("<div id='out'></div>")
        page.add_script_tag(path=str(MERMAID_JS))
        draw = """async text => {
            mermaid.initialize({startOnLoad: false, securityLevel: 'strict'});
            await mermaid.parse(text);
            const {svg} = await mermaid.render('g' + Math.random().toString(36).slice(2), text);
            const out = document.getElementById('out');
            out.innerHTML = svg;
            return {nodes: [...out.querySelectorAll('.nodeLabel')].map(n => n.textContent),
                    edges: [...out.querySelectorAll('.edgeLabel')].map(n => n.textContent).filter(t => t)};
        }"""
        tiny = page.evaluate(draw, run_export(db, "mermaid"))
        assert sorted(tiny["nodes"]) == sorted(
            ["Alpha Service", "Team Bravo", " ".join(TRICKY.replace("\x01", "").split())]
        )
        assert sorted(set(tiny["edges"])) == ["owned_by", "uses"]
        kb = page.evaluate(draw, run_export(built_kb[0], "mermaid"))
        with Store(built_kb[0], readonly=True) as store:
            names = [r[0] for r in store.query("SELECT name FROM entities")]
        assert sorted(kb["nodes"]) == sorted(" ".join(n.split()) for n in names)
    finally:
        page.close()


def test_type_and_relation_filters(built_kb):
    db, _ = built_kb
    result = CliRunner().invoke(
        cli, ["export", "--format", "graphml", "--db", str(db), "--type", "SERVICE,team", "--type", "PERSON"]
    )
    assert result.exit_code == 0, result.stderr
    graph = nx.read_graphml(io.BytesIO(result.stdout.encode()))
    with Store(db, readonly=True) as store:
        expected = store.scalar("SELECT count(*) FROM entities WHERE type IN ('SERVICE', 'TEAM', 'PERSON')")
        expected_edges = store.scalar(
            "SELECT count(*) FROM relations r JOIN entities a ON a.id = r.src_id JOIN entities b ON b.id = r.dst_id "
            "WHERE a.type IN ('SERVICE', 'TEAM', 'PERSON') AND b.type IN ('SERVICE', 'TEAM', 'PERSON')"
        )
    assert {d["type"] for _, d in graph.nodes(data=True)} <= {"SERVICE", "TEAM", "PERSON"}
    assert graph.number_of_nodes() == expected > 0 and graph.number_of_edges() == expected_edges > 0
    only = CliRunner().invoke(cli, ["export", "--format", "mermaid", "--db", str(db), "--rel", "owned_by"])
    rels = set(re.findall(r'-->\|"(\w+)"\|', only.stdout))
    assert rels == {"owned_by"}


def test_errors_are_one_clear_line(tmp_path, built_kb):
    runner = CliRunner()
    missing = runner.invoke(cli, ["export", "--format", "dot", "--db", str(tmp_path / "none.sqlite")])
    assert missing.exit_code == 1 and missing.stderr.startswith("Error: database not found")
    bad = runner.invoke(cli, ["export", "--format", "gexf", "--db", str(built_kb[0])])
    from kgr.export import FORMATS

    choices = ", ".join(f"'{name}'" for name in sorted(FORMATS))
    assert bad.exit_code == 2 and f"'gexf' is not one of {choices}" in bad.stderr
    no_dir = runner.invoke(
        cli, ["export", "--format", "dot", "--db", str(built_kb[0]), "-o", str(tmp_path / "no" / "x.dot")]
    )
    assert no_dir.exit_code == 1 and "No such file or directory" in no_dir.stderr
    assert not (tmp_path / "no").exists()


def test_a_new_format_is_one_registered_function(tmp_path, monkeypatch):
    monkeypatch.setattr(export, "FORMATS", dict(export.FORMATS))

    @export.exporter("edgelist", suffix=".txt", help="one edge per line")
    def write_edgelist(graph, out):
        names = {n["id"]: n["name"] for n in graph.nodes()}
        for e in graph.edges():
            out.write(f"{names[e['src']]}\t{e['rel']}\t{names[e['dst']]}\n")

    db = tmp_path / "t.sqlite"
    tiny_db(db)
    out = io.StringIO()
    with Store(db, readonly=True) as store:
        counts = export.export(store, "edgelist", out)
    assert "Alpha Service\towned_by\tTeam Bravo\n" in out.getvalue() and counts == {"nodes": 3, "edges": 2}
    with pytest.raises(ValueError, match="already registered"):
        export.exporter("edgelist", suffix=".x", help="")(write_edgelist)


def test_the_command_offers_every_registered_format():
    result = CliRunner().invoke(cli, ["export", "--help"])
    assert all(name in result.stdout for name in export.FORMATS)
