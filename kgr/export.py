"""Graph export: the entities and relations of a database in other tools' formats.

GraphML for Gephi, yEd and networkx, DOT for Graphviz, Mermaid for Markdown. Each
format is a writer registered in ``FORMATS`` by the ``exporter`` decorator, so a new
one (mcp-memory JSONL, Neo4j bulk CSV) is one function in this module or another:

    @exporter("myformat", suffix=".txt", help="...")
    def write_myformat(graph: GraphSource, out: TextIO) -> None: ...

Writers stream: nodes and edges are read from one read transaction (a consistent
snapshot even while `kgr ingest` writes) and written as they come.
"""

from __future__ import annotations

import contextlib
import re
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, TextIO

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

    def nodes(self) -> Iterator[dict]:
        where, params = self._type_filter("e")
        from kgr.retrieval.entities import ENTITY_COLUMNS, entity_row

        for row in self.store.conn.execute(
            f"SELECT {ENTITY_COLUMNS} FROM entities e WHERE 1{where} ORDER BY e.id", params
        ):
            self.counts["nodes"] += 1
            yield entity_row(row)

    def edges(self) -> Iterator[dict]:
        src_where, src_params = self._type_filter("a")
        dst_where, dst_params = self._type_filter("b")
        rel_where, rel_params = "", []
        if self.rels:
            rel_where, rel_params = (
                " AND r.rel IN (SELECT value FROM json_each(?))",
                [orjson.dumps(sorted(self.rels)).decode()],
            )
        for row in self.store.conn.execute(
            "SELECT r.id, r.src_id, r.dst_id, r.rel, r.confidence, r.strength, r.origin FROM relations r "
            "JOIN entities a ON a.id = r.src_id JOIN entities b ON b.id = r.dst_id "
            f"WHERE 1{src_where}{dst_where}{rel_where} ORDER BY r.id",
            [*src_params, *dst_params, *rel_params],
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


Writer = Callable[[GraphSource, TextIO], None]


@dataclass(frozen=True)
class ExportFormat:
    name: str
    suffix: str
    help: str
    write: Writer


FORMATS: dict[str, ExportFormat] = {}


def exporter(name: str, *, suffix: str, help: str) -> Callable[[Writer], Writer]:
    """Register a writer under ``name`` (the value of `kgr export --format`)."""

    def register(fn: Writer) -> Writer:
        if name in FORMATS:
            raise ValueError(f"export format {name!r} is already registered")
        FORMATS[name] = ExportFormat(name, suffix, help, fn)
        return fn

    return register


def export(
    store: "Store", fmt: str, out: TextIO, *, types: set[str] | None = None, rels: set[str] | None = None
) -> dict[str, int]:
    """Write the graph of ``store`` to ``out`` in format ``fmt``; return the node and edge counts."""
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
