"""Document templates: Mustache bodies whose variables are read-only SQL bound to a node.

A template has a Mustache body (rendered with pystache, no HTML escaping: documents are
Markdown) and named variables, each one SQL query run with the node bound as ``:id``,
``:name``, ``:type`` and ``:key``. Each variable gives the body a list of row objects and
a ``has_<var>`` flag. Partials (``{{> name}}``) include the registered template of that name
(never a file) in the same context, with its variables; a partial that names no template, a
cycle, or nesting deeper than :data:`MAX_PARTIAL_DEPTH` is refused when the template is saved
and again when it is rendered.

Variables are code written by whoever manages templates, so they run in a **sandbox**: a
separate read-only connection (``SQLITE_OPEN_READONLY``, ``PRAGMA query_only``) under an
authorizer that allows one SELECT statement reading only kgr's graph and document tables
(:data:`READABLE`) and calling only plain SQL functions (:data:`FUNCTIONS`). ATTACH,
PRAGMA, writes, schema reads (``sqlite_master``), virtual-table creation and
``load_extension`` are denied; a progress handler stops a query past its time limit (a
recursive CTE bomb), string sizes are capped, and a variable returning more than
:data:`MAX_ROWS` rows is an error.

Rendered documents are cached in ``document_cache`` with the ids of the nodes they depend
on (the node and every entity id its variables returned, in columns named ``id`` or ending
in ``_id``) and a signature over those nodes' state (their row, relations and
observations) and the template with its partials. A cached document is served while its signature still
matches, so it is invalidated exactly when one of its dependencies (or the template)
changes.
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path
from typing import Any

import apsw

from kgr.errors import KgrError, StoreError, UsageError
from kgr.store import Store, dumps, loads, now_ms

MAX_ROWS = 500
TIME_LIMIT_S = 1.0
MAX_VALUE_BYTES = 1_000_000
MAX_BODY_CHARS = 100_000
MAX_SQL_CHARS = 10_000
MAX_VARIABLES = 32
MAX_PARTIAL_DEPTH = 8  # templates nested through partials, the outermost included
MAX_EXPANDED_CHARS = 1_000_000  # a body with its partials expanded (A includes B ten times, B includes C ...)
DEFAULT_TEMPLATE = "default"

# Tables (and the view) a variable may read. Everything else is denied: meta (host paths,
# writer state), events, caches, templates, vectors, full-text shadow tables, the schema.
READABLE = frozenset(
    {
        "entities",
        "relations",
        "relation_types",
        "observations",
        "mentions",
        "relation_evidence",
        "docs",
        "chunks",
        "graph_edges",
    }
)

TABLE_FUNCTIONS = frozenset({"json_each", "json_tree"})

# Plain, side-effect-free SQL functions. Not here: load_extension, readfile/writefile,
# fts3_tokenizer, zeroblob/randomblob (memory), sqlite_* introspection, vec_*.
FUNCTIONS = frozenset(
    """
abs avg char coalesce count date datetime julianday unixepoch strftime time timediff glob group_concat string_agg
hex ifnull iif if instr json json_array json_array_length json_extract json_group_array json_group_object
json_object json_quote json_type json_valid json_each json_tree like likely unlikely length lower ltrim max min
nullif octet_length printf format quote replace round rtrim sign substr substring sum total trim typeof unhex
unicode upper concat concat_ws row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value
last_value nth_value median
""".split()
)

NODE_PARAMS = ("id", "name", "type", "key")
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
RESERVED = frozenset({"id", "key", "name", "type", "summary", "description", "aliases", "properties", "origin"})


class TemplateError(KgrError):
    """A template or one of its variables that cannot be stored or rendered."""


class TemplateNotFound(TemplateError):
    pass


class NodeNotFound(KgrError):
    pass


# -- the default template -----------------------------------------------------------------------

DEFAULT_BODY = """# {{name}}

{{#type}}*{{type}}*{{/type}}

{{#summary}}{{summary}}

{{/summary}}{{#has_aliases}}Also known as: {{#aliases}}{{alias}}{{^last}}, {{/last}}{{/aliases}}.

{{/has_aliases}}{{#has_outgoing}}## Relations

{{#outgoing}}* {{relation}} {{target}}{{#strength}} ({{strength}}){{/strength}}
{{/outgoing}}

{{/has_outgoing}}{{#has_incoming}}## Referenced by

{{#incoming}}* {{source}} {{relation}} {{name}}{{#strength}} ({{strength}}){{/strength}}
{{/incoming}}

{{/has_incoming}}{{#has_observations}}## Observations

{{#observations}}* {{content}}
{{/observations}}
{{/has_observations}}"""

DEFAULT_VARIABLES = {
    "aliases": "SELECT j.value AS alias, j.key = json_array_length(e.aliases) - 1 AS last "
    "FROM entities e, json_each(e.aliases) j WHERE e.id = :id ORDER BY j.key",
    "outgoing": "SELECT r.rel AS relation, t.name AS target, t.id AS target_id, r.strength AS strength "
    "FROM relations r JOIN entities t ON t.id = r.dst_id WHERE r.src_id = :id "
    "ORDER BY r.rel, t.name LIMIT 200",
    "incoming": "SELECT r.rel AS relation, s.name AS source, s.id AS source_id, r.strength AS strength "
    "FROM relations r JOIN entities s ON s.id = r.src_id WHERE r.dst_id = :id "
    "ORDER BY r.rel, s.name LIMIT 200",
    "observations": "SELECT content FROM observations WHERE entity_id = :id "
    "AND (valid_until_ms IS NULL) ORDER BY id LIMIT 200",
}


# -- the sandbox -----------------------------------------------------------------------------------


class Sandbox:
    """A read-only connection that runs template variables under an authorizer and a time limit."""

    def __init__(self, db_path: str | Path, *, time_limit: float = TIME_LIMIT_S, max_rows: int = MAX_ROWS):
        self.time_limit = time_limit
        self.max_rows = max_rows
        try:
            self.conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
            self.conn.setbusytimeout(2000)
            self.conn.execute("PRAGMA query_only=ON")
        except apsw.Error as exc:
            raise TemplateError(f"cannot open the database for templates: {exc}") from None
        self.conn.limit(apsw.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self.conn.limit(apsw.SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_CHARS * 2)
        self.conn.limit(apsw.SQLITE_LIMIT_ATTACHED, 0)
        self.conn.limit(apsw.SQLITE_LIMIT_COMPOUND_SELECT, 50)
        self.conn.authorizer = self._authorize
        self.conn.setprogresshandler(self._progress, 1000)
        self.deadline: float | None = None
        self.denied: str | None = None
        self._statements = 0

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _progress(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def _deny(self, why: str) -> int:
        if self.denied is None:
            self.denied = why
        return apsw.SQLITE_DENY

    def _authorize(self, op: int, one: str | None, two: str | None, db: str | None, view: str | None) -> int:
        if op == apsw.SQLITE_SELECT or op == apsw.SQLITE_RECURSIVE:
            return apsw.SQLITE_OK
        if op == apsw.SQLITE_READ:
            if db is None:  # a CTE or subquery of this statement
                return apsw.SQLITE_OK
            if (db == "main" and one in READABLE) or one in TABLE_FUNCTIONS:
                return apsw.SQLITE_OK
            return self._deny(f"reading {one!r} is not allowed (variables may read {', '.join(sorted(READABLE))})")
        if op == apsw.SQLITE_FUNCTION:
            if two and two.lower() in FUNCTIONS:
                return apsw.SQLITE_OK
            return self._deny(f"the function {two}() is not allowed in template variables")
        name = {
            v: k for k, v in vars(apsw).items() if k.startswith("SQLITE_") and isinstance(v, int) and k[7:] in _OPS
        }.get(op, str(op))
        return self._deny(
            f"{name.removeprefix('SQLITE_').replace('_', ' ').lower()} is not allowed: "
            "a variable is one SELECT statement"
        )

    def _trace(self, cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        self._statements += 1
        if self._statements > 1:
            self.denied = self.denied or "a variable is one SELECT statement, not several"
            return False
        if not cursor.is_readonly or cursor.is_explain:
            self.denied = self.denied or "a variable must be a read-only SELECT statement"
            return False
        return True

    def run(self, name: str, sql: str, node: dict[str, Any]) -> list[dict[str, Any]]:
        """The rows of variable ``name`` for ``node``, as dicts; a TemplateError says what was refused."""
        if not isinstance(sql, str) or not sql.strip():
            raise TemplateError(f"variable {name}: the query is empty")
        if len(sql) > MAX_SQL_CHARS:
            raise TemplateError(f"variable {name}: the query is longer than {MAX_SQL_CHARS} characters")
        params = {k: node.get(k) for k in NODE_PARAMS}
        self.denied = None
        self._statements = 0
        self.deadline = time.monotonic() + self.time_limit
        rows: list[dict[str, Any]] = []
        try:
            cur = self.conn.cursor()
            cur.exec_trace = self._trace
            cur.execute(sql, params)
            cols: list[str] | None = None
            for row in cur:
                if cols is None:
                    cols = [d[0] for d in cur.description]
                if len(rows) >= self.max_rows:
                    raise TemplateError(f"variable {name}: more than {self.max_rows} rows", hint="add a LIMIT")
                rows.append({c: _jsonable(v) for c, v in zip(cols, row)})
            # statements after the first are compiled only when the first is done
            if self.denied:
                raise TemplateError(f"variable {name}: {self.denied}")
        except apsw.InterruptError:
            raise TemplateError(
                f"variable {name}: the query took longer than {self.time_limit:g} s and was stopped",
                hint="add a LIMIT or a tighter WHERE",
            ) from None
        except apsw.ExecTraceAbort:
            raise TemplateError(f"variable {name}: {self.denied}") from None
        except apsw.AuthError:
            raise TemplateError(f"variable {name}: {self.denied or 'not authorized'}") from None
        except KeyError as exc:
            raise TemplateError(
                f"variable {name}: unknown parameter :{exc.args[0]}",
                hint="variables may use :id, :name, :type and :key",
            ) from None
        except apsw.BindingsError as exc:
            raise TemplateError(
                f"variable {name}: {exc}", hint="variables may use :id, :name, :type and :key"
            ) from None
        except apsw.TooBigError:
            raise TemplateError(f"variable {name}: a value is larger than {MAX_VALUE_BYTES} bytes") from None
        except apsw.Error as exc:
            raise TemplateError(f"variable {name}: {exc}") from None
        finally:
            self.deadline = None
        return rows


_OPS = {
    "CREATE_INDEX",
    "CREATE_TABLE",
    "CREATE_TEMP_INDEX",
    "CREATE_TEMP_TABLE",
    "CREATE_TEMP_TRIGGER",
    "CREATE_TEMP_VIEW",
    "CREATE_TRIGGER",
    "CREATE_VIEW",
    "DELETE",
    "DROP_INDEX",
    "DROP_TABLE",
    "DROP_TEMP_INDEX",
    "DROP_TEMP_TABLE",
    "DROP_TEMP_TRIGGER",
    "DROP_TEMP_VIEW",
    "DROP_TRIGGER",
    "DROP_VIEW",
    "INSERT",
    "PRAGMA",
    "TRANSACTION",
    "UPDATE",
    "ATTACH",
    "DETACH",
    "ALTER_TABLE",
    "REINDEX",
    "ANALYZE",
    "CREATE_VTABLE",
    "DROP_VTABLE",
    "SAVEPOINT",
    "COPY",
}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    return value


# -- storing templates ---------------------------------------------------------------------------------


def check_body(body: str) -> list[str]:
    """Refuse a body that is not valid Mustache; the names of the partials it includes, in order.

    Partials (``{{> name}}``) name other registered templates; they are never read from files
    (:func:`resolve_partials` checks that each exists and that they form no cycle)."""
    import pystache
    from pystache.parser import ParsingError

    if not isinstance(body, str) or not body.strip():
        raise TemplateError("the template body is empty")
    if len(body) > MAX_BODY_CHARS:
        raise TemplateError(f"the template body is longer than {MAX_BODY_CHARS} characters")
    try:
        parsed = pystache.parse(body)
    except (ParsingError, ValueError) as exc:
        raise TemplateError(f"the template is not valid Mustache: {exc}") from None

    if "{{=" not in body:  # pystache drops an unclosed section silently: say so instead
        stack: list[str] = []
        for kind, key in re.findall(r"\{\{\s*([#^/])\s*(.*?)\s*\}\}", body):
            if kind in "#^":
                stack.append(key)
            elif stack and stack[-1] == key:
                stack.pop()
        if stack:
            raise TemplateError(f"the template is not valid Mustache: section {{{{#{stack[-1]}}}}} is never closed")
    return _partial_names(parsed)


def _partial_names(parsed: Any, *, every: bool = False) -> list[str]:
    """The partial names in a parsed pystache template (sections and inverted sections included),
    each once, or with ``every`` once per inclusion."""
    names: list[str] = []

    def walk(nodes: list) -> None:
        for node in nodes:
            if type(node).__name__ == "_PartialNode":
                if every or node.key not in names:
                    names.append(node.key)
            for attr in ("parsed", "parsed_section"):  # a section's body; an inverted section's body
                inner = getattr(node, attr, None)
                if inner is not None:
                    walk(inner._parse_tree if hasattr(inner, "_parse_tree") else inner)

    walk(parsed._parse_tree)
    return names


def resolve_partials(
    store: Store, template: dict[str, Any], *, replacing: dict[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """Every template ``template`` includes as a partial, directly or through others, by name.

    Partials are resolved only from the registered templates, by name (never from files).
    One that names no template, a cycle (a template that includes itself, directly or through
    others), nesting deeper than :data:`MAX_PARTIAL_DEPTH` or a body that expands past
    :data:`MAX_EXPANDED_CHARS` characters is a TemplateError. ``replacing`` maps a template
    name to a body about to be saved (so that saving checks the graph as it will be)."""
    import pystache

    replacing = replacing or {}
    found: dict[str, dict[str, Any]] = {}
    sizes: dict[str, int] = {}

    def body_of(name: str) -> str:
        if name in replacing:
            return replacing[name]
        return found[name]["structure"]

    def load(name: str, chain: list[str]) -> None:
        if name in found or name in replacing:
            return
        row = store.conn.execute(f"SELECT {_TCOLS} FROM templates WHERE name=?", (name,)).fetchone()
        if row is None:
            raise TemplateError(
                f"partial {{{{> {name}}}}} (in template {chain[-1]!r}): no template is named {name!r}",
                hint="partials name registered templates: create it first (manage_templates, or kgr template add)",
            )
        found[name] = _template_row(row)

    def expand(name: str, body: str, chain: list[str]) -> int:
        """The expanded size of ``body``; walks its partials depth first along ``chain``."""
        if name in sizes:
            return sizes[name]
        if len(chain) > MAX_PARTIAL_DEPTH:
            raise TemplateError(
                f"partials nest deeper than {MAX_PARTIAL_DEPTH} levels: {' > '.join(chain)}",
                hint="flatten the templates",
            )
        try:
            names = _partial_names(pystache.parse(body), every=True)
        except Exception as exc:  # noqa: BLE001 - a stored body that no longer parses
            raise TemplateError(f"template {name!r} is not valid Mustache: {exc}") from None
        size = len(body)
        for p in names:
            if p in chain:
                cycle = chain[chain.index(p) :] + [p]
                raise TemplateError(
                    f"partials form a cycle: {' > '.join(cycle)}",
                    hint="a template may not include itself, directly or through other templates",
                )
            load(p, chain)
            size += expand(p, body_of(p), [*chain, p])
            if size > MAX_EXPANDED_CHARS:
                raise TemplateError(
                    f"template {chain[0]!r} expands to more than {MAX_EXPANDED_CHARS} characters through its partials"
                )
        sizes[name] = size
        return size

    root = template["name"]
    expand(root, replacing.get(root, template["structure"]), [root])
    return {k: v for k, v in found.items() if k != root}


def check_variables(variables: dict[str, str], db_path: str | Path | None = None) -> None:
    """Refuse bad variable names, and (given the database) any query the sandbox refuses."""
    if not isinstance(variables, dict):
        raise TemplateError("variables must be an object of name -> SQL query")
    if len(variables) > MAX_VARIABLES:
        raise TemplateError(f"a template has at most {MAX_VARIABLES} variables")
    for name, sql in variables.items():
        if not _VAR_NAME.match(name or "") or name in RESERVED or name.startswith("has_"):
            raise TemplateError(
                f"bad variable name {name!r}",
                hint="use letters, digits and _, not a node field (id, name, type, summary, ...) and not has_*",
            )
        if not isinstance(sql, str) or not sql.strip():
            raise TemplateError(f"variable {name}: the query is empty")
    if db_path is not None and variables:
        probe = {"id": -1, "name": "", "type": "", "key": ""}
        with Sandbox(db_path) as box:
            for name, sql in variables.items():
                box.run(name, sql, probe)


def _template_row(row: tuple) -> dict[str, Any]:
    tid, name, body, variables, etype, desc, types, created, updated = row
    return {
        "id": tid,
        "name": name,
        "description": desc,
        "structure": body,
        "variables": loads(variables, {}),
        "node_types": loads(types, []) or ([etype] if etype else []),
        "created_ms": created,
        "updated_ms": updated,
    }


_TCOLS = "id, name, body, variables, entity_type, description, node_types, created_ms, updated_ms"


def need_schema(store: Store) -> None:
    """A clear error on a database older than the authoring migration (a read-only open cannot migrate)."""
    cols = {r[1] for r in store.query("PRAGMA table_info(templates)")}
    if "node_types" not in cols:
        raise StoreError(
            f"{store.path.name} predates document templates",
            hint="commands that write to it migrate it (kgr render, kgr template add, kgr ingest)",
        )


def list_templates(store: Store) -> list[dict[str, Any]]:
    need_schema(store)
    return [_template_row(r) for r in store.query(f"SELECT {_TCOLS} FROM templates ORDER BY name")]


def get_template(store: Store, ref: str | int) -> dict[str, Any]:
    need_schema(store)
    row = None
    if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
        row = store.conn.execute(f"SELECT {_TCOLS} FROM templates WHERE id=?", (int(ref),)).fetchone()
    if row is None:
        row = store.conn.execute(f"SELECT {_TCOLS} FROM templates WHERE name=?", (str(ref),)).fetchone()
    if row is None:
        raise TemplateNotFound(f"no template {ref!r}", hint="list them with `kgr template list`")
    return _template_row(row)


def save_template(
    store: Store,
    *,
    name: str,
    structure: str | None = None,
    variables: dict[str, str] | None = None,
    description: str | None = None,
    node_types: list[str] | None = None,
    create: bool = True,
    update: bool = True,
) -> dict[str, Any]:
    """Create or update a template (checked first: body, variable names, every query in the sandbox).

    Call inside ``store.write()``. Updating replaces what is given and keeps the rest.
    """
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise TemplateError("a template needs a name (at most 200 characters)")
    existing = store.conn.execute(f"SELECT {_TCOLS} FROM templates WHERE name=?", (name,)).fetchone()
    if existing and not update:
        raise TemplateError(f"template {name!r} already exists", hint="update it instead")
    if not existing and not create:
        raise TemplateNotFound(f"no template {name!r}")
    old = _template_row(existing) if existing else None
    body = structure if structure is not None else (old["structure"] if old else None)
    if body is None:
        raise TemplateError(f"template {name!r} needs a structure (the Mustache body)")
    if check_body(body):
        resolve_partials(store, {"name": name, "structure": body}, replacing={name: body})
    vars_ = variables if variables is not None else (old["variables"] if old else {})
    check_variables(vars_, store.path)
    types = node_types if node_types is not None else (old["node_types"] if old else [])
    desc = description if description is not None else (old["description"] if old else None)
    ts = now_ms()
    if old:
        store.execute(
            "UPDATE templates SET body=?, variables=?, description=?, node_types=?, entity_type=?, "
            "updated_ms=? WHERE id=?",
            (body, dumps(vars_), desc, dumps(types), types[0] if len(types) == 1 else None, ts, old["id"]),
        )
    else:
        store.execute(
            "INSERT INTO templates(name, body, variables, description, node_types, entity_type, created_ms, "
            "updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (name, body, dumps(vars_), desc, dumps(types), types[0] if len(types) == 1 else None, ts, ts),
        )
    return get_template(store, name)


def delete_template(store: Store, ref: str | int) -> dict[str, Any]:
    """Delete a template and its cached documents; the built-in default cannot be deleted."""
    t = get_template(store, ref)
    if t["name"] == DEFAULT_TEMPLATE:
        raise TemplateError("the default template cannot be deleted", hint="update it instead")
    users = [o["name"] for o in list_templates(store) if o["name"] != t["name"] and t["name"] in _includes(o)]
    if users:
        raise TemplateError(
            f"template {t['name']!r} is included as a partial by {', '.join(map(repr, users))}",
            hint=f"remove {{{{> {t['name']}}}}} from them first",
        )
    cached = store.scalar("SELECT count(*) FROM document_cache WHERE template_id=?", (t["id"],))
    store.execute("DELETE FROM document_cache WHERE template_id=?", (t["id"],))
    store.execute("DELETE FROM templates WHERE id=?", (t["id"],))
    return {"id": t["id"], "name": t["name"], "cached_documents_removed": cached}


def _includes(t: dict[str, Any]) -> list[str]:
    """The partials a stored template's body names (none when it no longer parses)."""
    import pystache

    if "{{" not in (t.get("structure") or "") or ">" not in t["structure"]:
        return []
    try:
        return _partial_names(pystache.parse(t["structure"]))
    except Exception:  # noqa: BLE001
        return []


# -- nodes ------------------------------------------------------------------------------------------


def node(store: Store, eid: int) -> dict[str, Any]:
    row = store.conn.execute(
        "SELECT id, key, name, type, description, aliases, meta, origin FROM entities WHERE id=?", (eid,)
    ).fetchone()
    if row is None:
        raise NodeNotFound(f"no node with id {eid}")
    meta = loads(row[6], {}) or {}
    return {
        "id": row[0],
        "key": row[1],
        "name": row[2],
        "type": row[3],
        "summary": row[4] or "",
        "aliases": loads(row[5], []),
        "properties": meta.get("properties") or {},
        "template": meta.get("template"),
        "origin": row[7],
    }


def resolve_node(store: Store, ref: str | int, *, fuzzy_cutoff: float = 70.0) -> dict[str, Any]:
    """A node by id, then key, then exact name (case-insensitive), then fuzzy name (rapidfuzz)."""
    if isinstance(ref, int) or (isinstance(ref, str) and ref.strip().isdigit()):
        row = store.conn.execute("SELECT id FROM entities WHERE id=?", (int(ref),)).fetchone()
        if row:
            return node(store, row[0])
    text = str(ref).strip()
    if not text:
        raise NodeNotFound("an empty node identifier")
    row = store.conn.execute("SELECT id FROM entities WHERE key=?", (text,)).fetchone()
    if row is None:
        row = store.conn.execute(
            "SELECT id FROM entities WHERE name=? COLLATE NOCASE ORDER BY popularity DESC, id LIMIT 1", (text,)
        ).fetchone()
    if row:
        return node(store, row[0])
    from rapidfuzz import fuzz, process

    from kgr.retrieval.entities import lookup

    candidates = {h["id"]: h["name"] for h in lookup(store, text, limit=50)}
    if not candidates:  # a misspelling shares no full word with the name: score every name
        candidates = dict(store.query("SELECT id, name FROM entities WHERE status != 'merged' LIMIT 200000"))
    best = (
        process.extractOne(
            text.lower(), {k: v.lower() for k, v in candidates.items()}, scorer=fuzz.WRatio, score_cutoff=fuzzy_cutoff
        )
        if candidates
        else None
    )
    if best is None:
        raise NodeNotFound(f"no node matches {text!r}", hint="give a node id or its exact name")
    return node(store, best[2])


def template_for(store: Store, n: dict[str, Any], override: str | int | None = None) -> dict[str, Any]:
    """The override, else the node's own template, else one made for its type, else the default."""
    if override is not None:
        return get_template(store, override)
    if n.get("template"):
        try:
            return get_template(store, n["template"])
        except TemplateNotFound:
            pass  # its template was deleted: fall through to the type's or the default
    for t in list_templates(store):
        if t["name"] != DEFAULT_TEMPLATE and n["type"] in t["node_types"]:
            return t
    try:
        return get_template(store, DEFAULT_TEMPLATE)
    except TemplateNotFound:
        now = now_ms()
        return {
            "id": None,
            "name": DEFAULT_TEMPLATE,
            "description": "built-in",
            "structure": DEFAULT_BODY,
            "variables": DEFAULT_VARIABLES,
            "node_types": [],
            "created_ms": now,
            "updated_ms": now,
        }


# -- rendering and the cache ------------------------------------------------------------------------------


def _node_state(store: Store, eid: int) -> list:
    row = store.conn.execute(
        "SELECT key, name, type, description, aliases, meta, status FROM entities WHERE id=?", (eid,)
    ).fetchone()
    if row is None:
        return [eid, None]
    rels = store.query(
        "SELECT id, src_id, dst_id, rel, strength, meta FROM relations WHERE src_id=?1 OR dst_id=?1 ORDER BY id", (eid,)
    )
    obs = store.query("SELECT id, content, valid_until_ms FROM observations WHERE entity_id=? ORDER BY id", (eid,))
    return [eid, list(row), [list(r) for r in rels], [list(o) for o in obs]]


def signature(store: Store, template: dict[str, Any], deps: list[int]) -> str:
    """sha256 over the template and the state of every dependency node (row, relations, observations)."""
    h = hashlib.sha256()
    h.update(dumps([template["name"], template["structure"], template["variables"]]).encode())
    for name, p in sorted((template.get("partials") or {}).items()):
        h.update(dumps(["partial", name, p["structure"], p["variables"]]).encode())
    for eid in sorted(set(deps)):
        h.update(dumps(_node_state(store, eid)).encode())
    return h.hexdigest()


def _entity_ids(store: Store, rows: list[dict[str, Any]]) -> set[int]:
    found = {v for r in rows for c, v in r.items() if (c == "id" or c.endswith("_id")) and isinstance(v, int)}
    if not found:
        return set()
    ids = sorted(found)
    out: set[int] = set()
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        out.update(
            r[0] for r in store.query(f"SELECT id FROM entities WHERE id IN ({','.join('?' * len(part))})", part)
        )
    return out


def with_partials(store: Store, template: dict[str, Any]) -> dict[str, Any]:
    """``template`` with ``partials``: the templates it includes, by name (:func:`resolve_partials`)."""
    if "partials" in template:
        return template
    return {**template, "partials": resolve_partials(store, template) if _includes(template) else {}}


def render(store: Store, n: dict[str, Any], template: dict[str, Any], *, sandbox: Sandbox) -> tuple[str, list[int]]:
    """The document for node ``n`` and the ids of the nodes it depends on (``n`` first).

    Partials (``{{> name}}``) render the registered template of that name in the same
    context, and their variables run for the node too (the including template's own variables
    win a name they share)."""
    template = with_partials(store, template)
    import pystache

    data: dict[str, Any] = {}
    for k, v in (n.get("properties") or {}).items():
        if isinstance(k, str) and k not in RESERVED:
            data[k] = v
    data.update(
        {
            "id": n["id"],
            "key": n["key"],
            "name": n["name"],
            "type": n["type"],
            "summary": n["summary"],
            "description": n["summary"],
            "properties": n.get("properties") or {},
        }
    )
    deps = {n["id"]}
    partials = template.get("partials") or {}
    variables: dict[str, str] = {}
    for p in partials.values():  # a partial brings its own variables; the including template's win
        for var, sql in p["variables"].items():
            variables.setdefault(var, sql)
    variables.update(template["variables"])
    for var, sql in variables.items():
        rows = sandbox.run(var, sql, n)
        data[var] = rows
        data[f"has_{var}"] = bool(rows)
        deps |= _entity_ids(store, rows)
    # partials come from this dict only (never from files); resolve_partials has checked them
    bodies = {name: p["structure"] for name, p in partials.items()}
    renderer = pystache.Renderer(escape=lambda s: s, missing_tags="ignore", partials=bodies, search_dirs=[])
    try:
        content = renderer.render(template["structure"], data)
    except Exception as exc:  # noqa: BLE001 - pystache raises plain exceptions for bad templates
        raise TemplateError(f"template {template['name']}: {exc}") from None
    return content, [n["id"], *sorted(deps - {n["id"]})]


def generate(
    store: Store,
    refs: list[str | int],
    *,
    force: bool = False,
    template: str | int | None = None,
    include_dependencies: bool = True,
    sandbox: Sandbox | None = None,
) -> tuple[list[dict], list[dict]]:
    """Documents for ``refs`` and the cache rows to write (``cache_writes``), served from the cache
    when its signature still matches. Errors for one identifier are reported in its entry."""
    own = sandbox is None
    box = sandbox or Sandbox(store.path)
    docs: list[dict] = []
    writes: list[dict] = []
    try:
        for ref in refs:
            try:
                n = resolve_node(store, ref)
                t = with_partials(store, template_for(store, n, template))
                hit = None
                if t["id"] is not None and not force:
                    hit = store.conn.execute(
                        "SELECT signature, content, created_ms, dependencies FROM document_cache "
                        "WHERE entity_id=? AND template_id=?",
                        (n["id"], t["id"]),
                    ).fetchone()
                if hit is not None:
                    deps = loads(hit[3], []) or [n["id"]]
                    if signature(store, t, deps) == hit[0]:
                        docs.append(_doc(n, hit[1], hit[2], True, deps, t, include_dependencies, ref))
                        continue
                content, deps = render(store, n, t, sandbox=box)
                ts = now_ms()
                if t["id"] is not None:
                    writes.append(
                        {
                            "entity_id": n["id"],
                            "template_id": t["id"],
                            "signature": signature(store, t, deps),
                            "content": content,
                            "created_ms": ts,
                            "dependencies": deps,
                        }
                    )
                docs.append(_doc(n, content, ts, False, deps, t, include_dependencies, ref))
            except (NodeNotFound, TemplateError) as exc:
                docs.append(
                    {
                        "identifier": str(ref),
                        "status": "error",
                        "message": exc.message + (f" (hint: {exc.hint})" if exc.hint else ""),
                    }
                )
    finally:
        if own:
            box.close()
    return docs, writes


def _doc(n, content, ts, from_cache, deps, t, include_dependencies, ref) -> dict[str, Any]:
    out = {
        "identifier": str(ref),
        "status": "success",
        "node_id": n["id"],
        "node_name": n["name"],
        "content": content,
        "generated_at": ts,
        "from_cache": from_cache,
        "template_used": t["name"],
    }
    if include_dependencies:
        out["dependencies"] = list(deps)
    return out


def store_cache(store: Store, writes: list[dict]) -> int:
    """Write rendered documents to the cache (inside ``store.write()``); rows whose node or template
    is gone meanwhile are skipped. Returns how many were stored."""
    n = 0
    for w in writes:
        ok = store.scalar(
            "SELECT count(*) FROM entities e, templates t WHERE e.id=? AND t.id=?", (w["entity_id"], w["template_id"])
        )
        if not ok:
            continue
        store.execute(
            "INSERT INTO document_cache(entity_id, template_id, signature, content, created_ms, dependencies) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(entity_id, template_id) DO UPDATE SET signature=excluded.signature, "
            "content=excluded.content, created_ms=excluded.created_ms, dependencies=excluded.dependencies",
            (w["entity_id"], w["template_id"], w["signature"], w["content"], w["created_ms"], dumps(w["dependencies"])),
        )
        n += 1
    return n


def parse_var(spec: str) -> tuple[str, str]:
    """``name=SQL`` (from ``--var``) as a pair."""
    name, sep, sql = spec.partition("=")
    if not sep or not name.strip() or not sql.strip():
        raise UsageError(f"bad --var {spec!r}", hint="write --var name='SELECT ... WHERE id = :id'")
    return name.strip(), sql.strip()
