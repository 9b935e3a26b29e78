"""Seed 002 (graph authoring with templates), as a client written to it sees `kgr serve --profile authoring`.

One real server subprocess over stdio drives every tool the seed lists with the seed's own argument
names and example calls (the seed's Miles Davis / Charlie Parker graph, its historical person template,
its document generation examples); the tests below check what it answered, each quoting the seed
section it checks. A second server, with the strict relation-type setting and no embedding model,
checks the refusal kept by the setting and the seed's graceful degradation.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from seed_client import payload, serve_params, session, text

# The seed's "Example Template with Cypher Variables", its structure verbatim; the variables are its
# Cypher queries said in kgr's SQL (the node bound as :id; relationship properties in relations.meta).
SEED_STRUCTURE = (
    "# {{name}} ({{birth_year}}-{{death_year}})\n\n{{summary}}\n\n{{#has_residences}}## Places Lived\n"
    "{{#residences}}* {{location}} (from {{start_date}})\n{{/residences}}{{/has_residences}}\n\n"
    "{{#has_collaborators}}## Collaborations\n{{#collaborators}}* Collaborated with {{name}} {{when}} on "
    "{{projects}}\n{{/collaborators}}{{/has_collaborators}}\n\n{{#has_influences}}## Influences\n"
    "{{#influences}}* {{#strength}}Strongly{{/strength}}{{^strength}}Moderately{{/strength}} influenced by "
    "{{name}}'s {{work_type}}\n{{/influences}}{{/has_influences}}"
)
SEED_VARIABLES = {
    "residences": "SELECT loc.id AS location_id, loc.name AS location, json_extract(r.meta, '$.start_date') "
    "AS start_date FROM relations r JOIN entities loc ON loc.id = r.dst_id "
    "WHERE r.src_id = :id AND r.rel = 'RESIDED_AT' AND loc.type = 'Location' ORDER BY start_date",
    "collaborators": "SELECT p.id AS person_id, p.name AS name, (SELECT group_concat(value, ', ') FROM "
    "json_each(r.meta, '$.projects')) AS projects, json_extract(r.meta, '$.when') AS \"when\" FROM relations r "
    "JOIN entities p ON p.id = r.dst_id WHERE r.src_id = :id AND r.rel = 'COLLABORATED_WITH' "
    "AND p.type = 'Person' AND r.strength IN ('medium', 'strong') ORDER BY \"when\"",
    "influences": "SELECT p.id AS person_id, p.name AS name, r.strength = 'strong' AS strength, "
    "p.description AS work_type FROM relations r JOIN entities p ON p.id = r.dst_id "
    "WHERE r.src_id = :id AND r.rel = 'INFLUENCED_BY' AND p.type = 'Person' ORDER BY r.strength DESC",
}
# The seed's "Resulting Document" for Charlie Parker.
SEED_DOCUMENT = """# Charlie Parker (1920-1955)

American jazz saxophonist and composer

## Places Lived
* Kansas City (from 1930)
* New York (from 1939)

## Collaborations
* Collaborated with Miles Davis 1945-1948 on Recordings

## Influences
* Strongly influenced by Lester Young's Jazz saxophonist"""

SEED_TOOLS = {
    "manage_nodes",
    "manage_relationships",
    "generate_documents",
    "explore_neighborhoods",
    "find_relationship_paths",
    "manage_templates",
}
# A question about the node created last that shares no word with its name or summary.
PARAPHRASE = "breaking public-key cryptography with a qubit computer"


def squeeze(doc: str) -> str:
    """A document with runs of blank lines made one (the seed's example shows them so)."""
    return re.sub(r"\n{3,}", "\n\n", doc).strip()


def fresh_db(directory: Path) -> Path:
    from kgr.store import Store

    db = directory / "kb.sqlite"
    with Store(db):
        pass
    return db


@pytest.fixture(scope="module")
def seen(tmp_path_factory):
    """Every call of one authoring server's session, by label: what a seed 002 client would see."""
    tmp = tmp_path_factory.mktemp("seed002")
    db = fresh_db(tmp)
    calls: dict[str, object] = {}

    async def drive(client):
        async def call(label, tool, args):
            calls[label] = await client.call_tool(tool, args)
            return calls[label]

        calls["tools"] = {t.name: t for t in (await client.list_tools()).tools}
        # "Adding New Information": explore first, then create nodes, then more relationships
        await call("explore_empty", "explore_neighborhoods", {"search_terms": ["Charlie Parker"]})
        made = await call(
            "create_people",
            "manage_nodes",
            {
                "operation": "create",
                "nodes": [
                    {
                        "name": "Charlie Parker",
                        "summary": "American jazz saxophonist and composer",
                        "node_type": "Person",
                        "properties": {"birth_year": 1920, "death_year": 1955},
                    },
                    {"name": "Lester Young", "summary": "Jazz saxophonist", "node_type": "Person"},
                    {"name": "Kansas City", "summary": "A city in Missouri", "node_type": "Location"},
                    {"name": "New York", "summary": "A city on the Atlantic coast", "node_type": "Location"},
                ],
            },
        )
        ids = {n: r["node_id"] for n, r in zip(["cp", "ly", "kc", "ny"], payload(made)["results"])}
        # the seed's manage_nodes example, its target the id the server gave Charlie Parker
        miles = await call(
            "create_miles",
            "manage_nodes",
            {
                "operation": "create",
                "nodes": [
                    {
                        "name": "Miles Davis",
                        "summary": "American jazz trumpeter",
                        "node_type": "Person",
                        "relationships": [
                            {
                                "target_id": str(ids["cp"]),
                                "relationship_type": "INFLUENCED_BY",
                                "direction": "forward",
                                "relevance_strength": "strong",
                            }
                        ],
                    }
                ],
            },
        )
        ids["md"] = payload(miles)["results"][0]["node_id"]
        await call(
            "create_rels",
            "manage_relationships",
            {
                "operation": "create",
                "relationships": [
                    {
                        "source_id": str(ids["cp"]),
                        "target_id": str(ids["kc"]),
                        "relationship_type": "RESIDED_AT",
                        "properties": {"start_date": "1930"},
                    },
                    {
                        "source_id": str(ids["cp"]),
                        "target_id": str(ids["ny"]),
                        "relationship_type": "RESIDED_AT",
                        "properties": {"start_date": "1939"},
                    },
                    {
                        "source_id": str(ids["cp"]),
                        "target_id": str(ids["md"]),
                        "relationship_type": "COLLABORATED_WITH",
                        "relevance_strength": "strong",
                        "properties": {"projects": ["Recordings"], "when": "1945-1948"},
                    },
                    {  # written from Lester Young's side: Charlie Parker -[INFLUENCED_BY]-> Lester Young
                        "source_id": str(ids["ly"]),
                        "target_id": str(ids["cp"]),
                        "relationship_type": "INFLUENCED_BY",
                        "direction": "reverse",
                        "relevance_strength": "strong",
                    },
                    {"source_id": str(ids["kc"]), "target_id": str(ids["ny"]), "relationship_type": "bad name"},
                ],
            },
        )
        await call("types_before", "manage_relationship_types", {"operation": "list"})
        await call(
            "types_set",
            "manage_relationship_types",
            {
                "operation": "update",
                "types": [
                    {"name": "INFLUENCED_BY", "directionality": "weak"},
                    {"name": "COLLABORATED_WITH", "directionality": "balanced"},
                ],
            },
        )
        await call(
            "types_create",
            "manage_relationship_types",
            {
                "operation": "create",
                "types": [
                    {
                        "name": "CHILD_OF",
                        "description": "being someone's child is more defining than being their parent",
                        "directionality": "strong",
                        "source_types": ["Person"],
                        "target_types": ["Person"],
                    }
                ],
            },
        )
        # templates: the seed's, one made of partials, and a cycle
        await call(
            "tmpl_create",
            "manage_templates",
            {
                "operation": "create",
                "templates": [
                    {
                        "name": "Historical Person Template",
                        "description": "Template for historical persons with dynamic data",
                        "structure": SEED_STRUCTURE,
                        "variables": SEED_VARIABLES,
                        "node_types": ["Person"],
                    },
                    {
                        "name": "person-header",
                        "description": "A reusable heading",
                        "structure": "# {{name}} ({{birth_year}}-{{death_year}})\n",
                        "node_types": [],
                    },
                    {
                        "name": "influence-list",
                        "description": "A reusable list, with its own variable",
                        "structure": "{{#influences}}- {{name}}\n{{/influences}}",
                        "variables": {"influences": SEED_VARIABLES["influences"]},
                        "node_types": [],
                    },
                    {
                        "name": "person-card",
                        "description": "Made of partials",
                        "structure": "{{> person-header}}{{summary}}\n{{#has_influences}}Influences:\n"
                        "{{> influence-list}}{{/has_influences}}",
                        "node_types": [],
                    },
                    {
                        "name": "loop",
                        "description": "Includes a template that does not exist",
                        "structure": "{{> nowhere}}",
                        "node_types": [],
                    },
                ],
            },
        )
        await call(
            "tmpl_cycle",
            "manage_templates",
            {
                "operation": "update",
                "templates": [
                    {
                        "name": "person-header",
                        "description": "now includes the card that includes it",
                        "structure": "{{> person-card}}",
                        "node_types": [],
                    }
                ],
            },
        )
        await call("tmpl_list", "manage_templates", {"operation": "list"})
        await call("doc_1", "generate_documents", {"node_identifiers": ["Charlie Parker"]})
        await call("doc_2", "generate_documents", {"node_identifiers": ["Charlie Parker"]})
        await call(
            "doc_card",
            "generate_documents",
            {"node_identifiers": ["Charlie Parker"], "template_override": "person-card"},
        )
        await call(
            "update_ly",
            "manage_nodes",
            {
                "operation": "update",
                "nodes": [{"id": str(ids["ly"]), "name": "Lester Young", "summary": "Tenor saxophonist"}],
            },
        )
        await call("doc_3", "generate_documents", {"node_identifiers": ["Charlie Parker"]})
        await call(
            "doc_forced", "generate_documents", {"node_identifiers": ["Charlie Parker"], "force_regenerate": True}
        )
        # paths
        await call(
            "paths_default",
            "find_relationship_paths",
            {"node_pairs": [{"source_node_id": str(ids["md"]), "target_node_id": str(ids["ly"])}]},
        )
        await call(
            "paths_low",
            "find_relationship_paths",
            {
                "node_pairs": [
                    {"source_node_id": str(ids["md"]), "target_node_id": str(ids["ly"])},
                    {"source_node_id": str(ids["kc"]), "target_node_id": "no such node at all"},
                ],
                "max_path_length": 4,
                "max_paths_per_pair": 5,
                "min_path_strength": 0.2,
            },
        )
        # neighbourhoods, then the vector-only search before and after a node is written
        await call(
            "explore_text",
            "explore_neighborhoods",
            {
                "search_terms": ["Charlie Parker", "Kansas City"],
                "search_strategy": "text",
                "max_results_per_term": 3,
                "neighborhood_depth": 2,
                "include_relationship_types": True,
                "include_templates": True,
            },
        )
        vec = {"search_terms": [PARAPHRASE], "search_strategy": "vector", "max_results_per_term": 3}
        await call("vector_before", "explore_neighborhoods", vec)
        shor = await call(
            "create_shor",
            "manage_nodes",
            {
                "operation": "create",
                "nodes": [
                    {
                        "name": "Shor's Algorithm",
                        "summary": "A quantum algorithm that factors integers in polynomial time, "
                        "threatening RSA encryption",
                        "node_type": "Algorithm",
                    }
                ],
            },
        )
        ids["shor"] = payload(shor)["results"][0]["node_id"]
        await call("vector_after", "explore_neighborhoods", vec)
        await call("combined_after", "explore_neighborhoods", {**vec, "search_strategy": "combined"})
        # the seed's generate_documents examples: by id, by exact name, by fuzzy name
        for label, ref in (("by_id", str(ids["shor"])), ("by_name", "Shor's Algorithm"), ("fuzzy", "shors algorithm")):
            await call(f"doc_{label}", "generate_documents", {"node_identifiers": [ref], "include_dependencies": True})
        # edits and deletions
        rid = payload(calls["create_rels"])["results"][0]["relationship_id"]
        await call(
            "rel_update",
            "manage_relationships",
            {"operation": "update", "relationships": [{"id": str(rid), "relevance_strength": "weak"}]},
        )
        await call("rel_delete", "manage_relationships", {"operation": "delete", "relationships": [{"id": str(rid)}]})
        await call(
            "node_delete", "manage_nodes", {"operation": "delete", "nodes": [{"id": str(ids["kc"]), "name": "x"}]}
        )
        await call("doc_after_delete", "generate_documents", {"node_identifiers": ["Charlie Parker"]})
        await call("tmpl_delete", "manage_templates", {"operation": "delete", "templates": [{"id": "influence-list"}]})
        return ids

    ids = session(serve_params(db, profile="authoring"), drive, errlog=tmp / "stderr.txt")
    return calls, ids, db


def test_every_seed_tool_is_served_with_the_seed_argument_names(seen):
    """Seed 002 "MCP Tools Specification": manage_nodes {operation, nodes}, manage_relationships
    {operation, relationships}, generate_documents {node_identifiers, force_regenerate,
    include_dependencies, template_override}, explore_neighborhoods {search_terms, search_strategy,
    max_results_per_term, neighborhood_depth, include_relationship_types, include_templates},
    find_relationship_paths {node_pairs, max_path_length, max_paths_per_pair, min_path_strength},
    manage_templates {operation, templates}."""
    tools = seen[0]["tools"]
    assert SEED_TOOLS <= set(tools)
    args = {name: set(tools[name].input_schema["properties"]) for name in SEED_TOOLS}
    assert args["manage_nodes"] >= {"operation", "nodes"}
    assert args["manage_relationships"] >= {"operation", "relationships"}
    assert args["generate_documents"] >= {
        "node_identifiers",
        "force_regenerate",
        "include_dependencies",
        "template_override",
    }
    assert args["explore_neighborhoods"] >= {
        "search_terms",
        "search_strategy",
        "max_results_per_term",
        "neighborhood_depth",
        "include_relationship_types",
        "include_templates",
    }
    assert args["find_relationship_paths"] >= {
        "node_pairs",
        "max_path_length",
        "max_paths_per_pair",
        "min_path_strength",
    }
    assert args["manage_templates"] >= {"operation", "templates"}


def test_manage_nodes_creates_in_a_batch_with_the_seed_response(seen):
    """Seed 002 §1 Node Management Tool: "Response: { results: Array<{ node_id, operation, status:
    "success" | "error", message?, created_relationships? }> }"; "Example: When creating a "Miles
    Davis" node with a relationship to "Charlie Parker" ... direction: "forward", // Creates: Miles
    Davis -[INFLUENCED_BY]-> Charlie Parker"."""
    calls, ids, _ = seen
    people = payload(calls["create_people"])["results"]
    assert [(r["operation"], r["status"]) for r in people] == [("create", "success")] * 4
    assert len({r["node_id"] for r in people}) == 4
    miles = payload(calls["create_miles"])["results"][0]
    assert (miles["status"], miles["created_relationships"]) == ("success", 1)
    paths = payload(calls["paths_low"])["path_results"][0]["paths"]
    first_hops = {(p["relationships"][0]["type"], p["relationships"][0]["source"]) for p in paths}
    assert ("INFLUENCED_BY", ids["md"]) in first_hops  # Miles Davis is the source: forward


def test_an_unregistered_relationship_type_is_registered_with_the_default_directionality(seen):
    """Seed 002 "Relationship Type Node": "CREATE (r:RelationshipType { name, description,
    source_types, target_types, directionality: "balanced" // Options: "balanced", "weak", "strong"
    })"; "Domain-Specific Relationships: Use specific relationship types directly (e.g., CHILD_OF,
    INFLUENCED_BY, PERFORMED_AT)"."""
    calls = seen[0]
    miles = payload(calls["create_miles"])["results"][0]
    assert miles["registered_relationship_types"] == ["INFLUENCED_BY"]
    assert "directionality balanced" in miles["message"]
    results = payload(calls["create_rels"])["results"]
    assert [r["status"] for r in results] == ["success"] * 4 + ["error"]
    assert results[0]["registered_relationship_types"] == ["RESIDED_AT"]
    assert "registered_relationship_types" not in results[1]  # registered once
    assert results[2]["registered_relationship_types"] == ["COLLABORATED_WITH"]
    assert "bad relationship_type" in results[4]["message"]
    listed = {t["name"]: t for t in payload(calls["types_before"])["relation_types"]}
    assert {n: listed[n]["directionality"] for n in ("INFLUENCED_BY", "RESIDED_AT", "COLLABORATED_WITH")} == {
        "INFLUENCED_BY": "balanced",
        "RESIDED_AT": "balanced",
        "COLLABORATED_WITH": "balanced",
    }
    assert [r["status"] for r in payload(calls["types_set"])["results"]] == ["success", "success"]
    child = payload(calls["types_create"])["results"][0]
    assert (child["name"], child["directionality"], child["source_types"]) == ("CHILD_OF", "strong", ["Person"])


def test_relationships_are_updated_and_deleted_by_id(seen):
    """Seed 002 §2 Relationship Management Tool: "operation: "create" | "update" | "delete"",
    "id?: string, // Required for update/delete"; "Response: { results: Array<{ relationship_id,
    operation, status: "success" | "error", message? }> }"."""
    calls = seen[0]
    created = payload(calls["create_rels"])["results"][0]
    updated = payload(calls["rel_update"])["results"][0]
    deleted = payload(calls["rel_delete"])["results"][0]
    assert created["relationship_id"] == updated["relationship_id"] == deleted["relationship_id"]
    assert (updated["operation"], updated["status"]) == ("update", "success")
    assert (deleted["operation"], deleted["status"]) == ("delete", "success")
    node = payload(calls["node_delete"])["results"][0]
    assert (node["operation"], node["status"]) == ("delete", "success")
    after = payload(calls["doc_after_delete"])["documents"][0]["content"]
    assert "Kansas City" not in after and "New York (from 1939)" in after


def test_the_seed_template_renders_the_seed_document(seen):
    """Seed 002 "Example Template with Cypher Variables" and "Resulting Document": "# Charlie Parker
    (1920-1955) ... ## Places Lived * Kansas City (from 1930) * New York (from 1939) ##
    Collaborations * Collaborated with Miles Davis 1945-1948 on Recordings ## Influences * Strongly
    influenced by Lester Young's Jazz saxophonist"; §6 manage_templates "node_types: string[] //
    Node types this template applies to"."""
    calls, ids, _ = seen
    made = payload(calls["tmpl_create"])["results"]
    assert [r["status"] for r in made[:4]] == ["success"] * 4
    doc = payload(calls["doc_1"])["documents"][0]
    assert doc["template_used"] == "Historical Person Template"  # chosen by the node's type
    assert squeeze(doc["content"]) == SEED_DOCUMENT
    assert set(doc) >= {
        "node_id",
        "node_name",
        "content",
        "generated_at",
        "from_cache",
        "dependencies",
        "template_used",
    }
    assert (doc["node_id"], doc["node_name"]) == (ids["cp"], "Charlie Parker")
    assert set(doc["dependencies"]) == {ids["cp"], ids["kc"], ids["ny"], ids["md"], ids["ly"]}
    listed = {t["name"]: t for t in payload(calls["tmpl_list"])["templates"]}
    assert listed["Historical Person Template"]["node_types"] == ["Person"]
    assert listed["Historical Person Template"]["structure"] == SEED_STRUCTURE


def test_partials_render_and_bad_partials_are_refused(seen):
    """Seed 002 "Template Engine Implementation": "Use Mustache for template processing with these
    features: ... Partials for reusable template components"; "Validation: Template syntax
    validation before storage"."""
    calls = seen[0]
    made = payload(calls["tmpl_create"])["results"]
    assert made[4]["status"] == "error" and "no template is named 'nowhere'" in made[4]["message"]
    cycle = payload(calls["tmpl_cycle"])["results"][0]
    assert cycle["status"] == "error"
    assert "partials form a cycle: person-header > person-card > person-header" in cycle["message"]
    card = payload(calls["doc_card"])["documents"][0]
    assert card["template_used"] == "person-card"
    assert card["content"] == (
        "# Charlie Parker (1920-1955)\nAmerican jazz saxophonist and composer\nInfluences:\n- Lester Young\n"
    )
    listed = {t["name"] for t in payload(calls["tmpl_list"])["templates"]}
    assert "loop" not in listed  # refused, never stored
    refused = payload(calls["tmpl_delete"])["results"][0]
    assert refused["status"] == "error" and "included as a partial by 'person-card'" in refused["message"]


def test_documents_are_cached_until_a_dependency_changes(seen):
    """Seed 002 "Cache Management": "Check if cached document exists and is valid ... AND NOT EXISTS {
    MATCH (c)-[:DEPENDS_ON]->(dep:Node) WHERE dep.last_modified_date > c.generated_at }"; §3
    "force_regenerate?: boolean // Skip cache and regenerate"."""
    calls = seen[0]
    d1, d2, d3, forced = (payload(calls[k])["documents"][0] for k in ("doc_1", "doc_2", "doc_3", "doc_forced"))
    assert (d1["from_cache"], d2["from_cache"]) == (False, True)
    assert d2["content"] == d1["content"] and d2["generated_at"] == d1["generated_at"]
    assert not d3["from_cache"] and "Lester Young's Tenor saxophonist" in d3["content"]  # a dependency changed
    assert not forced["from_cache"] and forced["content"] == d3["content"]


def test_generate_documents_resolves_ids_names_and_fuzzy_names(seen):
    """Seed 002 "Example Usage": "generate_documents(["shor-algorithm-123"]) - Uses node ID;
    generate_documents(["Shor's Algorithm"]) - Uses node name (exact match);
    generate_documents(["shors algorithm"]) - Uses fuzzy matching on node name"."""
    calls, ids, _ = seen
    found = [payload(calls[f"doc_{k}"])["documents"][0] for k in ("by_id", "by_name", "fuzzy")]
    assert [(d["node_id"], d["node_name"]) for d in found] == [(ids["shor"], "Shor's Algorithm")] * 3
    assert found[0]["content"] == found[2]["content"] and "# Shor's Algorithm" in found[0]["content"]


def test_paths_have_the_seed_strengths_and_shape(seen):
    """Seed 002 "Path Strength Calculation": "pathStrength *= (strengthValue * directionalWeight)";
    "const adjustedStrength = pathStrength * (1.0 / path.length)"; weights "'weak': [0.8, 0.6],
    'balanced': [0.7, 0.7]"; §5 defaults "max_path_length: number, // Default: 4
    max_paths_per_pair: number, // Default: 5 min_path_strength: number // Default: 0.3"."""
    calls, ids, _ = seen
    default = payload(calls["paths_default"])["path_results"][0]
    low = payload(calls["paths_low"])["path_results"]
    # Miles -[INFLUENCED_BY strong, weak type]-> Charlie -[INFLUENCED_BY strong]-> Lester: 0.8 * 0.8 / 2
    (p,) = default["paths"]
    assert p["strength"] == pytest.approx(0.32)
    assert p["strength_breakdown"] == pytest.approx(
        {"raw_strength": 0.64, "length_penalty": 0.5, "final_strength": 0.32}
    )
    assert [n["id"] for n in p["nodes"]] == [ids["md"], ids["cp"], ids["ly"]]
    assert [(r["type"], r["direction"], r["edge_strength"]) for r in p["relationships"]] == [
        ("INFLUENCED_BY", "forward", pytest.approx(0.8)),
        ("INFLUENCED_BY", "forward", pytest.approx(0.8)),
    ]
    assert "Miles Davis" in p["narrative"] and "Lester Young" in p["narrative"]
    # below the default minimum: Miles <-[COLLABORATED_WITH strong, balanced]- Charlie -> Lester, 0.7 * 0.8 / 2
    strengths = sorted(q["strength"] for q in low[0]["paths"])
    assert strengths == pytest.approx([0.28, 0.32])
    collab = next(q for q in low[0]["paths"] if q["relationships"][0]["type"] == "COLLABORATED_WITH")
    assert collab["relationships"][0]["direction"] == "backward"
    s = low[0]["summary"]
    assert (s["total_paths_found"], s["paths_returned"]) == (2, 2)
    assert s["strongest_path_strength"] == pytest.approx(0.32)
    assert s["average_path_strength"] == pytest.approx(0.30)
    assert s["relationship_types_used"] == ["COLLABORATED_WITH", "INFLUENCED_BY"]
    assert low[1]["paths"] == [] and low[1]["summary"]["paths_returned"] == 0  # an unknown node, in place


def test_explore_neighborhoods_has_the_seed_shape(seen):
    """Seed 002 §4 Neighborhood Explorer Tool: "neighborhoods: { [search_term]: { primary_nodes: [{id,
    name, type, summary, similarity_score}], relationships: [{type, source, target, target_name}],
    nearby_nodes: [{id, name, distance, path}], common_relationship_types, templates_in_use } },
    recommendations: { suggested_parents, suggested_relationship_types, missing_intermediate_nodes }"."""
    calls, ids, _ = seen
    empty = payload(calls["explore_empty"])
    assert empty["neighborhoods"]["Charlie Parker"]["primary_nodes"] == []
    assert empty["recommendations"]["missing_intermediate_nodes"] == ["Charlie Parker"]
    out = payload(calls["explore_text"])
    cp = out["neighborhoods"]["Charlie Parker"]
    top = cp["primary_nodes"][0]
    assert (top["id"], top["name"], top["type"], top["summary"]) == (
        ids["cp"],
        "Charlie Parker",
        "Person",
        "American jazz saxophonist and composer",
    )
    assert top["similarity_score"] > 0
    assert {(r["type"], r["source"], r["target"], r["target_name"]) for r in cp["relationships"]} >= {
        ("RESIDED_AT", ids["cp"], ids["kc"], "Kansas City"),
        ("INFLUENCED_BY", ids["cp"], ids["ly"], "Lester Young"),
    }
    near = {n["name"]: n for n in cp["nearby_nodes"]}
    assert near["Lester Young"]["distance"] == 1 and near["Lester Young"]["path"] == "Charlie Parker -> Lester Young"
    assert "RESIDED_AT" in cp["common_relationship_types"]
    assert cp["templates_in_use"] == ["Historical Person Template"]
    assert set(out["recommendations"]) >= {
        "suggested_parents",
        "suggested_relationship_types",
        "missing_intermediate_nodes",
    }


def test_a_node_just_written_is_found_by_a_vector_only_search(seen):
    """Seed 002 "Vector Search Implementation": "Embedding Generation: Model:
    sentence-transformers/all-MiniLM-L6-v2, Dimensions: 384, Generated for: node name + summary";
    §4 "search_strategy: "vector" | "text" | "combined""."""
    calls, ids, db = seen
    # the nodes written before have vectors already: the same search answers, without the new node
    before = payload(calls["vector_before"])["neighborhoods"][PARAPHRASE]["primary_nodes"]
    assert before and "Shor's Algorithm" not in [n["name"] for n in before]
    made = payload(calls["create_shor"])
    assert made["embedding"]["status"] == "embedded" and ids["shor"] in made["embedding"]["embedded"]
    hits = payload(calls["vector_after"])["neighborhoods"][PARAPHRASE]["primary_nodes"]
    assert hits and hits[0]["id"] == ids["shor"], hits
    assert hits[0]["similarity_score"] > 0.3
    combined = payload(calls["combined_after"])["neighborhoods"][PARAPHRASE]["primary_nodes"]
    assert combined[0]["id"] == ids["shor"]
    from kgr.store import Store, vectors

    with Store(db, readonly=True) as store:
        assert vectors.stored_spec(store).model == "all-MiniLM-L6-v2" and vectors.stored_spec(store).dim == 384
        assert vectors.pending_entities(store) == []  # every node written was embedded, updates included


@pytest.fixture(scope="module")
def strict_seen(tmp_path_factory):
    """A server with authoring.strict_relation_types on and an embedding model that cannot load."""
    tmp = tmp_path_factory.mktemp("seed002strict")
    db = fresh_db(tmp)
    env = {"KGR_AUTHORING_STRICT_RELATION_TYPES": "true", "KGR_EMBED_MODEL": str(tmp / "no-such-model")}
    calls: dict[str, object] = {}

    async def drive(client):
        calls["nodes"] = await client.call_tool(
            "manage_nodes",
            {
                "operation": "create",
                "nodes": [
                    {"name": "Leopold Mozart", "summary": "Composer and teacher", "node_type": "Person"},
                    {
                        "name": "Wolfgang Amadeus Mozart",
                        "summary": "Composer",
                        "node_type": "Person",
                        "relationships": [{"target_id": "Leopold Mozart", "relationship_type": "CHILD_OF"}],
                    },
                ],
            },
        )
        calls["registered"] = await client.call_tool(
            "manage_relationship_types", {"operation": "create", "types": [{"name": "CHILD_OF"}]}
        )
        calls["retry"] = await client.call_tool(
            "manage_nodes",
            {
                "operation": "create",
                "nodes": [
                    {
                        "name": "Wolfgang Amadeus Mozart",
                        "summary": "Composer",
                        "node_type": "Person",
                        "relationships": [{"target_id": "Leopold Mozart", "relationship_type": "CHILD_OF"}],
                    }
                ],
            },
        )
        calls["parent_of"] = await client.call_tool(
            "manage_relationships",
            {
                "operation": "create",
                "relationships": [
                    {
                        "source_id": "Leopold Mozart",
                        "target_id": "Wolfgang Amadeus Mozart",
                        "relationship_type": "PARENT_OF",
                    },
                    {  # the seed's way: CHILD_OF written from the parent's side
                        "source_id": "Leopold Mozart",
                        "target_id": "Wolfgang Amadeus Mozart",
                        "relationship_type": "CHILD_OF",
                        "direction": "reverse",
                    },
                ],
            },
        )
        calls["text"] = await client.call_tool(
            "explore_neighborhoods", {"search_terms": ["Leopold Mozart"], "search_strategy": "text"}
        )
        calls["vector"] = await client.call_tool(
            "explore_neighborhoods", {"search_terms": ["Leopold Mozart"], "search_strategy": "vector"}
        )

    session(serve_params(db, profile="authoring", env=env), drive, errlog=tmp / "stderr.txt")
    return calls, db


def test_strict_relation_types_keep_the_refusal_and_name_a_real_tool(strict_seen):
    """Seed 002 "Migration from Bidirectional Systems": "PARENT_OF → Use CHILD_OF with direction:
    "reverse""; "Validation: Input validation for all tool parameters"."""
    calls, _ = strict_seen
    results = payload(calls["nodes"])["results"]
    assert [r["status"] for r in results] == ["success", "error"]
    assert "unknown relationship type 'CHILD_OF'" in results[1]["message"]
    assert "manage_relationship_types" in results[1]["message"] and "kgr relation-type" not in results[1]["message"]
    assert payload(calls["registered"])["results"][0]["status"] == "success"
    retry = payload(calls["retry"])["results"][0]
    assert (retry["status"], retry["created_relationships"]) == ("success", 1)
    parent_of, reverse = payload(calls["parent_of"])["results"]
    assert parent_of["status"] == "error" and "unknown relationship type 'PARENT_OF'" in parent_of["message"]
    # CHILD_OF reverse from the parent is the child's CHILD_OF edge, which the node's create already made
    assert reverse["status"] == "error" and "already exists" in reverse["message"]


def test_a_write_succeeds_and_stays_pending_when_the_embedder_is_unavailable(strict_seen):
    """Seed 002 "Graceful Degradation": "Continue operation if vector embedding generation fails";
    "Fallback to text search if vector search fails"."""
    calls, db = strict_seen
    made = payload(calls["nodes"])
    assert made["results"][0]["status"] == "success"
    emb = made["embedding"]
    assert emb["status"] == "pending" and emb["pending"] == [made["results"][0]["node_id"]]
    assert "kgr embed --pending" in emb["message"]
    hits = payload(calls["text"])["neighborhoods"]["Leopold Mozart"]["primary_nodes"]
    assert hits[0]["name"] == "Leopold Mozart"
    from kgr.store import Store, vectors

    with Store(db, readonly=True) as store:
        pending = [eid for eid, _ in vectors.pending_entities(store)]
        assert not vectors.has_tables(store)  # no vector was written at all
    later = payload(calls["retry"])["results"][0]["node_id"]
    assert pending == [made["results"][0]["node_id"], later]  # both nodes written, both pending
    vector = calls["vector"]
    assert vector.is_error and "use search_strategy text" in text(vector)
