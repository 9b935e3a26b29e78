"""kgr export --format neo4j / cypher, loaded into a real embedded Cypher engine.

The engine is Ladybug (``real_ladybug`` on PyPI), the maintained fork of Kùzu (archived in 2025), or
Kùzu itself when only that is installed. Kùzu's Cypher needs a schema (one table per node label and per
relationship type), so the test builds it from the neo4j-admin typed headers, then loads the graph twice:

- the CSV files, read by Python's RFC 4180 reader and converted by their header types (``:ID(Space)``,
  ``:START_ID``/``:END_ID``, ``:TYPE``, ``name:double``, ``name:string[]`` split on the array delimiter);
- the Cypher script's own statements, each run once per row of its UNWIND list (Kùzu cannot type a
  literal list of maps whose values are sometimes null), the row's values read from the script's
  literals by a small Cypher literal parser.

On each loaded engine, shortest paths and one- and two-hop neighbourhoods asked in Cypher must equal
what `kgr path` and `kgr explain` answer on the SQLite knowledge base.
"""

from __future__ import annotations

import csv
import importlib
import os
import re
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from kgr import export
from kgr.cli import cli
from kgr.store import Store


def _engine():
    for name in ("real_ladybug", "kuzu"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    reason = "no embedded Cypher engine: pip install real_ladybug (the test extra installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason + "; CI installs it")
    pytest.skip(reason)


KUZU_TYPES = {
    "string": "STRING",
    "int": "INT64",
    "long": "INT64",
    "double": "DOUBLE",
    "float": "DOUBLE",
    "boolean": "BOOLEAN",
}
TRICKY = 'Q&A, "quoted" \\ back;semi\nsecond line\x01 ünïcode ✓ `tick`'


# -- reading the neo4j-admin files -------------------------------------------------------------------------


def parse_header(field: str) -> tuple[str, str, str | None]:
    """(property name, kind, id space or type): kind is ID, START_ID, END_ID, LABEL, TYPE or a value type."""
    m = re.fullmatch(r"([^:]*):(ID|START_ID|END_ID)\((\w+)\)", field)
    if m:
        return m.group(1), m.group(2), m.group(3)
    if field in (":LABEL", ":TYPE"):
        return "", field[1:], None
    name, _, kind = field.partition(":")
    assert name, f"a property column needs a name: {field!r}"
    kind = kind or "string"
    base = kind.removesuffix("[]")
    assert base in KUZU_TYPES, f"not a neo4j-admin type: {field!r}"
    return name, kind, None


def convert(text: str, kind: str):
    if kind.endswith("[]"):
        return [convert(v, kind[:-2]) for v in text.split(export.ARRAY_DELIMITER)] if text else []
    if text == "":
        return None
    if kind in ("int", "long"):
        return int(text)
    if kind in ("double", "float"):
        return float(text)
    return text


def read_import(out_dir: Path) -> list[tuple[str, str | None, Path]]:
    """The files import.sh loads: (nodes or relationships, label or type given there, path)."""
    script = (out_dir / "import.sh").read_text()
    assert "neo4j-admin database import full" in script and "--array-delimiter=U+001F" in script
    files = []
    for kind, given, name in re.findall(r"--(nodes|relationships)=(?:(\w+)=)?(\S+)", script):
        files.append((kind, given or None, out_dir / name))
    listed = {p.name for _, _, p in files}
    assert listed == {p.name for p in out_dir.glob("*.csv")}, "import.sh loads every CSV file, and only those"
    return files


class Graph:
    """An in-memory engine with the schema the neo4j-admin headers describe."""

    def __init__(self, files):
        engine = _engine()
        self.conn = engine.Connection(engine.Database(":memory:"))
        self.files = []
        self.rel_types: set[str] = set()
        nodes: dict[str, list[tuple[str, str]]] = {}
        rels: dict[str, tuple[str, str, list[tuple[str, str]]]] = {}
        for kind, given, path in files:
            with open(path, encoding="utf-8", newline="") as f:
                reader = csv.reader(f)
                header = [parse_header(h) for h in next(reader)]
                types = (
                    {row[[k for _, k, _ in header].index("TYPE")] for row in reader}
                    if (kind, given) == ("relationships", None)
                    else set()
                )
            props = [(n, k) for n, k, _ in header if n and k not in ("START_ID", "END_ID")]
            props = [(n, "long" if k == "ID" else k) for n, k in props]
            if kind == "nodes":
                space = next(s for _, k, s in header if k == "ID")
                assert given in (None, space), f"{path.name}: --nodes={given} but its ids are in space {space}"
                has_label = any(k == "LABEL" for _, k, _ in header)
                nodes[space] = props + ([("labels", "string[]")] if has_label else [])
            else:
                start = next(s for _, k, s in header if k == "START_ID")
                end = next(s for _, k, s in header if k == "END_ID")
                for t in types or {given}:
                    rels[t] = (start, end, props)
                    self.rel_types.add(t)
            self.files.append((kind, given, path, header))
        for space, props in nodes.items():
            cols = ", ".join(f"`{n}` {kuzu_type(k)}" for n, k in props)
            self.run(f"CREATE NODE TABLE `{space}`({cols}, PRIMARY KEY(kgrId))")
        for t, (start, end, props) in rels.items():
            cols = "".join(f", `{n}` {kuzu_type(k)}" for n, k in props)
            self.run(f"CREATE REL TABLE {export.cypher_name(t)}(FROM `{start}` TO `{end}`{cols})")
        self.relations = "|".join(export.cypher_name(t) for t in sorted(self.rel_types - {"HAS_CHUNK", "MENTIONS"}))

    def run(self, query: str, params: dict | None = None) -> list[list]:
        result = self.conn.execute(query, params or {})
        rows = []
        while result.has_next():
            rows.append(result.get_next())
        return rows

    def load_csv(self) -> None:
        for kind, given, path, header in self.files:
            with open(path, encoding="utf-8", newline="") as f:
                reader = csv.reader(f)
                next(reader)
                for row in reader:
                    assert len(row) == len(header), f"{path.name}: {len(row)} fields under {len(header)} headers"
                    values, labels, start, end, rtype = {}, None, None, None, given
                    for text, (name, kind_, space) in zip(row, header):
                        if kind_ == "ID":
                            values[name] = int(text)
                        elif kind_ == "START_ID":
                            start = (space, int(text))
                        elif kind_ == "END_ID":
                            end = (space, int(text))
                        elif kind_ == "LABEL":
                            labels = text.split(";")
                        elif kind_ == "TYPE":
                            rtype = text
                        else:
                            values[name] = convert(text, kind_)
                    sets = ", ".join(f"`{n}`: ${n}" for n in values)
                    if kind == "nodes":
                        space = next(s for _, k, s in header if k == "ID")
                        if labels is not None:
                            assert labels[0] == space
                            values["labels"] = labels
                            sets += ", labels: $labels"
                        self.run(f"CREATE (:`{space}` {{{sets}}})", values)
                    else:
                        self.run(
                            f"MATCH (a:`{start[0]}` {{kgrId: $_a}}), (b:`{end[0]}` {{kgrId: $_b}}) "
                            f"CREATE (a)-[:{export.cypher_name(rtype)} {{{sets}}}]->(b)",
                            {**values, "_a": start[1], "_b": end[1]},
                        )

    def load_cypher(self, script: str) -> int:
        """Run the script's statements, each once per row of its UNWIND list; return the rows run."""
        runs = 0
        statements = [_drop_comments(s) for s in script.split(";\n")]
        body = re.compile(r"UNWIND \[\n(.*)\n\] AS row\n(.*)", re.S)
        for statement in filter(None, statements):
            m = body.fullmatch(statement)
            assert m, f"not an UNWIND batch: {statement[:200]!r}"
            lines = m.group(1).split(",\n")
            assert 1 <= len(lines) <= export.CYPHER_BATCH
            # Kùzu has a table per label, so adding a label is not a statement it runs; the label must be the type.
            tail = m.group(2)
            extra = re.search(r"\nSET n:`((?:[^`]|``)*)`$", tail)
            if extra:
                tail = tail[: extra.start()]
            for line in lines:
                row = CypherLiteral(line.strip()).value()
                if extra:
                    assert extra.group(1).replace("``", "`") == row["type"]
                    row["labels"] = ["Entity", row["type"]]
                    tail += "" if "n.labels" in tail else ", n.labels = row.labels"
                query = re.sub(r"\brow\.(\w+)", r"$\1", tail)
                self.run(query, row)
                runs += 1
        return runs


def _drop_comments(statement: str) -> str:
    return "\n".join(line for line in statement.split("\n") if not line.startswith("//")).strip("\n")


def kuzu_type(kind: str) -> str:
    return KUZU_TYPES[kind[:-2]] + "[]" if kind.endswith("[]") else KUZU_TYPES[kind]


class CypherLiteral:
    """Reads the literals the export writes: maps, lists, single-quoted strings, numbers, null, booleans."""

    ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}

    def __init__(self, text: str):
        self.text, self.i = text, 0

    def value(self):
        v = self._value()
        assert self.i == len(self.text), f"trailing text in {self.text[self.i :]!r}"
        return v

    def _skip(self) -> None:
        while self.i < len(self.text) and self.text[self.i] == " ":
            self.i += 1

    def _value(self):
        self._skip()
        ch = self.text[self.i]
        if ch == "{":
            out = {}
            self.i += 1
            while True:
                self._skip()
                if self.text[self.i] == "}":
                    self.i += 1
                    return out
                key = re.match(r"\w+", self.text[self.i :]).group(0)
                self.i += len(key)
                assert self.text[self.i : self.i + 2] == ": "
                self.i += 2
                out[key] = self._value()
                self._skip()
                if self.text[self.i] == ",":
                    self.i += 1
        if ch == "[":
            items = []
            self.i += 1
            while True:
                self._skip()
                if self.text[self.i] == "]":
                    self.i += 1
                    return items
                items.append(self._value())
                self._skip()
                if self.text[self.i] == ",":
                    self.i += 1
        if ch == "'":
            out_chars = []
            self.i += 1
            while self.text[self.i] != "'":
                c = self.text[self.i]
                if c == "\\":
                    nxt = self.text[self.i + 1]
                    if nxt == "u":
                        out_chars.append(chr(int(self.text[self.i + 2 : self.i + 6], 16)))
                        self.i += 6
                        continue
                    out_chars.append(self.ESCAPES[nxt])
                    self.i += 2
                    continue
                assert c >= " ", "control characters are escaped"
                out_chars.append(c)
                self.i += 1
            self.i += 1
            return "".join(out_chars)
        m = re.match(r"null|true|false|-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", self.text[self.i :])
        assert m, f"not a literal: {self.text[self.i : self.i + 40]!r}"
        self.i += len(m.group(0))
        word = m.group(0)
        if word in ("null", "true", "false"):
            return {"null": None, "true": True, "false": False}[word]
        return float(word) if any(c in word for c in ".e") else int(word)


# -- fixtures ----------------------------------------------------------------------------------------------


def export_neo4j(db: Path, out_dir: Path) -> list:
    result = CliRunner().invoke(cli, ["export", "--format", "neo4j", "--db", str(db), "-o", str(out_dir)])
    assert result.exit_code == 0, result.output
    return read_import(out_dir)


def export_cypher(db: Path, target: Path) -> str:
    result = CliRunner().invoke(cli, ["export", "--format", "cypher", "--db", str(db), "-o", str(target)])
    assert result.exit_code == 0, result.output
    return target.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def loaded(built_kb, tmp_path_factory):
    """The examples knowledge base, exported both ways, each loaded into its own engine."""
    _engine()
    db = built_kb[0]
    tmp = tmp_path_factory.mktemp("graphdb")
    files = export_neo4j(db, tmp / "neo4j")
    from_csv = Graph(files)
    from_csv.load_csv()
    from_script = Graph(files)
    from_script.load_cypher(export_cypher(db, tmp / "kb.cypher"))
    return db, {"csv": from_csv, "cypher": from_script}


def kgr_json(*args) -> dict:
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    value = orjson.loads(result.output)
    return value[0] if isinstance(value, list) else value


def relation_ids(db: Path) -> dict[tuple[int, str, int], int]:
    with Store(db, readonly=True) as store:
        return {(s, r, d): i for i, s, r, d in store.query("SELECT id, src_id, rel, dst_id FROM relations")}


def connected(db: Path) -> list[int]:
    with Store(db, readonly=True) as store:
        return [
            i
            for (i,) in store.query(
                "SELECT id FROM entities WHERE id IN (SELECT src_id FROM relations UNION SELECT dst_id FROM relations) "
                "ORDER BY id"
            )
        ]


# -- tests -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["csv", "cypher"])
def test_the_whole_graph_arrives(loaded, how):
    db, graphs = loaded
    g = graphs[how]
    with Store(db, readonly=True) as store:
        want = {
            "Entity": store.scalar("SELECT count(*) FROM entities"),
            "Document": store.scalar("SELECT count(*) FROM docs"),
            "Chunk": store.scalar("SELECT count(*) FROM chunks"),
        }
        per_rel = dict(store.query("SELECT rel, count(*) FROM relations GROUP BY rel"))
        mentions = store.scalar("SELECT count(*) FROM mentions WHERE entity_id IS NOT NULL")
        entity = store.query("SELECT id, name, type, aliases, popularity FROM entities ORDER BY id")
        evidence = store.query(
            "SELECT v.relation_id, v.sentence FROM relation_evidence v ORDER BY v.relation_id, v.confidence DESC, v.id"
        )
    assert all(want.values()) and per_rel and mentions
    for label, n in want.items():
        assert g.run(f"MATCH (n:{label}) RETURN count(*)") == [[n]], label
    for rel, n in per_rel.items():
        assert g.run(f"MATCH ()-[r:`{rel}`]->() RETURN count(*)") == [[n]], rel
    assert g.run("MATCH (:Chunk)-[m:MENTIONS]->(:Entity) RETURN count(*)") == [[mentions]]
    assert g.run("MATCH (d:Document)-[:HAS_CHUNK]->(c:Chunk) RETURN count(*)") == [[want["Chunk"]]]
    got = {
        r[0]: r[1:] for r in g.run("MATCH (n:Entity) RETURN n.kgrId, n.name, n.type, n.aliases, n.popularity, n.labels")
    }
    for i, name, type_, aliases, popularity in entity:
        assert got[i] == [name, type_, orjson.loads(aliases), popularity, ["Entity", type_]]
    sentences: dict[int, list[str]] = {}
    for rid, sentence in evidence:
        sentences.setdefault(rid, []).append(sentence or "")
    rows = g.run(f"MATCH ()-[r:{g.relations}]->() RETURN r.kgrId, r.evidenceSentences, r.confidence")
    assert len(rows) == sum(per_rel.values())
    for rid, got_sentences, confidence in rows:
        assert got_sentences == sentences.get(rid, [])
        assert 0 <= confidence <= 1


@pytest.mark.parametrize("how", ["csv", "cypher"])
def test_shortest_paths_match_kgr_path(loaded, how):
    """`kgr path A B` (edges both ways, every shortest path) = Cypher's ALL SHORTEST on the loaded graph."""
    db, graphs = loaded
    g = graphs[how]
    rel_id = relation_ids(db)
    ids = connected(db)
    sources, targets = ids[:: max(1, len(ids) // 6)][:6], ids[3 :: max(1, len(ids) // 8)][:8]
    found = lengths = 0
    for a in sources:
        for b in targets:
            if a == b:
                continue
            info = kgr_json("path", str(a), str(b), "--db", str(db), "--max-hops", "4", "--limit", "100")
            kgr = {
                (
                    tuple([a] + [s["to"] if s["forward"] else s["from"] for s in p]),
                    tuple(rel_id[(s["from"], s["rel"], s["to"])] for s in p),
                )
                for p in info["paths"]
            }
            rows = g.run(
                f"MATCH p = (a:Entity {{kgrId: $a}})-[:{g.relations}* ALL SHORTEST 1..4]-(b:Entity {{kgrId: $b}}) "
                "RETURN properties(nodes(p), 'kgrId'), properties(rels(p), 'kgrId')",
                {"a": a, "b": b},
            )
            cypher = {(tuple(n), tuple(r)) for n, r in rows}
            if len(info["paths"]) < 100:
                assert kgr == cypher, (a, b)
            else:
                assert kgr <= cypher, (a, b)
            found += bool(kgr)
            lengths |= 1 << len(next(iter(kgr))[1]) if kgr else 0
    assert found >= 5, "the sample holds connected pairs"
    assert bin(lengths).count("1") >= 2, "paths of more than one length were compared"


@pytest.mark.parametrize("how", ["csv", "cypher"])
def test_neighbourhoods_match_kgr_explain(loaded, how):
    """`kgr explain X`: its relations are X's one-hop edges there, its neighbourhood the two-hop shortest distances."""
    db, graphs = loaded
    g = graphs[how]
    compared = 0
    for eid in connected(db):
        info = kgr_json("explain", str(eid), "--db", str(db), "--hops", "2")
        edges = {
            r[0]: r[1:]
            for r in g.run(
                f"MATCH (a:Entity)-[r:{g.relations}]->(b:Entity) WHERE a.kgrId = $x OR b.kgrId = $x "
                "RETURN r.kgrId, a.kgrId, label(r), b.kgrId, r.confidence, r.evidencePaths, r.evidenceSentences",
                {"x": eid},
            )
        }
        assert {r["id"] for r in info["relations"]} <= set(edges)
        if len(info["relations"]) < 20:  # explain lists at most 20
            assert {r["id"] for r in info["relations"]} == set(edges), eid
        for r in info["relations"]:
            src, rel, dst, confidence, paths, sentences = edges[r["id"]]
            assert (src, rel, dst, round(confidence, 4)) == (r["src"], r["rel"], r["dst"], r["confidence"])
            assert [(e["path"], e["sentence"] or "") for e in r["evidence"]] == list(zip(paths, sentences))[:3]
        if info["neighbourhood"]["truncated"]:
            continue
        near = {
            n: d
            for n, d in g.run(
                f"MATCH p = (a:Entity {{kgrId: $x}})-[:{g.relations}* SHORTEST 1..2]-(b:Entity) "
                "WHERE b.kgrId <> $x RETURN b.kgrId, length(p)",
                {"x": eid},
            )
        }
        assert {n["id"]: n["distance"] for n in info["neighbourhood"]["nodes"] if n["distance"] > 0} == near, eid
        compared += 1
    assert compared >= 10


def test_tricky_text_round_trips(tmp_path):
    """Quotes, commas, the array delimiter's neighbours, line breaks and control characters survive both formats."""
    db = tmp_path / "t.sqlite"
    with Store(db) as store, store.write() as conn:
        for key, name, aliases in (("a", TRICKY, [TRICKY, "x,y"]), ("b", " padded ", [])):
            conn.execute(
                "INSERT INTO entities(key, name, type, norm, aliases, origin) VALUES (?, ?, 'WEIRD TYPE', ?, ?, 'manual')",
                (key, name, key, orjson.dumps(aliases).decode()),
            )
        conn.execute("INSERT INTO relations(src_id, dst_id, rel, confidence) VALUES (1, 2, 'odd rel`name', 0.5)")
    files = export_neo4j(db, tmp_path / "out")
    names = {p.name for _, _, p in files}
    assert export.relation_file_name("odd rel`name") in names
    for how, g in (("csv", Graph(files)), ("cypher", Graph(files))):
        if how == "csv":
            g.load_csv()
        else:
            g.load_cypher(export_cypher(db, tmp_path / "t.cypher"))
        got = sorted(tuple(r) for r in g.run("MATCH (n:Entity) RETURN n.kgrId, n.name, n.aliases, n.labels"))
        assert got == [
            (1, TRICKY, [TRICKY, "x,y"], ["Entity", "WEIRD TYPE"]),
            (2, " padded ", [], ["Entity", "WEIRD TYPE"]),
        ]
        assert g.run("MATCH (a)-[r:`odd rel``name`]->(b) RETURN a.kgrId, b.kgrId, r.confidence") == [[1, 2, 0.5]]


def test_cypher_literals():
    """Numbers as openCypher reads them (no `e+` exponent), strings escaped, nulls for what has no literal."""
    assert export.cypher_literal(1e16) == "1e16" and export.cypher_literal(1e-5) == "1e-05"
    assert export.cypher_literal(float("nan")) == "null" and export.cypher_literal(True) == "true"
    for value in (1e16, 1e-5, 0.25, -3, TRICKY, [TRICKY, 1.5, None], {"k": 1}.get("x")):
        assert CypherLiteral(export.cypher_literal(value)).value() == value
    assert "\n" not in export.cypher_literal(TRICKY) and "\\n" in export.cypher_literal(TRICKY)  # one line


def test_neo4j_needs_a_directory(tmp_path, built_kb):
    runner = CliRunner()
    result = runner.invoke(cli, ["export", "--format", "neo4j", "--db", str(built_kb[0])])
    assert result.exit_code != 0 and "-o DIR" in result.output
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    result = runner.invoke(cli, ["export", "--format", "neo4j", "--db", str(built_kb[0]), "-o", str(tmp_path / "full")])
    assert result.exit_code != 0 and "not an empty directory" in result.output
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]
    result = runner.invoke(cli, ["export", "--format", "cypher", "--db", str(built_kb[0]), "-o", str(tmp_path)])
    assert result.exit_code != 0 and "is a directory" in result.output


def test_cypher_batches_and_streams(built_kb, monkeypatch):
    """Batches hold at most CYPHER_BATCH rows and never mix entity types or relation types."""
    monkeypatch.setattr(export, "CYPHER_BATCH", 7)
    import io

    out = io.StringIO()
    with Store(built_kb[0], readonly=True) as store:
        counts = export.export(store, "cypher", out)
    text = out.getvalue()
    batches = re.findall(r"UNWIND \[\n(.*?)\n\] AS row\n(.*?);\n", text, re.S)
    assert batches and counts["nodes"] and counts["edges"]
    rows = 0
    for body, tail in batches:
        lines = body.split(",\n")
        assert len(lines) <= 7
        values = [CypherLiteral(line.strip()).value() for line in lines]
        if tail.startswith("MERGE (n:Entity"):
            assert len({v["type"] for v in values}) == 1
            rows += len(values)
        if re.search(r"MERGE \(a\)-\[r:", tail):
            rows += len(values)
    assert rows == counts["nodes"] + counts["edges"]


class _CountingSink:
    """A text stream that keeps only the number of characters written to it."""

    def __init__(self):
        self.chars = 0

    def write(self, text: str) -> int:
        self.chars += len(text)
        return len(text)


def test_export_streams(tmp_path, monkeypatch):
    """Memory stays far below the size of what is written: rows go out as the cursors give them
    (the Cypher script holds one batch; smaller batches here keep the test fast)."""
    import tracemalloc

    monkeypatch.setattr(export, "CYPHER_BATCH", 100)
    db = tmp_path / "big.sqlite"
    n = 5000
    with Store(db) as store, store.write() as conn:
        conn.executemany(
            "INSERT INTO entities(id, key, name, type, norm, aliases, description, origin) "
            "VALUES (?, ?, ?, 'THING', ?, '[\"x\"]', ?, 'manual')",
            ((i, f"k{i}", f"thing {i}", f"k{i}", "word " * 100) for i in range(1, n + 1)),
        )
        conn.executemany(
            "INSERT INTO relations(src_id, dst_id, rel, confidence) VALUES (?, ?, 'next', 0.5)",
            ((i, i + 1) for i in range(1, n)),
        )
    with Store(db, readonly=True) as store:
        sink = _CountingSink()
        tracemalloc.start()
        try:
            counts = export.export(store, "cypher", sink)
            cypher_peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.reset_peak()
            (tmp_path / "neo").mkdir()
            export.export(store, "neo4j", tmp_path / "neo")
            neo4j_peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    written = sum(p.stat().st_size for p in (tmp_path / "neo").iterdir())
    assert counts == {"nodes": n, "edges": n - 1} and sink.chars > 2_500_000 and written > 2_500_000
    assert cypher_peak < sink.chars / 4, (cypher_peak, sink.chars)
    assert neo4j_peak < written / 4, (neo4j_peak, written)


def test_neo4j_type_and_rel_filters(tmp_path, built_kb):
    """--rel keeps one relation file; --type keeps those entities and only mentions of them."""
    db = built_kb[0]
    with Store(db, readonly=True) as store:
        rel, n_rel = store.query("SELECT rel, count(*) FROM relations GROUP BY rel ORDER BY count(*) DESC LIMIT 1")[0]
        type_, n_type = store.query("SELECT type, count(*) FROM entities GROUP BY type ORDER BY count(*) DESC LIMIT 1")[
            0
        ]
        n_mentions = store.scalar(
            "SELECT count(*) FROM mentions m JOIN entities e ON e.id = m.entity_id WHERE e.type = ?", (type_,)
        )
    result = CliRunner().invoke(
        cli, ["export", "--format", "neo4j", "--db", str(db), "-o", str(tmp_path / "r"), "--rel", rel]
    )
    assert result.exit_code == 0, result.output
    files = read_import(tmp_path / "r")
    assert [p.name for k, g, p in files if k == "relationships" and g is None] == [export.relation_file_name(rel)]
    with open(tmp_path / "r" / export.relation_file_name(rel), encoding="utf-8", newline="") as f:
        assert sum(1 for _ in csv.reader(f)) == n_rel + 1
    result = CliRunner().invoke(
        cli, ["export", "--format", "neo4j", "--db", str(db), "-o", str(tmp_path / "t"), "--type", type_]
    )
    assert result.exit_code == 0, result.output
    for name, n in (("entities.csv", n_type), ("mentions.csv", n_mentions)):
        with open(tmp_path / "t" / name, encoding="utf-8", newline="") as f:
            assert sum(1 for _ in csv.reader(f)) == n + 1, name
