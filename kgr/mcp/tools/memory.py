"""The ``memory`` profile: a drop-in for the reference MCP memory server (seed 001).

The nine tools of the reference keep the reference's names, argument names and result shapes (so a client
written for ``@modelcontextprotocol/server-memory`` works), on :mod:`kgr.memory.graph`. What
they add: read_graph and search_nodes return a page at a time (``limit``, ``cursor`` ->
``nextCursor``) and can return names only; delete_observations closes validity unless
``hard``; two processes writing one database lose nothing.

Writes go through the one write path of the tools (:meth:`kgr.mcp.service.Service.write`):
when this server runs the database's writer (started with --root or --watch), they are jobs
of that writer; otherwise each takes the database's writer lock for the call (a memory write
never starts a writer), waiting while another process writes: two memory servers (two MCP
clients) on one database take turns, and every read starts from the committed state.
Entities are embedded later, by ``kgr embed --pending`` (or the next ingest), when the
database has vectors.

Seed 001 adds a tenth tool, ``visualize_graph``: the live graph page of ``kgr viz``, served on
127.0.0.1 by a thread of this server (so it ends with the server), its URL returned. And its
``KNOWLEDGE_BASE_FILE_PATH`` (the reference's ``MEMORY_FILE_PATH``) names a JSONL memory file
imported when the server starts on a database without memory entities
(:func:`import_memory_file`, on :mod:`kgr.memory.memfile`).
"""

from __future__ import annotations

import sys
import threading
from typing import Annotated, Any, Callable, Mapping

from pydantic import BaseModel, Field

from kgr.errors import StoreError
from kgr.ingest.writer import StillQueued
from kgr.mcp.registry import MAX_NAME_CHARS, MAX_QUERY_CHARS, boundary, tool, toolset
from kgr.mcp.service import Service
from kgr.memory import graph as memory
from kgr.memory import memfile

MAX_ITEMS = 10_000
MAX_TEXT = 100_000

Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]


class Entity(BaseModel):
    name: Name = Field(description="The name of the entity")
    entityType: Name = Field(description="The type of the entity")  # noqa: N815 - the reference's name
    observations: list[Text] = Field(
        max_length=MAX_ITEMS, description="An array of observation contents associated with the entity"
    )


class Relation(BaseModel):
    from_: Name = Field(alias="from", description="The name of the entity where the relation starts")
    to: Name = Field(description="The name of the entity where the relation ends")
    relationType: Name = Field(description="The type of the relation")  # noqa: N815

    model_config = {"populate_by_name": True}

    def plain(self) -> dict[str, str]:
        return {"from": self.from_, "to": self.to, "relationType": self.relationType}


class ObservationAdd(BaseModel):
    entityName: Name = Field(description="The name of the entity to add the observations to")  # noqa: N815
    contents: list[Text] = Field(max_length=MAX_ITEMS, description="An array of observation contents to add")


class ObservationDelete(BaseModel):
    entityName: Name = Field(description="The name of the entity containing the observations")  # noqa: N815
    observations: list[Text] = Field(max_length=MAX_ITEMS, description="An array of observations to delete")


Limit = Annotated[int, Field(ge=1, le=memory.MAX_LIMIT, description="Entities per page.")]
Cursor = Annotated[
    str | None, Field(max_length=32, description="The nextCursor of the previous page; none for the first.")
]
NamesOnly = Annotated[bool, Field(description="Return only the entity names (a short answer for a large graph).")]


@toolset
class MemoryTools:
    """The memory tools, bound to one :class:`kgr.mcp.service.Service`."""

    def __init__(self, svc: Service):
        self.svc = svc
        self._page = None  # the graph page of visualize_graph (a kgr.viz.VizServer), once started
        self._page_lock = threading.Lock()

    # -- plumbing ---------------------------------------------------------------------------

    def write(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return self.svc.write(lambda store: fn(store, *args, **kwargs), start_writer=False, label=fn.__name__)
        except StillQueued:
            raise StoreError(
                "the writer is busy: the memory change is queued and will be applied",
                hint="call read_graph later to see it",
            ) from None

    def read_page(self, fn: Callable[..., dict], *args: Any, **kwargs: Any) -> Any:
        """A page that fits the byte budget whole: fewer entities, never a cut list, as the SDK's
        result made by :meth:`Service.reply` (a whole graph is read in many pages, each in as few
        passes as can be; the tools' ``dict`` annotation still gives their output schema)."""
        return self.svc.reply(self.svc.read(fn, *args, max_bytes=self.svc.max_result_bytes - 1000, **kwargs))

    # -- writes -------------------------------------------------------------------------------

    @tool("create_entities", profiles=("memory",), title="Create Entities", read_only=False, idempotent=False)
    @boundary
    def create_entities(self, entities: Annotated[list[Entity], Field(max_length=MAX_ITEMS)]) -> dict[str, Any]:
        """Create multiple new entities in the knowledge graph. Entities whose name already
        exists are skipped; returns the entities created."""
        return {"entities": self.write(memory.create_entities, [e.model_dump() for e in entities])}

    @tool("create_relations", profiles=("memory",), title="Create Relations", read_only=False, idempotent=False)
    @boundary
    def create_relations(self, relations: Annotated[list[Relation], Field(max_length=MAX_ITEMS)]) -> dict[str, Any]:
        """Create multiple new relations between entities in the knowledge graph. Relations
        should be in active voice. Both ends must exist; existing relations are skipped;
        returns the relations created."""
        return {"relations": self.write(memory.create_relations, [r.plain() for r in relations])}

    @tool("add_observations", profiles=("memory",), title="Add Observations", read_only=False, idempotent=False)
    @boundary
    def add_observations(
        self, observations: Annotated[list[ObservationAdd], Field(max_length=MAX_ITEMS)]
    ) -> dict[str, Any]:
        """Add new observations to existing entities in the knowledge graph. Fails, changing
        nothing, if an entity does not exist; returns the observations added to each entity."""
        return {"results": self.write(memory.add_observations, [o.model_dump() for o in observations])}

    @tool("delete_entities", profiles=("memory",), title="Delete Entities", read_only=False, destructive=True)
    @boundary
    def delete_entities(
        self,
        entityNames: Annotated[
            list[Name],
            Field(  # noqa: N803 - the reference's name
                max_length=MAX_ITEMS, description="An array of entity names to delete"
            ),
        ],
    ) -> dict[str, Any]:
        """Delete multiple entities and their associated relations from the knowledge graph."""
        n = self.write(memory.delete_entities, entityNames)
        return {"success": True, "message": "Entities deleted successfully", "deleted": n}

    @tool("delete_observations", profiles=("memory",), title="Delete Observations", read_only=False, destructive=True)
    @boundary
    def delete_observations(
        self,
        deletions: Annotated[list[ObservationDelete], Field(max_length=MAX_ITEMS)],
        hard: Annotated[
            bool,
            Field(
                description="Erase the observations instead of closing their validity "
                "(by default they leave the graph but stay in its history)."
            ),
        ] = False,
    ) -> dict[str, Any]:
        """Delete specific observations from entities in the knowledge graph. By default an
        observation's validity is closed: it no longer appears, and its history stays queryable."""
        n = self.write(memory.delete_observations, [d.model_dump() for d in deletions], hard=hard)
        return {"success": True, "message": "Observations deleted successfully", "deleted": n}

    @tool("delete_relations", profiles=("memory",), title="Delete Relations", read_only=False, destructive=True)
    @boundary
    def delete_relations(
        self,
        relations: Annotated[
            list[Relation], Field(max_length=MAX_ITEMS, description="An array of relations to delete")
        ],
    ) -> dict[str, Any]:
        """Delete multiple relations from the knowledge graph."""
        n = self.write(memory.delete_relations, [r.plain() for r in relations])
        return {"success": True, "message": "Relations deleted successfully", "deleted": n}

    # -- reads ---------------------------------------------------------------------------------

    @tool("read_graph", profiles=("memory",), title="Read Graph")
    @boundary
    def read_graph(
        self, limit: Limit = memory.DEFAULT_LIMIT, cursor: Cursor = None, names_only: NamesOnly = False
    ) -> dict[str, Any]:
        """Read the knowledge graph a page at a time: entities (with observations) in creation
        order and the relations starting at them. Pass nextCursor back as cursor for the next
        page; nextCursor is null on the last page."""
        return self.read_page(memory.read_graph, limit=limit, cursor=cursor, names_only=names_only)

    @tool("search_nodes", profiles=("memory",), title="Search Nodes")
    @boundary
    def search_nodes(
        self,
        query: Annotated[
            str,
            Field(
                max_length=MAX_QUERY_CHARS,
                description=("The search query to match against entity names, types, and observation content"),
            ),
        ],
        limit: Limit = memory.DEFAULT_LIMIT,
        cursor: Cursor = None,
        names_only: NamesOnly = False,
    ) -> dict[str, Any]:
        """Search for nodes in the knowledge graph based on a query (case-insensitive substring
        of names, types and observations): the matching entities, a page at a time, and the
        relations touching them (one joining entities on two pages comes with both)."""
        return self.read_page(memory.search_nodes, query, limit=limit, cursor=cursor, names_only=names_only)

    @tool("open_nodes", profiles=("memory",), title="Open Nodes")
    @boundary
    def open_nodes(
        self,
        names: Annotated[
            list[Name], Field(max_length=memory.MAX_LIMIT, description="An array of entity names to retrieve")
        ],
    ) -> dict[str, Any]:
        """Open specific nodes in the knowledge graph by their names: those entities and the
        relations touching them."""
        return self.svc.reply(self.svc.read(memory.open_nodes, names))

    # -- the graph page --------------------------------------------------------------------------

    @tool("visualize_graph", profiles=("memory",), title="Visualize Graph")
    @boundary
    def visualize_graph(
        self,
        open_browser: Annotated[
            bool,
            Field(description="Also open the page in this machine's browser (when it has a graphical session)."),
        ] = False,
        port: Annotated[
            int | None,
            Field(ge=1, le=65535, description="The port to serve the page on (default: any free port)."),
        ] = None,
    ) -> dict[str, Any]:
        """Show the knowledge graph as an interactive page (zoom, pan, drag, details on click,
        colours by entity type, labels on or off, live updates every 2 s with pause): starts the
        page on 127.0.0.1 (or reuses the one this server already runs) and returns its url; the
        page's data is at graph_api. The page ends with this server."""
        from kgr import viz

        with self._page_lock:
            page, started = self._page, False
            if page is None or not page.thread.is_alive():
                try:
                    page = viz.serve_in_thread(self.svc.db, port=port or 0)
                except viz.VizError as exc:
                    raise viz.VizError(
                        exc.message, hint="call visualize_graph without a port for any free port" if port else exc.hint
                    ) from None
                if self._page is None:
                    self.svc.closers.append(self._stop_page)
                self._page, started = page, True
        url = page.url
        entities, relations = self.svc.read(
            lambda store: store.query("SELECT (SELECT count(*) FROM entities), (SELECT count(*) FROM relations)")[0]
        )
        opened = viz.open_in_browser(url) if open_browser else False
        note = ""
        if port and port != page.port:
            note = f" (it was started on port {page.port}; the port is chosen when the page starts)"
        return {
            "url": url,
            "graph_api": url + "api/graph",
            "message": f"Knowledge graph visualization is available at {url}{note}",
            "started": started,
            "opened": opened,
            "entities": entities,
            "relations": relations,
        }

    def _stop_page(self) -> None:
        from kgr import viz

        with self._page_lock:
            page, self._page = self._page, None
        if page is not None:
            viz.stop(page)


# -- the memory file at start --------------------------------------------------------------------


def import_memory_file(
    svc: Service, environ: Mapping[str, str] | None = None, say: Callable[[str], None] | None = None
):
    """Import the JSONL memory file named by KNOWLEDGE_BASE_FILE_PATH (seed 001) or
    MEMORY_FILE_PATH (the reference server) when the database holds no memory entity; what
    happened goes to stderr. The seed's variable wins when both are set. An unreadable or
    invalid file raises (the server does not start, so nothing is written over a memory that
    was not read); a missing one is a first run. Returns the :class:`memfile.Outcome` (None
    when neither variable is set)."""
    if say is None:

        def say(line: str) -> None:
            print(line, file=sys.stderr, flush=True)

    found = memfile.from_environment(environ)
    if found is None:
        return None
    var, path = found.variable, found.path
    for other, value in found.ignored:
        same = " (the same file)" if value.strip() == str(path) else ""
        say(f"kgr serve: {var} and {other} are both set; {var} wins: {other}={value} is ignored{same}")
    outcome = svc.write(
        lambda store: memfile.import_at_start(store, path, var), start_writer=False, label="import the memory file"
    )
    if outcome.existing:
        say(
            f"kgr serve: {var}={path} not imported: the database already holds {outcome.existing} memory "
            "entities (to merge the file: kgr import --format mcp-memory FILE --db DB)"
        )
    elif outcome.missing:
        say(f"kgr serve: {var}={path} does not exist yet: the memory graph starts empty")
    else:
        c = outcome.imported
        say(
            f"kgr serve: imported {c['entities']} entities, {c['observations']} observations and "
            f"{c['relations']} relations from {var}={path}"
        )
        if outcome.left_out:
            shown = "; ".join(f"{r['from']} -{r['relationType']}-> {r['to']}" for r in outcome.left_out[:5])
            more = f" and {len(outcome.left_out) - 5} more" if len(outcome.left_out) > 5 else ""
            say(
                f"kgr serve: {len(outcome.left_out)} relations of {var} left out, an end not being an entity of "
                f"the file: {shown}{more} (create the entity, then create_relations)"
            )
    return outcome
