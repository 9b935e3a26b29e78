"""The ``authoring`` profile (seed 002): build the graph by hand, render documents, find paths.

Thin adapters over :mod:`kgr.authoring.nodes` and :mod:`kgr.authoring.templates`. Reads run on the
server's read connection within its time budget; writes (nodes, relationships, relation
types, templates, the document cache) go through ``Service.write``: the server's single
writer, or without a knowledge root to keep, the database's writer lock taken for the call.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from kgr.errors import KgrError, UsageError
from kgr.mcp.registry import MAX_HOPS, MAX_NAME_CHARS, boundary, tool, toolset
from kgr.mcp.service import Service

log = logging.getLogger("kgr.serve")

MAX_BATCH = 100
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]
NodeRef = Annotated[
    str,
    Field(
        min_length=1, max_length=MAX_NAME_CHARS, description="A node id (as returned by these tools) or its exact name."
    ),
]
Strength = Literal["weak", "medium", "strong"]
Props = Annotated[dict[str, Any] | None, Field(description="Additional properties (JSON values).")]


class NodeRelationship(BaseModel):
    target_id: NodeRef
    relationship_type: Annotated[str, Field(min_length=1, max_length=64)]
    direction: Literal["forward", "reverse"] = "forward"
    relevance_strength: Strength = "medium"
    properties: Props = None


class NodeSpec(BaseModel):
    id: Annotated[str | None, Field(max_length=MAX_NAME_CHARS, description="Required for update and delete.")] = None
    name: Annotated[str | None, Field(max_length=MAX_NAME_CHARS, description="Required for create.")] = None
    summary: Annotated[str | None, Field(max_length=10_000, description="Required for create.")] = None
    node_type: Annotated[str | None, Field(max_length=64)] = None
    template_id: Annotated[
        str | None, Field(max_length=200, description="The template (id or name) of its documents.")
    ] = None
    properties: Props = None
    relationships: Annotated[list[NodeRelationship] | None, Field(max_length=MAX_BATCH)] = None


class RelationshipSpec(BaseModel):
    id: Annotated[str | None, Field(max_length=32, description="Relationship id, for update and delete.")] = None
    source_id: NodeRef | None = None
    target_id: NodeRef | None = None
    relationship_type: Annotated[str | None, Field(max_length=64)] = None
    direction: Literal["forward", "reverse"] = "forward"
    relevance_strength: Strength | None = None
    properties: Props = None


class RelationTypeSpec(BaseModel):
    name: Annotated[str, Field(min_length=1, max_length=64)]
    description: Annotated[str | None, Field(max_length=2000)] = None
    directionality: Literal["strong", "weak", "balanced"] | None = None
    source_types: Annotated[list[Annotated[str, Field(max_length=64)]] | None, Field(max_length=50)] = None
    target_types: Annotated[list[Annotated[str, Field(max_length=64)]] | None, Field(max_length=50)] = None


class TemplateSpec(BaseModel):
    id: Annotated[str | None, Field(max_length=200, description="Template id or name, for update and delete.")] = None
    name: Annotated[str | None, Field(max_length=200)] = None
    description: Annotated[str | None, Field(max_length=2000)] = None
    structure: Annotated[
        str | None, Field(max_length=100_000, description="The Mustache body; {{> name}} includes a template.")
    ] = None
    variables: Annotated[
        dict[str, Annotated[str, Field(max_length=10_000)]] | None,
        Field(description="name -> one read-only SELECT; :id, :name, :type and :key are the node's."),
    ] = None
    node_types: Annotated[list[Annotated[str, Field(max_length=64)]] | None, Field(max_length=50)] = None


class NodePair(BaseModel):
    source_node_id: NodeRef
    target_node_id: NodeRef


def _dump(items: list[BaseModel]) -> list[dict[str, Any]]:
    return [i.model_dump(exclude_none=True) for i in items]


@toolset
class AuthoringTools:
    def __init__(self, svc: Service):
        self.svc = svc

    @tool(
        "manage_nodes",
        profiles=("authoring",),
        title="Create, update or delete nodes",
        read_only=False,
        destructive=True,
        idempotent=False,
    )
    @boundary
    def manage_nodes(
        self,
        operation: Literal["create", "update", "delete"],
        nodes: Annotated[list[NodeSpec], Field(min_length=1, max_length=MAX_BATCH)],
    ) -> dict[str, Any]:
        """Create, update or delete graph nodes in a batch; each node may bring relationships
        (forward: node -> target, reverse: target -> node; relevance_strength weak, medium or
        strong; a relationship type not registered yet is registered, balanced). Returns one
        result per node (node_id, status, message). Created and updated nodes are embedded at
        once (a vector search finds them); when that fails they stay pending for `kgr embed
        --pending` and `embedding` says why. Call explore_neighborhoods first so you link to
        existing nodes instead of duplicating them."""
        from kgr.authoring import nodes as authoring

        specs = _dump(nodes)
        svc = self.svc
        strict = svc.cfg.authoring.strict_relation_types

        def job(store):
            out = authoring.manage_nodes(store, operation, specs, strict=strict)
            written = authoring.written_nodes(out)
            if written:
                out["embedding"] = _embed_written(svc, store, written)
            return out

        return svc.write(job)

    @tool(
        "manage_relationships",
        profiles=("authoring",),
        title="Create, update or delete relationships",
        read_only=False,
        destructive=True,
        idempotent=False,
    )
    @boundary
    def manage_relationships(
        self,
        operation: Literal["create", "update", "delete"],
        relationships: Annotated[list[RelationshipSpec], Field(min_length=1, max_length=MAX_BATCH)],
    ) -> dict[str, Any]:
        """Create, update (type, relevance_strength, properties) or delete relationships in a
        batch. A relationship points from the node it matters more to (CHILD_OF, not PARENT_OF);
        use direction reverse to write it from the other end. A relationship type not registered
        yet is registered with directionality balanced (the result's message says so; change it
        with manage_relationship_types). Returns one result per item."""
        from kgr.authoring import nodes as authoring

        specs = _dump(relationships)
        strict = self.svc.cfg.authoring.strict_relation_types
        return self.svc.write(lambda store: authoring.manage_relationships(store, operation, specs, strict=strict))

    @tool(
        "manage_relationship_types",
        profiles=("authoring",),
        title="The relation type registry",
        read_only=False,
        destructive=True,
        idempotent=True,
    )
    @boundary
    def manage_relationship_types(
        self,
        operation: Literal["list", "create", "update", "delete"] = "list",
        types: Annotated[list[RelationTypeSpec] | None, Field(max_length=MAX_BATCH)] = None,
    ) -> dict[str, Any]:
        """List or edit the relation types: name, description, directionality (strong: matters
        much more to the source; weak: somewhat more; balanced: equally) and source and target
        node types. Path strengths weigh each edge by its type's directionality."""
        from kgr.authoring import nodes as authoring

        if operation == "list":
            return {"relation_types": self.svc.read(authoring.relation_types)}
        if not types:
            raise UsageError(f"{operation} needs types")
        specs = _dump(types)

        def job(store):
            out = []
            for t in specs:
                try:
                    with store.write():
                        if operation == "delete":
                            out.append({**authoring.delete_relation_type(store, t["name"]), "status": "success"})
                        else:
                            exists = store.scalar("SELECT 1 FROM relation_types WHERE name=?", (t["name"],))
                            if operation == "create" and exists:
                                raise authoring.AuthoringError(f"relation type {t['name']!r} already exists")
                            if operation == "update" and not exists:
                                raise authoring.AuthoringError(f"no relation type {t['name']!r}")
                            saved = authoring.save_relation_type(store, **t)
                            out.append({**saved, "status": "success"})
                except authoring.KgrError as exc:
                    out.append({"name": t["name"], "status": "error", "message": exc.message})
            return {"results": out}

        return self.svc.write(job)

    @tool(
        "manage_templates",
        profiles=("authoring",),
        title="Manage document templates",
        read_only=False,
        destructive=True,
        idempotent=False,
    )
    @boundary
    def manage_templates(
        self,
        operation: Literal["create", "update", "delete", "list"],
        templates: Annotated[list[TemplateSpec] | None, Field(max_length=MAX_BATCH)] = None,
    ) -> dict[str, Any]:
        """List, create, update or delete Mustache document templates. Variables are named
        read-only SQL queries over kgr's tables (entities, relations, relation_types,
        observations, mentions, docs, chunks, relation_evidence) with the node bound as :id,
        :name, :type and :key; each gives the template a list of rows and a has_<name> flag.
        Queries that write, attach, use pragmas or read other tables are refused. A structure
        may include other templates by name as partials ({{> name}}), with their variables; a
        partial must exist, and partials that form a cycle are refused."""
        from kgr.authoring import templates as tm

        if operation == "list":
            return {"templates": self.svc.read(tm.list_templates)}
        if not templates:
            raise UsageError(f"{operation} needs templates")
        specs = _dump(templates)

        def job(store):
            out = []
            for t in specs:
                ref = t.get("id") or t.get("name")
                try:
                    with store.write():
                        if operation == "delete":
                            out.append({**tm.delete_template(store, ref), "status": "success"})
                        else:
                            name = t.get("name") or (tm.get_template(store, ref)["name"] if ref else None)
                            if operation == "update" and t.get("id") and t.get("name"):
                                old = tm.get_template(store, t["id"])
                                if old["name"] != t["name"]:
                                    raise tm.TemplateError(
                                        "renaming a template is not supported", hint="create one under the new name"
                                    )
                            saved = tm.save_template(
                                store,
                                name=name,
                                structure=t.get("structure"),
                                variables=t.get("variables"),
                                description=t.get("description"),
                                node_types=t.get("node_types"),
                                create=operation == "create",
                                update=operation == "update",
                            )
                            out.append({"template_id": saved["id"], "name": saved["name"], "status": "success"})
                except tm.KgrError as exc:
                    out.append(
                        {
                            "template_id": t.get("id"),
                            "name": t.get("name"),
                            "status": "error",
                            "message": exc.message + (f" (hint: {exc.hint})" if exc.hint else ""),
                        }
                    )
            return {"results": out}

        return self.svc.write(job)

    @tool(
        "generate_documents",
        profiles=("authoring",),
        title="Render node documents",
        read_only=False,
        destructive=False,
        idempotent=True,
    )
    @boundary
    def generate_documents(
        self,
        node_identifiers: Annotated[
            list[NodeRef],
            Field(min_length=1, max_length=MAX_BATCH, description="Node ids or names (exact, else fuzzy)."),
        ],
        force_regenerate: bool = False,
        include_dependencies: bool = True,
        template_override: Annotated[str | None, Field(max_length=200)] = None,
    ) -> dict[str, Any]:
        """Render each node's document from its template (the node's own, one made for its type,
        or the default), served from the cache while nothing it depends on has changed
        (from_cache says which). Each document lists the node ids it depends on."""
        from kgr.authoring import templates as tm

        svc = self.svc
        docs, writes = svc.read(
            tm.generate,
            list(node_identifiers),
            force=force_regenerate,
            template=template_override,
            include_dependencies=include_dependencies,
        )
        out: dict[str, Any] = {"documents": docs}
        if writes:
            try:
                out["cached"] = svc.write(lambda store: _store_cache(store, writes))
            except KgrError as exc:  # the documents are still right; only the cache is not updated
                out["cached"] = 0
                out["cache_error"] = exc.message
        return out

    @tool("explore_neighborhoods", profiles=("authoring",), title="Explore around search terms")
    @boundary
    def explore_neighborhoods(
        self,
        search_terms: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]], Field(min_length=1, max_length=20)
        ],
        search_strategy: Literal["vector", "text", "combined"] = "text",
        max_results_per_term: Annotated[int, Field(ge=1, le=20)] = 3,
        neighborhood_depth: Annotated[int, Field(ge=0, le=MAX_HOPS)] = 2,
        include_relationship_types: bool = True,
        include_templates: bool = True,
    ) -> dict[str, Any]:
        """Before adding information, see what the graph already holds around each term: the
        matching nodes, their relationships, nearby nodes with their paths, common relationship
        types and templates; plus recommendations (parents to attach to, relationship types to
        use, nodes that seem missing), each with its reason."""
        from kgr.authoring import nodes as authoring

        svc = self.svc
        embed = svc.embed_query() if search_strategy != "text" else None
        return svc.read(
            authoring.explore_neighborhoods,
            list(search_terms),
            search_strategy=search_strategy,
            max_results_per_term=max_results_per_term,
            neighborhood_depth=neighborhood_depth,
            include_relationship_types=include_relationship_types,
            include_templates=include_templates,
            embed_query=embed,
        )

    @tool("find_relationship_paths", profiles=("authoring",), title="Paths between nodes, with strengths")
    @boundary
    def find_relationship_paths(
        self,
        node_pairs: Annotated[list[NodePair], Field(min_length=1, max_length=20)],
        max_path_length: Annotated[int, Field(ge=1, le=6)] = 4,
        max_paths_per_pair: Annotated[int, Field(ge=1, le=50)] = 5,
        min_path_strength: Annotated[float, Field(ge=0.0, le=1.0)] = 0.3,
    ) -> dict[str, Any]:
        """How two nodes are connected: the strongest paths (edges walked either way) up to
        max_path_length, each with its nodes, relationships, a narrative and its strength
        (product of relevance strength and directional weight per edge, divided by the length);
        paths below min_path_strength are left out. Each pair has a summary."""
        from kgr.authoring import nodes as authoring

        pairs = _dump(node_pairs)
        return self.svc.read(
            authoring.find_relationship_paths,
            pairs,
            max_path_length=max_path_length,
            max_paths_per_pair=max_paths_per_pair,
            min_path_strength=min_path_strength,
        )


def _embed_written(svc: Service, store, ids: list[int]) -> dict[str, Any]:
    """Embed the nodes just written with the server's query embedder; on failure they stay
    pending (the write itself has been committed) and the answer says why."""
    from kgr.authoring import nodes as authoring

    try:
        done = authoring.embed_nodes(store, ids, svc.embedder(), quantize=svc.cfg.embed.quantize)
        return {"status": "embedded", "embedded": done["embedded"], "pending": []}
    except Exception as exc:  # noqa: BLE001 - no model, another model's vectors, a failed run: the node stays pending
        msg = exc.message + (f" (hint: {exc.hint})" if exc.hint else "") if isinstance(exc, KgrError) else str(exc)
        log.warning("kgr serve: embedding %d written nodes failed: %s", len(ids), svc.scrub(msg))
        return {
            "status": "pending",
            "embedded": [],
            "pending": list(ids),
            "message": svc.scrub(msg) + " (the nodes are saved; `kgr embed --pending` embeds them later)",
        }


def _store_cache(store, writes) -> int:
    from kgr.authoring import templates as tm

    with store.write():
        return tm.store_cache(store, writes)
