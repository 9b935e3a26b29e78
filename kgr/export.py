"""Graph export: the entities and relations of a database in other tools' formats.

GraphML for Gephi, yEd and networkx, DOT for Graphviz, Mermaid for Markdown. Each
format is a writer registered in ``FORMATS`` by the ``exporter`` decorator, so a new
one (mcp-memory JSONL, Neo4j bulk CSV) is one function in this module or another:

    @exporter("myformat", suffix=".txt", help="...")
    def write_myformat(graph: GraphSource, out: TextIO) -> None: ...

Writers stream: nodes and edges are read from one read transaction (a consistent
snapshot even while `kgr ingest` writes) and written as they come. A format registered with
``directory=True`` (neo4j: several CSV files) gets an existing directory instead of a stream.
"""

from __future__ import annotations

import contextlib
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, TextIO

import orjson

from kgr.errors import UsageError

if TYPE_CHECKING:  # kept light: the CLI reads FORMATS for --format's choices at start-up
    from kgr.store import Store


# Colours by entity type, shared by the viz page, DOT and Mermaid so a type looks the
# same everywhere. Known kgr types get fixed, distinct colours; any other type gets one
# of the same palette by a stable hash of its name.
TYPE_COLORS = {
    "PERSON": "#4e79a7",
    "TEAM": "#f28e2b",
    "ORG": "#e15759",
    "SERVICE": "#59a14f",
    "COMPONENT": "#8cd17d",
    "API": "#edc948",
    "PRODUCT": "#b07aa1",
    "CONCEPT": "#ff9da7",
    "STANDARD": "#9c755f",
    "LOCATION": "#76b7b2",
    "DATE": "#bab0ac",
    "VERSION": "#d4a6c8",
    "POLICY": "#a0cbe8",
    "EVENT": "#f1ce63",
}
_PALETTE = list(TYPE_COLORS.values()) + ["#ffbe7d", "#499894", "#86bcb6", "#79706e", "#d37295", "#fabfd2"]


def type_color(type_: str) -> str:
    known = TYPE_COLORS.get((type_ or "").upper())
    if known:
        return known
    return _PALETTE[zlib.crc32((type_ or "").upper().encode()) % len(_PALETTE)]


@dataclass
class GraphSource:
    """What a writer reads: entities and relations, optionally only some types and relations."""

    store: "Store"
    types: set[str] | None = None
    rels: set[str] | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"nodes": 0, "edges": 0})

    def _type_filter(self, alias: str) -> tuple[str, list[str]]:
        if not self.types:
            return "", []
        return f" AND upper({alias}.type) IN (SELECT upper(value) FROM json_each(?))", [
            orjson.dumps(sorted(self.types)).decode()
        ]

    def _edge_filter(self) -> tuple[str, list[str]]:
        """The WHERE of the relations kept (both ends' types, the relation types), over
        ``relations r JOIN entities a ON a.id = r.src_id JOIN entities b ON b.id = r.dst_id``."""
        src_where, src_params = self._type_filter("a")
        dst_where, dst_params = self._type_filter("b")
        rel_where, rel_params = "", []
        if self.rels:
            rel_where, rel_params = (
                " AND r.rel IN (SELECT value FROM json_each(?))",
                [orjson.dumps(sorted(self.rels)).decode()],
            )
        return f"WHERE 1{src_where}{dst_where}{rel_where}", [*src_params, *dst_params, *rel_params]

    def nodes(self) -> Iterator[dict]:
        where, params = self._type_filter("e")
        from kgr.retrieval.entities import ENTITY_COLUMNS, entity_row

        for row in self.store.conn.execute(
            f"SELECT {ENTITY_COLUMNS} FROM entities e WHERE 1{where} ORDER BY e.id", params
        ):
            self.counts["nodes"] += 1
            yield entity_row(row)

    def edges(self) -> Iterator[dict]:
        where, params = self._edge_filter()
        for row in self.store.conn.execute(
            "SELECT r.id, r.src_id, r.dst_id, r.rel, r.confidence, r.strength, r.origin FROM relations r "
            f"JOIN entities a ON a.id = r.src_id JOIN entities b ON b.id = r.dst_id {where} ORDER BY r.id",
            params,
        ):
            self.counts["edges"] += 1
            yield {
                "id": row[0],
                "src": row[1],
                "dst": row[2],
                "rel": row[3],
                "confidence": row[4],
                "strength": row[5],
                "origin": row[6],
            }


Writer = Callable[[GraphSource, Any], None]  # Any: a TextIO, or a Path for a directory format


@dataclass(frozen=True)
class ExportFormat:
    name: str
    suffix: str
    help: str
    write: Writer
    directory: bool = False  # writes several files into a directory (``write(graph, Path)``)


FORMATS: dict[str, ExportFormat] = {}


def exporter(name: str, *, suffix: str, help: str, directory: bool = False) -> Callable[[Writer], Writer]:
    """Register a writer under ``name`` (the value of `kgr export --format`)."""

    def register(fn: Writer) -> Writer:
        if name in FORMATS:
            raise ValueError(f"export format {name!r} is already registered")
        FORMATS[name] = ExportFormat(name, suffix, help, fn, directory)
        return fn

    return register


def export(
    store: "Store", fmt: str, out: TextIO | Path, *, types: set[str] | None = None, rels: set[str] | None = None
) -> dict[str, int]:
    """Write the graph of ``store`` to ``out`` in format ``fmt``; return the node and edge counts.

    ``out`` is a text stream, or for a directory format (``FORMATS[fmt].directory``) an existing directory."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r}", hint=f"choose from {', '.join(sorted(FORMATS))}")
    source = GraphSource(store, types=set(types) if types else None, rels=set(rels) if rels else None)
    with snapshot(store):
        FORMATS[fmt].write(source, out)
    return dict(source.counts)


@contextlib.contextmanager
def snapshot(store: "Store") -> Iterator[None]:
    """One read transaction: nodes and edges come from the same state of the database."""
    store.conn.execute("BEGIN")
    try:
        yield
    finally:
        store.conn.execute("COMMIT")


# -- GraphML -----------------------------------------------------------------------------

# Characters XML 1.0 does not allow at all, even escaped.
_XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value: object) -> str:
    text = _XML_INVALID.sub("\ufffd", str(value))
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


_GRAPHML_NODE_KEYS = [
    ("label", "string"),
    ("key", "string"),
    ("type", "string"),
    ("aliases", "string"),
    ("description", "string"),
    ("popularity", "double"),
    ("origin", "string"),
    ("status", "string"),
]
_GRAPHML_EDGE_KEYS = [("rel", "string"), ("confidence", "double"), ("strength", "string"), ("origin", "string")]


@exporter("graphml", suffix=".graphml", help="GraphML (Gephi, yEd, networkx); aliases as a JSON list")
def write_graphml(graph: GraphSource, out: TextIO) -> None:
    out.write(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
        'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n'
    )
    for name, kind in _GRAPHML_NODE_KEYS:
        out.write(f'  <key id="n_{name}" for="node" attr.name="{name}" attr.type="{kind}"/>\n')
    for name, kind in _GRAPHML_EDGE_KEYS:
        out.write(f'  <key id="e_{name}" for="edge" attr.name="{name}" attr.type="{kind}"/>\n')
    out.write('  <graph id="kgr" edgedefault="directed">\n')
    for n in graph.nodes():
        values = {
            "label": n["name"],
            "key": n["key"],
            "type": n["type"],
            "aliases": orjson.dumps(n["aliases"]).decode(),
            "description": n["description"],
            "popularity": n["popularity"],
            "origin": n["origin"],
            "status": n["status"],
        }
        out.write(f'    <node id="n{n["id"]}">')
        out.write("".join(f'<data key="n_{k}">{xml_text(v)}</data>' for k, v in values.items() if v is not None))
        out.write("</node>\n")
    for e in graph.edges():
        values = {"rel": e["rel"], "confidence": e["confidence"], "strength": e["strength"], "origin": e["origin"]}
        out.write(f'    <edge id="e{e["id"]}" source="n{e["src"]}" target="n{e["dst"]}">')
        out.write("".join(f'<data key="e_{k}">{xml_text(v)}</data>' for k, v in values.items() if v is not None))
        out.write("</edge>\n")
    out.write("  </graph>\n</graphml>\n")


# -- DOT ---------------------------------------------------------------------------------


def dot_string(value: object) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, line breaks as \\n."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return '"' + "".join(ch if ch >= " " else " " for ch in text if ch != "\x00") + '"'


@exporter("dot", suffix=".dot", help="Graphviz DOT (dot -Tsvg); nodes coloured by type")
def write_dot(graph: GraphSource, out: TextIO) -> None:
    out.write(
        "digraph kgr {\n"
        "  graph [overlap=false, splines=true];\n"
        '  node [shape=box, style="rounded,filled", fontname="Helvetica"];\n'
        '  edge [fontname="Helvetica", fontsize=10];\n'
    )
    for n in graph.nodes():
        out.write(
            f"  n{n['id']} [label={dot_string(n['name'])}, tooltip={dot_string(n['type'] + ': ' + n['key'])}, "
            f"fillcolor={dot_string(type_color(n['type']))}];\n"
        )
    for e in graph.edges():
        out.write(f"  n{e['src']} -> n{e['dst']} [label={dot_string(e['rel'])}];\n")
    out.write("}\n")


# -- Mermaid -----------------------------------------------------------------------------


def mermaid_text(value: object) -> str:
    """Text inside a quoted Mermaid label: quotes and markup as entity codes, one line."""
    text = re.sub(r"[\s\x00-\x1f\x7f]+", " ", str(value)).strip()
    for ch, code in (("#", "#35;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("|", "#124;"), ("`", "#96;")):
        text = text.replace(ch, code)
    return text


def mermaid_class(type_: str) -> str:
    return "t_" + (re.sub(r"\W", "_", type_ or "none", flags=re.ASCII) or "none")


@exporter("mermaid", suffix=".mmd", help="Mermaid flowchart (graph LR) for Markdown; node classes by type")
def write_mermaid(graph: GraphSource, out: TextIO) -> None:
    out.write("graph LR\n")
    classes: dict[str, str] = {}
    for n in graph.nodes():
        cls = mermaid_class(n["type"])
        classes.setdefault(cls, type_color(n["type"]))
        out.write(f'  n{n["id"]}["{mermaid_text(n["name"])}"]:::{cls}\n')
    for e in graph.edges():
        out.write(f'  n{e["src"]} -->|"{mermaid_text(e["rel"])}"| n{e["dst"]}\n')
    for cls, color in sorted(classes.items()):
        out.write(f"  classDef {cls} fill:{color},stroke:#333,color:#111\n")


# -- the reference MCP memory server's memory.jsonl ----------------------------------------------


@exporter(
    "mcp-memory",
    suffix=".jsonl",
    help="the memory graph as the reference MCP memory server's memory.jsonl (kgr import reads it back)",
)
def write_mcp_memory(graph: GraphSource, out: TextIO) -> None:
    from kgr.memory import graph as memory

    if graph.types or graph.rels:
        raise UsageError("--type and --rel do not apply to mcp-memory: it writes the whole memory graph")
    graph.counts.update(memory.write_jsonl(graph.store, out))


# -- Neo4j and Memgraph ------------------------------------------------------------------------------------
#
# Both read the whole knowledge graph: entities, documents, chunks, which chunk mentions which entity, and the
# relations with their confidence and evidence. Every table is read through one SQL cursor and written row by
# row (the Cypher script keeps one batch of rows at a time), so a graph larger than memory exports.

# neo4j-admin's array delimiter (`--array-delimiter=U+001F`): the ASCII unit separator, which text never
# needs (it is replaced by a space inside values); `;`, the default, is common in sentences.
ARRAY_DELIMITER = "\x1f"
CYPHER_BATCH = 1000

# (header, SQL expression): one column of a neo4j-admin CSV file; the header carries the type.
_ENTITY_COLUMNS = [
    ("kgrId:ID(Entity)", "e.id"),
    ("key", "e.key"),
    ("name", "e.name"),
    ("type", "e.type"),
    ("aliases:string[]", "e.aliases"),
    ("description", "e.description"),
    ("popularity:double", "e.popularity"),
    ("origin", "e.origin"),
    ("status", "e.status"),
]
_DOCUMENT_COLUMNS = [
    ("kgrId:ID(Document)", "d.id"),
    ("path", "d.path"),
    ("title", "d.title"),
    ("format", "d.format"),
    ("source", "d.source"),
    ("lang", "d.lang"),
    ("status", "d.status"),
]
_CHUNK_COLUMNS = [
    ("kgrId:ID(Chunk)", "c.id"),
    ("ord:int", "c.ord"),
    ("section", "c.section"),
    ("headings:string[]", "c.headings"),
    ("startOffset:int", "c.start"),  # not `start`/`end`: END is a Cypher keyword some engines refuse as a name
    ("endOffset:int", 'c."end"'),
    ("tokens:int", "c.tokens"),
    ("text", "c.text"),
]
_HAS_CHUNK_COLUMNS = [(":START_ID(Document)", "c.doc_id"), (":END_ID(Chunk)", "c.id")]
_MENTION_COLUMNS = [
    (":START_ID(Chunk)", "m.chunk_id"),
    (":END_ID(Entity)", "m.entity_id"),
    ("kgrId:long", "m.id"),
    ("surface", "m.surface"),
    ("startOffset:int", "m.start"),
    ("endOffset:int", 'm."end"'),
    ("score:double", "m.score"),
    ("source", "m.source"),
    ("linkScore:double", "m.link_score"),
]
# The evidence of a relation as parallel arrays, strongest first: the document path, the sentence, the chunk.
_EVIDENCE = (
    "(SELECT json_group_array(json_array(d.path, v.sentence, v.chunk_id, v.confidence)) FROM "
    "(SELECT * FROM relation_evidence WHERE relation_id = r.id ORDER BY confidence DESC, id) v "
    "JOIN docs d ON d.id = v.doc_id)"
)
_RELATION_COLUMNS = [
    (":START_ID(Entity)", "r.src_id"),
    (":END_ID(Entity)", "r.dst_id"),
    ("kgrId:long", "r.id"),
    ("confidence:double", "r.confidence"),
    ("strength", "r.strength"),
    ("origin", "r.origin"),
    ("evidencePaths:string[]", None),
    ("evidenceSentences:string[]", None),
    ("evidenceChunks:long[]", None),
    ("evidenceConfidences:double[]", None),
]


def _select(columns: list[tuple[str, str | None]]) -> str:
    return ", ".join(sql for _, sql in columns if sql)


def _entity_rows(graph: GraphSource) -> Iterator[dict]:
    """Entities with their properties (aliases a list), ordered by type then id."""
    where, params = graph._type_filter("e")
    for row in graph.store.conn.execute(
        f"SELECT {_select(_ENTITY_COLUMNS)} FROM entities e WHERE 1{where} ORDER BY e.type, e.id", params
    ):
        graph.counts["nodes"] += 1
        values = dict(zip((_prop(h) for h, _ in _ENTITY_COLUMNS), row))
        values["aliases"] = _json_list(values["aliases"])
        yield values


def _document_rows(graph: GraphSource) -> Iterator[dict]:
    for row in graph.store.conn.execute(f"SELECT {_select(_DOCUMENT_COLUMNS)} FROM docs d ORDER BY d.id"):
        graph.counts["documents"] = graph.counts.get("documents", 0) + 1
        yield dict(zip((_prop(h) for h, _ in _DOCUMENT_COLUMNS), row))


def _chunk_rows(graph: GraphSource) -> Iterator[dict]:
    sql = f"SELECT {_select(_CHUNK_COLUMNS)}, c.doc_id FROM chunks c ORDER BY c.id"
    for row in graph.store.conn.execute(sql):
        graph.counts["chunks"] = graph.counts.get("chunks", 0) + 1
        values = dict(zip([_prop(h) for h, _ in _CHUNK_COLUMNS] + ["docId"], row))
        values["headings"] = _json_list(values["headings"])
        yield values


def _mention_rows(graph: GraphSource) -> Iterator[dict]:
    where, params = graph._type_filter("e")
    for row in graph.store.conn.execute(
        f"SELECT {_select(_MENTION_COLUMNS)} FROM mentions m JOIN entities e ON e.id = m.entity_id "
        f"WHERE 1{where} ORDER BY m.id",
        params,
    ):
        graph.counts["mentions"] = graph.counts.get("mentions", 0) + 1
        yield dict(zip(["chunk", "entity"] + [_prop(h) for h, _ in _MENTION_COLUMNS[2:]], row))


def _relation_rows(graph: GraphSource) -> Iterator[dict]:
    """Relations ordered by type then id, each with its evidence (strongest first) as parallel lists."""
    where, params = graph._edge_filter()
    for row in graph.store.conn.execute(
        f"SELECT r.rel, {_select(_RELATION_COLUMNS)}, {_EVIDENCE} FROM relations r "
        f"JOIN entities a ON a.id = r.src_id JOIN entities b ON b.id = r.dst_id {where} ORDER BY r.rel, r.id",
        params,
    ):
        graph.counts["edges"] += 1
        evidence = orjson.loads(row[7]) if row[7] else []
        yield {
            "rel": row[0],
            "src": row[1],
            "dst": row[2],
            "kgrId": row[3],
            "confidence": row[4],
            "strength": row[5],
            "origin": row[6],
            "evidencePaths": [e[0] for e in evidence],
            "evidenceSentences": [e[1] or "" for e in evidence],
            "evidenceChunks": [e[2] if e[2] is not None else -1 for e in evidence],  # arrays hold no nulls
            # floats only: Neo4j stores no list that mixes integers and floats
            "evidenceConfidences": [float(e[3]) if e[3] is not None else 0.0 for e in evidence],
        }


def _prop(header: str) -> str:
    return header.split(":", 1)[0]


def _json_list(text: str | None) -> list:
    try:
        value = orjson.loads(text or "[]")
    except orjson.JSONDecodeError:
        return []
    return [str(v) for v in value if v is not None] if isinstance(value, list) else []


# -- neo4j-admin import CSV --


def csv_value(value: object, *, array: bool = False) -> str:
    """One field of a neo4j-admin CSV file (RFC 4180): quoted when it holds a comma, quote or line break."""
    if value is None:
        return ""
    if array:
        text = ARRAY_DELIMITER.join(_csv_scalar(v).replace(ARRAY_DELIMITER, " ") for v in value)  # type: ignore[attr-defined]
    else:
        text = _csv_scalar(value)
    if text == "" and not array:
        return '""'  # an empty string, not a missing property
    if any(ch in text for ch in ',"\r\n') or text != text.strip():
        return '"' + text.replace('"', '""') + '"'
    return text


def _csv_scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else ""
    return str(value).replace("\x00", "")


class _CsvFile:
    """A neo4j-admin CSV file written row by row: the typed header first."""

    def __init__(self, path: Path, headers: list[str]):
        self.path = path
        self.headers = headers
        self.arrays = [h.endswith("[]") for h in headers]
        self.out = open(path, "w", encoding="utf-8", newline="")
        self.rows = 0
        self.out.write(",".join(headers) + "\n")

    def write(self, values: list) -> None:
        self.out.write(",".join(csv_value(v, array=a) for v, a in zip(values, self.arrays)) + "\n")
        self.rows += 1

    def close(self) -> None:
        self.out.close()


def relation_file_name(rel: str) -> str:
    """A file name for one relation type's CSV: its name when that is safe, else a safe one with a checksum."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", rel)[:80] or "rel"
    if safe != rel:
        safe += f"-{zlib.crc32(rel.encode()):08x}"
    return f"rel_{safe}.csv"


@exporter(
    "neo4j",
    suffix="",
    help="neo4j-admin import CSV files with typed headers and import.sh, into the directory -o names",
    directory=True,
)
def write_neo4j(graph: GraphSource, out_dir: Path) -> None:
    files: list[tuple[str, str]] = []  # (--nodes or --relationships, file name)

    def table(name: str, kind: str, headers: list[str], rows: Iterator[list]) -> None:
        f = _CsvFile(out_dir / name, headers)
        try:
            for values in rows:
                f.write(values)
        finally:
            f.close()
        files.append((kind, name))

    heads = [h for h, _ in _ENTITY_COLUMNS] + [":LABEL"]
    table(
        "entities.csv",
        "nodes",
        heads,
        (
            [*(r[_prop(h)] for h in heads[:-1]), f"Entity;{r['type']}" if r["type"] else "Entity"]
            for r in _entity_rows(graph)
        ),
    )
    heads = [h for h, _ in _DOCUMENT_COLUMNS]
    table("documents.csv", "nodes=Document", heads, ([r[_prop(h)] for h in heads] for r in _document_rows(graph)))
    heads = [h for h, _ in _CHUNK_COLUMNS]
    has_chunk = _CsvFile(out_dir / "has_chunk.csv", [h for h, _ in _HAS_CHUNK_COLUMNS])
    try:

        def chunks() -> Iterator[list]:
            for r in _chunk_rows(graph):
                has_chunk.write([r["docId"], r["kgrId"]])
                yield [r[_prop(h)] for h in heads]

        table("chunks.csv", "nodes=Chunk", heads, chunks())
    finally:
        has_chunk.close()
    files.append(("relationships=HAS_CHUNK", "has_chunk.csv"))
    heads = [h for h, _ in _MENTION_COLUMNS]
    table(
        "mentions.csv",
        "relationships=MENTIONS",
        heads,
        ([r["chunk"], r["entity"], *(r[_prop(h)] for h in heads[2:])] for r in _mention_rows(graph)),
    )
    heads = [h for h, _ in _RELATION_COLUMNS]
    current: _CsvFile | None = None
    current_rel = None
    try:
        for r in _relation_rows(graph):
            if r["rel"] != current_rel:
                if current is not None:
                    current.close()
                current_rel = r["rel"]
                name = relation_file_name(current_rel)
                current = _CsvFile(out_dir / name, heads + [":TYPE"])
                files.append(("relationships", name))
            assert current is not None
            current.write([r["src"], r["dst"], *(r[_prop(h)] for h in heads[2:]), current_rel])
    finally:
        if current is not None:
            current.close()
    args = " \\\n  ".join(f"--{kind}={name}" for kind, name in files)
    (out_dir / "import.sh").write_text(
        "#!/bin/sh\n"
        "# Load these files into an empty Neo4j 5 database (run from this directory, Neo4j stopped):\n"
        "# ids are kgr's integer ids, one id space per label; text fields may span lines.\n"
        'exec neo4j-admin database import full "${1:-neo4j}" --id-type=INTEGER --multiline-fields=true \\\n'
        f"  --array-delimiter=U+001F \\\n  {args}\n",
        encoding="utf-8",
    )
    (out_dir / "import.sh").chmod(0o755)


# -- Cypher (Neo4j and Memgraph) --

_CYPHER_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def cypher_literal(value: object) -> str:
    """A Cypher literal both Neo4j and Memgraph read: strings single-quoted with backslash escapes."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return "null"
        return repr(value).replace("e+", "e")  # openCypher's exponent takes a minus sign, never a plus
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(cypher_literal(v) for v in value) + "]"
    out = []
    for ch in str(value):
        if ch in _CYPHER_ESCAPES:
            out.append(_CYPHER_ESCAPES[ch])
        elif ch < " " or ch == "\x7f":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


def cypher_name(name: str) -> str:
    """A label or relationship type, backtick-quoted (a backtick inside is doubled)."""
    return "`" + name.replace("`", "``") + "`"


def _cypher_batches(
    out: TextIO,
    rows: Iterator[dict],
    statement: Callable[[dict], str],
    group: Callable[[dict], object] = lambda r: None,
    hidden: tuple[str, ...] = (),
) -> None:
    """UNWIND batches of at most CYPHER_BATCH rows, one row per line; a batch never spans two groups."""
    batch: list[str] = []
    key: object = None
    tail = ""

    def flush() -> None:
        if batch:
            out.write("UNWIND [\n  " + ",\n  ".join(batch) + "\n] AS row\n" + tail + ";\n")
            batch.clear()

    for row in rows:
        if batch and (group(row) != key or len(batch) >= CYPHER_BATCH):
            flush()
        key, tail = group(row), statement(row)
        batch.append("{" + ", ".join(f"{k}: {cypher_literal(v)}" for k, v in row.items() if k not in hidden) + "}")
    flush()


def _sets(var: str, props: list[str]) -> str:
    return "SET " + ", ".join(f"{var}.{p} = row.{p}" for p in props)


@exporter(
    "cypher",
    suffix=".cypher",
    help="a Cypher script of batched UNWIND ... MERGE statements that Neo4j (cypher-shell) and Memgraph (mgconsole) run",
)
def write_cypher(graph: GraphSource, out: TextIO) -> None:
    out.write(
        "// kgr knowledge graph: entities, documents, chunks, MENTIONS and relations, as UNWIND ... MERGE batches.\n"
        "// Run with cypher-shell (Neo4j 5) or mgconsole (Memgraph). Create the indexes first, in your engine's syntax;\n"
        "// the two differ, so they are not statements here.\n"
        "// Neo4j 5:\n"
    )
    for label in ("Entity", "Document", "Chunk"):
        out.write(f"//   CREATE INDEX {label.lower()}_kgrId IF NOT EXISTS FOR (n:{label}) ON (n.kgrId);\n")
    out.write("// Memgraph:\n")
    for label in ("Entity", "Document", "Chunk"):
        out.write(f"//   CREATE INDEX ON :{label}(kgrId);\n")
    entity_props = [_prop(h) for h, _ in _ENTITY_COLUMNS[1:]]
    _cypher_batches(
        out,
        _entity_rows(graph),
        lambda r: (
            "MERGE (n:Entity {kgrId: row.kgrId})\n"
            + _sets("n", entity_props)
            + (f"\nSET n:{cypher_name(r['type'])}" if r["type"] else "")
        ),
        group=lambda r: r["type"],
    )
    _cypher_batches(
        out,
        _document_rows(graph),
        lambda r: "MERGE (n:Document {kgrId: row.kgrId})\n" + _sets("n", [_prop(h) for h, _ in _DOCUMENT_COLUMNS[1:]]),
    )
    chunk_props = [_prop(h) for h, _ in _CHUNK_COLUMNS[1:]]
    _cypher_batches(
        out,
        _chunk_rows(graph),
        lambda r: (
            "MATCH (d:Document {kgrId: row.docId})\nMERGE (n:Chunk {kgrId: row.kgrId})\n"
            + _sets("n", chunk_props)
            + "\nMERGE (d)-[:HAS_CHUNK]->(n)"
        ),
    )
    mention_props = [_prop(h) for h, _ in _MENTION_COLUMNS[3:]]
    _cypher_batches(
        out,
        _mention_rows(graph),
        lambda r: (
            "MATCH (c:Chunk {kgrId: row.chunk})\nMATCH (e:Entity {kgrId: row.entity})\n"
            "MERGE (c)-[m:MENTIONS {kgrId: row.kgrId}]->(e)\n" + _sets("m", mention_props)
        ),
    )
    rel_props = [_prop(h) for h, _ in _RELATION_COLUMNS[2:]]
    _cypher_batches(
        out,
        _relation_rows(graph),
        lambda r: (
            "MATCH (a:Entity {kgrId: row.src})\nMATCH (b:Entity {kgrId: row.dst})\n"
            f"MERGE (a)-[r:{cypher_name(r['rel'])}]->(b)\n" + _sets("r", rel_props)
        ),
        group=lambda r: r["rel"],
        hidden=("rel",),
    )
