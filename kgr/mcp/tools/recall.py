"""MCP tools for remember and recall (seed 003), in the memory profile.

Thin adapters over :mod:`kgr.memory.recall`: writes (remember, the access counts of recall,
consolidation, import) go through ``Service.write`` (the server's one writer, or on a server
without a knowledge root, the database's writer lock taken for the call); reads through
``Service.read``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from kgr.mcp.registry import MAX_QUERY_CHARS, Ref, boundary, tool, toolset
from kgr.mcp.service import Service

Text = Annotated[str, Field(min_length=1, max_length=100_000, description="What to remember, in plain words.")]
Importance = Annotated[float | None, Field(ge=0.0, le=1.0, description="How much it matters, 0 to 1 (default 0.5).")]
Tags = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=64)]] | None,
    Field(max_length=32, description="Labels to filter recall by."),
]
TimeMs = Annotated[int | None, Field(ge=0, description="A time in milliseconds since 1970 (UTC).")]


def _iso(ms: int | None) -> str | None:
    from datetime import datetime, timezone

    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def seed_shape(mem: dict[str, Any]) -> dict[str, Any]:
    """A memory as seed 003 answers it, kgr's keys following: ``entities`` the names of the
    entities it names (its RememberResult), ``content``, ``source`` (default "conversation"),
    ``timestamp`` and ``last_accessed`` (ISO 8601, UTC) as in its memories table; the entities
    with their ids and types in ``entity_refs``."""
    refs = mem.get("entities") or []
    return {
        **mem,
        "entities": [e["name"] for e in refs],
        "entity_refs": refs,
        "content": mem.get("text"),
        "source": mem.get("label") or "conversation",
        "timestamp": _iso(mem.get("created_ms")),
        "last_accessed": _iso(mem.get("last_access_ms")),
    }


@toolset
class RecallTools:
    """remember, recall, consolidate_memories, memory_history, export_memories, import_memories."""

    def __init__(self, svc: Service):
        self.svc = svc

    @tool("remember", profiles=("memory",), title="Remember", read_only=False, idempotent=True)
    @boundary
    def remember(
        self,
        content: Text,
        importance: Importance = None,
        tags: Tags = None,
        source: Annotated[
            str | None, Field(max_length=200, description="Where it came from (conversation, import, ...).")
        ] = None,
    ) -> dict[str, Any]:
        """Store a memory. It is indexed for keyword and semantic recall, and the people, places
        and things it names become graph entities with this memory as an observation. The same
        text twice is one memory (created: false). Returns its id and entities (their names;
        entity_refs has their ids and types)."""
        from kgr.memory import recall

        cfg = self.svc.cfg
        return seed_shape(
            self.svc.write(
                lambda store: recall.remember(store, content, cfg, importance=importance, tags=tags, label=source)
            )
        )

    @tool("recall", profiles=("memory",), title="Recall memories", read_only=False, idempotent=False)
    @boundary
    def recall(
        self,
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for.")],
        limit: Annotated[int, Field(ge=1, le=100, description="How many memories.")] = 5,
        include_graph: Annotated[
            bool, Field(description="Also follow entities named in the query to their memories.")
        ] = True,
        as_of: TimeMs = None,
        include_history: Annotated[bool, Field(description="Follow observations no longer valid too.")] = False,
        tags: Tags = None,
    ) -> dict[str, Any]:
        """Retrieve the memories most relevant to a query, best first: keyword and semantic
        matches fused, plus memories about entities the query names, weighted by recency,
        importance and how often each was recalled, the best re-ranked by token-level
        similarity. Each result has its content, id, score and why. Counts an access for each
        memory returned. as_of recalls what was known then."""
        from kgr.memory import recall

        svc = self.svc
        embed = svc.embed_query()
        out = svc.read(
            recall.recall,
            query,
            svc.cfg,
            k=limit,
            embed_query=embed,
            include_graph=include_graph,
            as_of=as_of,
            include_history=include_history,
            tags=tags,
            touch=False,
        )
        # (not the in-memory vector matrix: each recall's access count is a write, after which
        # that matrix of every chunk would be read again; the memories' own vectors are few)
        ids = [r["doc_id"] for r in out["results"]]
        if ids:
            now = recall.now_ms()
            self.svc.write(lambda store: recall.touch_memories(store, ids, now))
            for r in out["results"]:
                r["access_count"] = (r["access_count"] or 0) + 1
                r["last_access_ms"] = now
        out["results"] = [seed_shape(r) for r in out["results"]]
        return out

    @tool(
        "consolidate_memories",
        profiles=("memory",),
        title="Merge near-duplicate memories",
        read_only=False,
        destructive=True,
        idempotent=True,
    )
    @boundary
    def consolidate_memories(
        self,
        threshold: Annotated[
            float | None,
            Field(gt=0.0, le=1.0, description="Cosine similarity from which two memories are one (default 0.9)."),
        ] = None,
        dry_run: Annotated[bool, Field(description="Only report what would merge.")] = False,
    ) -> dict[str, Any]:
        """Merge near-duplicate memories: each group keeps one memory with the largest importance,
        the summed access counts, all tags and the merged memories' ids and texts as provenance."""
        from kgr.memory import recall

        cfg = self.svc.cfg
        return self.svc.write(lambda store: recall.consolidate(store, cfg, threshold=threshold, dry_run=dry_run))

    @tool("memory_history", profiles=("memory",), title="An entity's observations over time")
    @boundary
    def memory_history(
        self,
        entity: Ref,
        as_of: TimeMs = None,
        include_history: Annotated[
            bool, Field(description="All observations, closed ones included (else those valid at as_of or now).")
        ] = True,
    ) -> dict[str, Any]:
        """An entity's observations with valid_from_ms and valid_until_ms and the memory each came
        from: the whole history, or what was valid at as_of."""
        from kgr.memory import recall

        return self.svc.read(recall.history, entity, as_of=as_of, include_history=include_history)

    @tool("export_memories", profiles=("memory",), title="Export memories")
    @boundary
    def export_memories(
        self,
        offset: Annotated[int, Field(ge=0, le=10_000_000)] = 0,
        limit: Annotated[int, Field(ge=1, le=1000)] = 200,
    ) -> dict[str, Any]:
        """Memories as records (text, importance, tags, times, access count, merged_from and
        observations with their validity), oldest first, for import_memories; page with
        offset and next_offset."""
        from kgr.memory import recall

        def page(store):
            recs = list(recall.export(store))
            return {
                "total": len(recs),
                "memories": recs[offset : offset + limit],
                "next_offset": offset + limit if offset + limit < len(recs) else None,
            }

        return self.svc.read(page)

    @tool("import_memories", profiles=("memory",), title="Import memories", read_only=False, idempotent=True)
    @boundary
    def import_memories(
        self,
        memories: Annotated[
            list[dict[str, Any]], Field(min_length=1, max_length=1000, description="Records from export_memories.")
        ],
    ) -> dict[str, Any]:
        """Import memories exported by export_memories (or `kgr memories export`, one record per
        line); memories already stored are skipped. Nothing is written if any record is bad."""
        from kgr.memory import recall

        cfg = self.svc.cfg
        return self.svc.write(lambda store: recall.import_records(store, memories, cfg))
