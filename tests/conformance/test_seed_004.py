"""Seed 004 (Dossier, tenant-scoped GraphRAG over a knowledge base): a client written to the seed
drives `kgr serve --profile kb` as a real subprocess over stdio, with the seed's argument names.

Two server sessions: one on the examples knowledge base with a tenant clientId (every tool, the
dangling references it flags), one on a private copy with knownExternalIds naming one of them,
a document replaced by a symlink that leaves the root and another document deleted.
"""

from __future__ import annotations

import json
import shutil

import pytest
from seed_client import payload, serve_params, session, text

SEED_TOOLS = {"search_concepts", "get_concept", "get_related", "list_concepts", "kb_health"}
MARKER = "OUTSIDE-THE-ROOT-7f3a9c"  # text only a file outside the knowledge root holds


@pytest.fixture(scope="module")
def first(built_kb, tmp_path_factory):
    """One `kgr serve --profile kb` on the examples, tenant clientId set: every seed tool."""
    db, root = built_kb
    errlog = tmp_path_factory.mktemp("seed004") / "stderr.txt"
    env = {"KGR_TENANT_CLIENTID": "tenant-a"}

    async def run(client):
        out = {"tools": {t.name: t for t in (await client.list_tools()).tools}}
        out["search"] = payload(await client.call_tool("search_concepts", {"query": "fare engine"}))
        top = out["search"]["concepts"][0]
        out["concept"] = payload(await client.call_tool("get_concept", {"id": top["id"]}))
        out["concept_by_name"] = payload(await client.call_tool("get_concept", {"id": top["name"]}))
        out["short"] = payload(await client.call_tool("get_concept", {"id": top["id"], "max_chars": 40}))
        out["no_id"] = await client.call_tool("get_concept", {})
        out["related"] = payload(await client.call_tool("get_related", {"id": top["id"], "depth": 2}))
        out["related_hops"] = payload(await client.call_tool("get_related", {"concept": top["name"], "hops": 2}))
        out["list"] = payload(await client.call_tool("list_concepts", {}))
        kinds = sorted(out["list"]["types"])
        out["list_type"] = payload(await client.call_tool("list_concepts", {"type": kinds[0], "limit": 500}))
        out["health"] = payload(await client.call_tool("kb_health", {}))
        out["status"] = payload(await client.call_tool("status", {}))
        return out

    out = session(serve_params(db, "--profile", "kb", profile="kb", env=env), run, errlog=errlog)
    return {**out, "root": root}


def test_the_five_retrieval_tools(first):
    """Seed 004, Decision 4: "Five retrieval tools. search_concepts— lexical (vector-ready) search
    → seed atoms.get_concept— fetch one atom by id (confined read).get_related— the GraphRAG
    differentiator [...] list_concepts— enumerate/filter the tenant KB.kb_health— surfaces [...]
    integrity (DEC-0007 violations, dangling edges) to agents/operators." """
    assert SEED_TOOLS <= set(first["tools"])
    assert set(first["tools"]) - SEED_TOOLS == {"status"}
    for name in ("get_concept", "get_related"):  # the seed's argument names are in the schema
        assert "id" in first["tools"][name].input_schema["properties"]
    assert "depth" in first["tools"]["get_related"].input_schema["properties"]


def test_search_concepts_seeds_atoms(first):
    """Seed 004, Decision 4: "search_concepts— lexical (vector-ready) search → seed atoms." """
    hits = first["search"]["concepts"]
    assert hits and all({"id", "name", "type"} <= set(h) for h in hits)
    assert "fare engine" in hits[0]["name"].lower()
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))


def test_get_concept_is_the_confined_read_of_the_atom(first):
    """Seed 004, Decision 4: "get_concept— fetch one atom by id (confined read)." The atom is the
    concept's own document: its body is that document's text, read from the knowledge root."""
    c = first["concept"]
    assert c["id"] == first["search"]["concepts"][0]["id"]
    assert c["path"] and c["body_from"] == "its title names the concept"
    assert c["body"] == (first["root"] / c["path"]).read_text(encoding="utf-8")
    assert c["truncated"] is False and c["external"] is False and c["changed"] is False
    assert c["relations"] and c["sources"]  # the entity's graph around the body
    assert first["concept_by_name"] == c  # by id or by name: the same atom
    short = first["short"]
    assert short["body"] == c["body"][:40] and short["truncated"] is True
    assert first["no_id"].is_error and "Argument id is required" in text(first["no_id"])


def test_get_related_returns_the_subgraph_and_the_edges_traversed(first):
    """Seed 004, Decision 1: "get_related seeds from a concept (or a search result), then
    BFS-expands the typed edges [...] to a bounded depth, returning the reached subgraph and the
    exact edges traversed." """
    rel = first["related"]
    assert rel["root"]["id"] == first["concept"]["id"] and rel["depth"] == rel["hops"] == 2
    ids = {n["id"] for n in rel["nodes"]}
    assert rel["edges"] and len(rel["edges"]) == len(rel["nodes"]) - 1  # one edge per reached concept
    assert max(n["distance"] for n in rel["nodes"]) <= 2
    for e in rel["edges"]:  # every edge is a real, named relationship between reached concepts
        assert e["src"] in ids and e["dst"] in ids and e["rel"]
    parent = {n["id"]: n["parent"] for n in rel["nodes"]}
    for e in rel["edges"]:  # each edge joins a concept to the one it was reached from
        assert parent[e["src"]] == e["dst"] or parent[e["dst"]] == e["src"]
    assert first["related_hops"]["nodes"] == rel["nodes"]  # kgr's names concept and hops: the same call


def test_list_concepts_enumerates_and_filters_the_tenant_kb(first):
    """Seed 004, Decision 4: "list_concepts— enumerate/filter the tenant KB." """
    everything, one_type = first["list"], first["list_type"]
    assert everything["total"] == sum(everything["types"].values()) and everything["concepts"]
    kind = sorted(everything["types"])[0]
    assert one_type["total"] == everything["types"][kind] == len(one_type["concepts"])
    assert all(c["type"] == kind for c in one_type["concepts"])


def test_kb_health_surfaces_integrity_and_dangling_edges(first):
    """Seed 004, Decision 4: "kb_health— surfaces@dossier/okfvalidateGraphintegrity (DEC-0007
    violations, dangling edges) to agents/operators." """
    h = first["health"]
    assert h["ok"] is True and h["violations"] == []
    dangling = h["dangling_references"]
    assert dangling["count"] == h["warnings"]["dangling_references"] and dangling["count"] > 0
    assert dangling["suppressed"] == 0  # no knownExternalIds on this server
    for row in dangling["sample"]:
        assert row["missing"] and set(row["missing"]) <= {row["src"], row["dst"]}


def test_one_server_one_tenant_reports_its_client_id(first):
    """Seed 004, Decision 3: "A single explicit TenantConfig { clientId, okfRepoPath,
    knownExternalIds? } is threaded, never ambient." """
    assert first["health"]["clientId"] == "tenant-a"
    assert first["status"]["clientId"] == "tenant-a"


# -- the isolation invariant, on a private copy ------------------------------------------------------


@pytest.fixture(scope="module")
def second(first, built_kb, tmp_path_factory):
    """A copy of the knowledge base where: the first session's first dangling concept is in
    knownExternalIds (with a file of its name outside the root, also listed), the atom of the
    first search result is a symlink to a file outside the root, and another atom is gone."""
    base = tmp_path_factory.mktemp("seed004-copy")
    dest = base / "examples"
    shutil.copytree(built_kb[0].parent, dest, ignore=shutil.ignore_patterns("*.writer.lock"))
    db, root = dest / "kb.sqlite", dest / "kb"
    external = first["health"]["dangling_references"]["sample"][0]["missing"][0]
    outside = base / f"{external}.md"
    outside.write_text(f"# {external}\n\n{MARKER}\n")
    atom = root / first["concept"]["path"]
    atom.unlink()
    secret = base / "elsewhere.md"
    secret.write_text(f"# {first['concept']['name']}\n\n{MARKER}\n")
    atom.symlink_to(secret)
    # another concept whose own document is a file: deleted
    gone_path = next(
        p.relative_to(root).as_posix()
        for p in sorted(root.rglob("*.md"))
        if p.resolve() != secret.resolve() and not p.is_symlink()
    )
    (root / gone_path).unlink()
    env = {"KGR_TENANT_CLIENTID": "tenant-b", "KGR_TENANT_KNOWNEXTERNALIDS": f"{external},{outside}"}

    async def run(client):
        out = {"linked": payload(await client.call_tool("get_concept", {"id": first["concept"]["id"]}))}
        out["external"] = payload(await client.call_tool("get_concept", {"id": external}))
        out["health"] = payload(await client.call_tool("kb_health", {}))
        hits = payload(await client.call_tool("list_concepts", {"limit": 500}))["concepts"]
        out["gone"] = []
        for c in hits:
            got = payload(await client.call_tool("get_concept", {"id": c["id"]}))
            if got["path"] == gone_path and got["body_from"] != "it mentions the concept most":
                out["gone"].append(got)
                break
        return out

    errlog = base / "stderr.txt"
    out = session(serve_params(db, "--profile", "kb", profile="kb", env=env), run, errlog=errlog)
    return {**out, "external_name": external, "gone_path": gone_path, "linked_path": first["concept"]["path"]}


def test_a_symlink_out_of_the_root_is_never_read(second):
    """Seed 004, Decision 3: "lstat+realpathdetects symlinks and re-confines their target, so a
    link can't point out of the repo." and "nothing outsideokfRepoPathis ever served." """
    linked = second["linked"]
    assert linked["path"] == second["linked_path"]  # the same atom, now a link out of the root
    assert linked["body"] is None and "cannot be read under the knowledge root" in linked["body_note"]
    assert MARKER not in json.dumps(linked)


def test_a_missing_atom_is_said_not_failed(second):
    """Seed 004, Decision 3: "A two-layer file gate makes the silo real at the agent boundary": a
    document gone from the root (or a link out of it) is reported in the answer, not read and not
    an error; kb_health counts both among the files gone."""
    assert second["gone"], f"no concept has {second['gone_path']} as its own document"
    got = second["gone"][0]
    assert got["path"] == second["gone_path"] and got["body"] is None
    assert "cannot be read under the knowledge root" in got["body_note"]
    health = second["health"]
    assert health["ok"] is False and {"kind": "files_gone", "count": 2} in health["violations"]
    assert sorted(health["problems"]["files_gone"]["sample"]) == sorted([second["gone_path"], second["linked_path"]])


def test_known_external_ids_only_suppress_dangling_flags(first, second):
    """Seed 004, Decision 3: "knownExternalIdsonly suppresses dangling-edge flags for atoms known
    to live outside this repo — it is never a read backdoor; nothing outsideokfRepoPathis ever
    served." """
    name = second["external_name"]
    before, after = first["health"]["dangling_references"], second["health"]["dangling_references"]
    flagged = [r for r in before["sample"] if name in r["missing"]]
    assert flagged and after["suppressed"] >= len(flagged)
    assert after["count"] == before["count"] - after["suppressed"]
    assert not [r for r in after["sample"] if name in r["missing"]]
    assert {r["id"] for r in flagged} <= {r["id"] for r in after["suppressed_sample"]}
    assert second["health"]["clientId"] == "tenant-b"
    ext = second["external"]
    assert ext["external"] is True and ext["body"] is None and ext["path"] is None
    assert "knownExternalIds" in ext["body_note"] and MARKER not in json.dumps(ext)
