"""Seed 000 (the Knowledge GraphRAG MCP server, ../shared/seeds/000_*.txt): a client written to its §11
"MCP Tooling (API)" works unchanged against `kgr serve --profile graphrag`.

Every tool the seed lists (§2's MCP server box and §11: ingest_docs, extract_and_link, entity_lookup,
hybrid_query, explain_entity, status; §15's optional review_links) is driven through a real `kgr serve`
subprocess over stdio with the seed's own argument names and example calls, and its answer is checked for
the seed's keys and behaviour. Two server sessions: one read-only on the examples knowledge base, one
writing into a private copy of it (tags, skip_if_seen, errors, absolute paths). Then the operations side
(§11.6, §15, §16, §18): a server started where no database exists yet, status and its metrics, the path
allowlist and the project id.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from seed_client import payload, serve_params, session, text

# §11.4's example call, word for word
SEED_QUERY = {
    "q": "data retention policy for S3 lifecycle",
    "k": 40,
    "hops": 2,
    "rels": ["defines", "depends_on", "uses", "cites"],
}
REFUSED = "not found: no such file or directory under the knowledge root"


def _config(db: Path) -> str:
    return str(db.parent / "config.yaml")


# -- the read side: one server on the examples knowledge base -------------------------------------


@pytest.fixture(scope="module")
def read_side(built_kb, tmp_path_factory):
    """One `kgr serve --profile graphrag` session: every read tool called with the seed's arguments."""
    db, root = built_kb
    errlog = tmp_path_factory.mktemp("seed000-read") / "server-stderr.txt"

    async def run(client):
        out: dict = {"tools": [t.name for t in (await client.list_tools()).tools]}
        out["seed_query"] = await client.call_tool("hybrid_query", SEED_QUERY)
        ask = {"q": "Who owns the fare engine and what does it depend on?", "k": 5, "hops": 2}
        out["q"] = await client.call_tool("hybrid_query", ask)
        out["query_alias"] = await client.call_tool("hybrid_query", {**ask, "query": ask.pop("q")})
        out["both_same"] = await client.call_tool("hybrid_query", {"q": "fare engine", "query": "fare engine", "k": 3})
        out["both_differ"] = await client.call_tool("hybrid_query", {"q": "fare engine", "query": "night shift"})
        out["neither"] = await client.call_tool("hybrid_query", {"k": 3})
        out["lookup"] = await client.call_tool("entity_lookup", {"q": "Fare Engine"})
        found = payload(out["lookup"])["entities"]
        out["lookup_typed"] = await client.call_tool("entity_lookup", {"q": "Fare Engine", "type": found[0]["type"]})
        out["lookup_other_type"] = await client.call_tool("entity_lookup", {"q": "Fare Engine", "type": "Regulation"})
        eid = found[0]["id"]
        out["explain"] = await client.call_tool("explain_entity", {"entity_id": eid, "hops": 2})
        out["explain_alias"] = await client.call_tool("explain_entity", {"entity": str(eid), "hops": 2})
        out["explain_none"] = await client.call_tool("explain_entity", {"hops": 2})
        out["status"] = await client.call_tool("status", {})
        out["review"] = await client.call_tool("review_links", {})
        out["entity"] = found[0]
        return out

    out = session(serve_params(db, "--config", _config(db), profile="graphrag"), run, errlog)
    out["root"] = root
    return out


def test_the_graphrag_profile_lists_every_seed_tool(read_side):
    """Seed 000 §2: "subgraph MCP Server: T1[ingest_docs] T2[extract_and_link] T3[hybrid_query]
    T4[entity_lookup] T5[explain_entity] T6[status]"; §15: "Optional `review_links()` tool to surface
    low-confidence links/edges"."""
    want = {"ingest_docs", "extract_and_link", "hybrid_query", "entity_lookup", "explain_entity", "status"}
    assert want | {"review_links"} <= set(read_side["tools"])


def test_hybrid_query_takes_the_seed_example_and_answers_its_shape(read_side):
    """Seed 000 §11.4: `{"q": "data retention policy for S3 lifecycle", "k": 40, "hops": 2, "rels":
    ["defines", "depends_on", "uses", "cites"]}` returns `{"chunks": [{"id": 101, "doc_id": 9, "snippet":
    "...", "path": "/knowledge/policies/..."}], "entities": [{"id": 33, "name": "S3 Lifecycle", "type":
    "API"}], "edges": [{"src": 33, "dst": 12, "rel": "depends_on"}], "explanations": ["Selected by semantic
    match + 1-hop depends_on"]}`."""
    out = payload(read_side["seed_query"])
    assert list(out)[:4] == ["chunks", "entities", "edges", "explanations"]
    chunks = out["chunks"]
    assert chunks, "the examples hold a data-handling policy: a retention question finds passages"
    assert len(chunks) <= 40
    for c in chunks:
        assert isinstance(c["id"], int) and isinstance(c["doc_id"], int)
        assert c["snippet"] and isinstance(c["path"], str) and not c["path"].startswith("/")
    # the policy document answers a retention question
    assert any(c["path"] == "policies/data-handling-policy.md" for c in chunks[:3]), [c["path"] for c in chunks]
    # one explanation per chunk, in the same order: why it was selected
    assert len(out["explanations"]) == len(chunks)
    assert all(isinstance(e, str) and e for e in out["explanations"])
    assert out["explanations"] == [c["why"] for c in chunks]
    for e in out["entities"]:
        assert {"id", "name", "type"} <= set(e)
    for e in out["edges"]:
        assert {"src", "dst", "rel"} <= set(e)
        assert e["rel"] in SEED_QUERY["rels"], "only the relation types asked for are followed"


def test_hybrid_query_graph_answers_carry_entities_edges_and_why(read_side):
    """Seed 000 §11.4: "edges": [{"src": 33, "dst": 12, "rel": "depends_on"}], "explanations": ["Selected by
    semantic match + 1-hop depends_on"]; §14: "Return ranked context with provenance (doc path, section,
    snippet) and confidence"."""
    out = payload(read_side["q"])
    assert out["chunks"] and out["entities"] and out["edges"], out
    ids = {e["id"] for e in out["entities"]}
    # every edge traversed joins entities the answer names
    assert all(e["src"] in ids or e["dst"] in ids for e in out["edges"])
    assert any("hop" in x or "match" in x for x in out["explanations"])
    assert all({"score", "section", "path"} <= set(c) for c in out["chunks"])


def test_hybrid_query_query_is_an_alias_of_q(read_side):
    """Seed 000 §11.4: the question is `"q"`; kgr's earlier name `query` is kept as an alias: the same
    question under either name gets the same answer, both at once only when they agree, neither is refused."""
    by_q = payload(read_side["q"])
    by_query = payload(read_side["query_alias"])
    assert [c["id"] for c in by_q["chunks"]] == [c["id"] for c in by_query["chunks"]]
    assert payload(read_side["both_same"])["chunks"]
    differ = read_side["both_differ"]
    assert differ.is_error and "Argument query" in text(differ) and "alias of q" in text(differ)
    neither = read_side["neither"]
    assert neither.is_error and text(neither) == "Argument q is required."


def test_entity_lookup_with_the_seed_arguments(read_side):
    """Seed 000 §11.3: `{ "q": "ISO 27001", "type": "Regulation" }` returns `{ "entities": [{"id": 7, "name":
    "ISO 27001", "type":"Regulation", "aliases": ["ISO27001"], "score": 0.93}] }`."""
    found = payload(read_side["lookup"])["entities"]
    assert found and found[0]["name"].lower() == "fare engine"
    for e in found:
        assert {"id", "name", "type", "aliases", "score"} <= set(e)
        assert isinstance(e["aliases"], list) and 0.0 <= e["score"] <= 1.0
    typed = payload(read_side["lookup_typed"])["entities"]
    assert typed and all(e["type"] == found[0]["type"] for e in typed)
    # a type no entity has filters everything out (the examples hold no regulation)
    assert payload(read_side["lookup_other_type"])["entities"] == []


def test_explain_entity_takes_entity_id(read_side):
    """Seed 000 §11.5: `{ "entity_id": 33, "hops": 2 }` returns "definition, aliases, top relations, key
    sources with confidence"."""
    out = payload(read_side["explain"])
    ent = read_side["entity"]
    assert out["id"] == ent["id"] and out["name"] == ent["name"]
    assert {"definition", "aliases", "relations", "sources"} <= set(out)
    assert out["relations"], "the fare engine has typed relations in the examples"
    assert all("confidence" in r for r in out["relations"])
    assert out["sources"] and all("path" in s for s in out["sources"])
    alias = payload(read_side["explain_alias"])
    assert alias["id"] == out["id"] and alias["relations"] == out["relations"]
    none = read_side["explain_none"]
    assert none.is_error and text(none) == "Argument entity_id is required."


def test_status_with_no_arguments(read_side):
    """Seed 000 §11.6: `{}` returns "queue depth, last file, counts per table, last error"; §15: "`status()`
    tool returns: queue depth, last processed file, table counts, last error"."""
    out = payload(read_side["status"])
    counts = out["counts"]
    assert counts["docs"] == 17 and counts["chunks"] > 17 and counts["entities"] > 0 and counts["relations"] > 0
    assert (read_side["root"] / out["last_file"]).is_file(), "the last file, relative to the knowledge root"
    assert "last_error" in out


def test_review_links_with_no_arguments(read_side):
    """Seed 000 §15: "Optional `review_links()` tool to surface low-confidence links/edges"."""
    out = payload(read_side["review"])
    assert {"links", "edges"} <= set(out)
    assert out["links"] or out["edges"]
    scores = [x["link_score"] for x in out["links"]]
    assert scores == sorted(scores), "lowest confidence first"


# -- the write side: one server on a private copy ---------------------------------------------------


@pytest.fixture(scope="module")
def write_side(built_kb, tmp_path_factory):
    """One `kgr serve --profile graphrag` session on a private copy: ingest_docs with the seed's
    arguments (tags, skip_if_seen, absolute paths, a broken PDF) and extract_and_link."""
    src = built_kb[0].parent
    work = tmp_path_factory.mktemp("seed000-write") / "examples"
    shutil.copytree(src, work, ignore=shutil.ignore_patterns("*.writer.lock"))
    db, root = work / "kb.sqlite", (work / "kb").resolve()
    outside = work / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\ncanary-7f3e lives outside the knowledge root.\n")
    (work / "kb-evil").mkdir()
    (work / "kb-evil" / "x.md").write_text("# Sibling\n\nA sibling folder that shares the root's prefix.\n")
    os.symlink(outside, root / "escape")
    errlog = work.parent / "server-stderr.txt"
    md_count = len(list(root.rglob("*.md")))

    async def run(client):
        out: dict = {}
        # §11.1's example call, with the knowledge root where the seed has /knowledge
        out["seed_ingest"] = await client.call_tool(
            "ingest_docs", {"paths": [f"{root}/**/*.md"], "tags": ["docs", "kb"], "skip_if_seen": True}
        )
        note = root / "notes" / "tagged.md"
        note.parent.mkdir()
        note.write_text(
            "# Ferry timetable change\n\nThe Tidewater Ferry timetable changes every spring. The change is "
            "approved by the Harbour Board and published on the rider website.\n"
        )
        out["new_tagged"] = await client.call_tool("ingest_docs", {"paths": ["notes/tagged.md"], "tags": ["ops-only"]})
        out["seen_again"] = await client.call_tool("ingest_docs", {"paths": ["notes/tagged.md"], "skip_if_seen": True})
        out["forced"] = await client.call_tool("ingest_docs", {"paths": ["notes/tagged.md"], "skip_if_seen": False})
        question = {"q": "ferry timetable change approval", "k": 10}
        out["untagged_q"] = await client.call_tool("hybrid_query", question)
        out["tag_ops"] = await client.call_tool("hybrid_query", {**question, "tags": ["ops-only"]})
        out["tag_docs"] = await client.call_tool("hybrid_query", {**question, "tags": ["DOCS"]})
        out["tag_both"] = await client.call_tool("hybrid_query", {**question, "tags": ["docs", "ops-only"]})
        out["tag_none"] = await client.call_tool("hybrid_query", {**question, "tags": ["no-such-tag"]})
        # a broken PDF: listed in errors with its path and the reason, this time and next time
        bad = root / "broken" / "bad.pdf"
        bad.parent.mkdir()
        bad.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\nthis is not a pdf body\n%%EOF\n")
        out["bad_pdf"] = await client.call_tool("ingest_docs", {"paths": ["broken/bad.pdf", "notes"]})
        out["bad_pdf_again"] = await client.call_tool("ingest_docs", {"paths": ["broken/*.pdf"]})
        # absolute paths: inside the root accepted, outside refused (sibling prefix, .., symlink, the seed's own)
        out["abs_inside"] = await client.call_tool("ingest_docs", {"paths": [str(root / "handbook")]})
        refused = {}
        for name, p in {
            "outside": str(outside / "secret.md"),
            "sibling": str(work / "kb-evil" / "x.md"),
            "dotdot": f"{root}/handbook/../../outside/secret.md",
            "relative_dotdot": "../outside/secret.md",
            "symlink": str(root / "escape" / "secret.md"),
            "seed_literal": "/knowledge/**/*.md",
        }.items():
            refused[name] = await client.call_tool("ingest_docs", {"paths": [p]})
        out["refused"] = refused
        out["secret_q"] = await client.call_tool("hybrid_query", {"q": "canary-7f3e", "mode": "bm25"})
        # extract_and_link, §11.2's arguments: the documents by id
        doc_id = payload(out["tag_ops"])["chunks"][0]["doc_id"]
        out["extract"] = await client.call_tool("extract_and_link", {"doc_ids": [doc_id]})
        out["extract_pending"] = await client.call_tool("extract_and_link", {})
        out["status"] = await client.call_tool("status", {})
        return out

    out = session(serve_params(db, "--config", _config(db), profile="graphrag"), run, errlog)
    out["md_count"] = md_count
    out["root"] = root
    return out


def test_ingest_docs_takes_the_seed_example(write_side):
    """Seed 000 §11.1: `{"paths": ["/knowledge/**/*.md"], "tags": ["docs", "kb"], "skip_if_seen": true}`
    returns `{ "ingested": 123, "skipped": 45, "errors": [] }` (an absolute glob inside the knowledge root)."""
    out = payload(write_side["seed_ingest"])
    assert list(out)[:3] == ["ingested", "skipped", "errors"]
    # every Markdown file was ingested when the knowledge base was built: all seen, all skipped
    assert out["ingested"] == 0 and out["skipped"] == write_side["md_count"] and out["errors"] == []
    assert out["tags"] == ["docs", "kb"]


def test_ingest_docs_skip_if_seen(write_side):
    """Seed 000 §11.1: `"skip_if_seen": true` skips a document already ingested and unchanged; false
    ingests it again; §3: "create/modify → enqueue reindex(path)"."""
    new = payload(write_side["new_tagged"])
    assert new["ingested"] == 1 and new["skipped"] == 0 and new["errors"] == []
    seen = payload(write_side["seen_again"])
    assert seen["ingested"] == 0 and seen["skipped"] == 1
    forced = payload(write_side["forced"])
    assert forced["ingested"] == 1 and forced["skipped"] == 0
    assert forced["extracted"] == 1, "skip_if_seen false runs extraction again too"


def test_tags_are_stored_and_filter_hybrid_query(write_side):
    """Seed 000 §11.1: ingest_docs `"tags": ["docs", "kb"]`; §4: document metadata `tags`; hybrid_query's
    `tags` keeps only passages of documents carrying all the given tags."""
    untagged = payload(write_side["untagged_q"])
    assert untagged["chunks"][0]["path"] == "notes/tagged.md"
    assert len({c["path"] for c in untagged["chunks"]}) > 1, "without tags, other documents answer too"
    ops = payload(write_side["tag_ops"])
    assert ops["chunks"] and {c["path"] for c in ops["chunks"]} == {"notes/tagged.md"}
    assert len(ops["explanations"]) == len(ops["chunks"])
    docs = payload(write_side["tag_docs"])  # compared without case
    paths = {c["path"] for c in docs["chunks"]}
    assert paths and all(p.endswith(".md") for p in paths) and "notes/tagged.md" not in paths
    # all of the tags: no document carries both
    assert payload(write_side["tag_both"])["chunks"] == []
    assert payload(write_side["tag_none"])["chunks"] == []


def test_ingest_docs_lists_every_failure_with_path_and_reason(write_side):
    """Seed 000 §11.1: ingest_docs returns `"errors": []`, every failure in it; §4: `.pdf` is a document
    type, PDF→text."""
    out = payload(write_side["bad_pdf"])
    assert out["failed"] == 1
    (err,) = out["errors"]
    assert err["path"] == "broken/bad.pdf"
    assert isinstance(err["reason"], str) and err["reason"].strip()
    assert str(write_side["root"]) not in err["reason"], "no host path in the reason"
    # unchanged since, the file is not parsed again, and its failure is still listed
    again = payload(write_side["bad_pdf_again"])
    assert again["skipped"] == 1 and again["ingested"] == 0
    assert [(e["path"], e.get("previously")) for e in again["errors"]] == [("broken/bad.pdf", True)]
    assert again["errors"][0]["reason"] == err["reason"]


def test_ingest_docs_absolute_paths_inside_the_root_only(write_side):
    """Seed 000 §11.1: `"paths": ["/knowledge/**/*.md"]` (absolute paths); §16: "maintain an allowlist of
    paths": an absolute path inside the knowledge root is accepted, one outside refused (a sibling folder
    sharing its prefix, `..`, a symlink leaving the root)."""
    inside = payload(write_side["abs_inside"])
    assert inside["seen"] >= 4 and inside["skipped"] == inside["seen"] and inside["errors"] == []
    for name, res in write_side["refused"].items():
        assert res.is_error, name
        msg = text(res)
        assert msg.endswith(REFUSED), (name, msg)
        assert str(write_side["root"].parent) not in msg, (name, msg)
    assert payload(write_side["secret_q"])["chunks"] == [], "nothing outside the root was ingested"


def test_extract_and_link_takes_doc_ids(write_side):
    """Seed 000 §11.2: "Runs extraction/linking for specified docs (or pending queue)": `{ "doc_ids":
    [1,2,3] }` returns `{ "mentions": 420, "entities_new": 18, "relations": 95 }`."""
    out = payload(write_side["extract"])
    assert {"mentions", "entities_new", "relations"} <= set(out)
    assert out["documents"] == 1 and out["failed"] == []
    assert all(isinstance(out[k], int) for k in ("mentions", "entities_new", "relations"))
    pending = payload(write_side["extract_pending"])
    assert pending["documents"] == 0, "nothing is pending after the ingests"
    st = payload(write_side["status"])
    assert st["counts"]["docs"] == 19  # 17 + the tagged note + the broken PDF (kept as a failed record)
    # §11.6 on a server that writes: the writer's queue depth, the last file, the last error
    assert st["writer"]["active"] is True and st["writer"]["queue_depth"] == 0
    assert st["last_file"] and "broken/bad.pdf" in (st["last_error"] or "")


# -- operations: a fresh database, status metrics, allowlist, project id (§11.6, §15, §16, §18) --

STUB = {"KGR_EMBED_STUB": "1"}  # vectors without loading the model: this module is about operations


def knowledge(tmp_path: Path) -> Path:
    root = tmp_path / "knowledge"
    files = {
        "docs/retention.md": "# Data retention policy\n\nThe Archive service keeps records for seven years.\n",
        "docs/lifecycle.md": "# S3 lifecycle\n\nThe Archive service depends on the Lifecycle API.\n",
        "secret/keys.md": "# Keys\n\nNothing here may be read by the server.\n",
    }
    for rel, body in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body)
    return root


def test_serve_on_a_fresh_root_creates_the_database_and_reports_status_metrics_allowlist_project(tmp_path, errlog):
    """Seed 000 quick start: "# Initialize the database and report status".
    Seed 000 §11.6 `status`: "Returns: queue depth, last file, counts per table, last error."
    Seed 000 §15: "Periodic metrics: ingest rate, avg tx duration, vector count, orphaned entities".
    Seed 000 §16: "maintain an allowlist of paths" and "Namespaces: add `project_id` ... if running
    multi-tenant in one DB" (kgr: one database per project, its id stamped and reported).
    Seed 000 §18: "Run `PRAGMA incremental_vacuum` occasionally if churn is high" (new databases
    are made with auto_vacuum=INCREMENTAL)."""
    root = knowledge(tmp_path)
    db = tmp_path / "data" / "graphrag.sqlite"
    db.parent.mkdir()
    assert not db.exists()
    env = {**STUB, "KGR_PROJECT": "knowledge-graphrag", "KGR_SECURITY_ALLOWLIST": "docs/**"}

    async def run(client):
        first = payload(await client.call_tool("status", {}))
        refused = await client.call_tool("ingest_docs", {"paths": ["secret/keys.md"]})
        ingested = payload(await client.call_tool("ingest_docs", {"paths": ["**/*.md"]}))
        after = payload(await client.call_tool("status", {}))
        return first, refused, ingested, after

    first, refused, ingested, after = session(
        serve_params(db, "--root", str(root), profile="graphrag", env=env), run, errlog
    )
    assert db.is_file()
    # a new, empty database with the whole schema
    assert first["empty"] is True and first["counts"]["docs"] == 0
    assert first["schema_version"] == first["schema_latest"]
    assert first["project"] == "knowledge-graphrag"
    assert first["storage"]["auto_vacuum"] == "incremental"
    m = first["metrics"]
    assert {"queue_depth", "ingest_rate", "transactions", "vector_count", "orphaned_entities"} <= set(m)
    assert m["queue_depth"] == 0 and m["vector_count"] == 0
    assert {"queue_depth", "last_file", "counts", "last_error"} <= set(first)  # §11.6's four
    assert first["queue_depth"] == 0 and first["last_file"] is None and first["last_error"] is None
    # the allowlist: a named file outside it is refused, a glob reads only what it allows
    assert refused.is_error and "allowlist" in text(refused)
    assert ingested["ingested"] == 2
    assert after["empty"] is False and after["counts"]["docs"] == 2
    assert after["project"] == "knowledge-graphrag"
    m = after["metrics"]
    assert m["from"] == "live writer" and m["queue_depth"] == 0
    assert m["files_done"] == 2 and m["ingest_rate"] > 0
    tx = m["transactions"]
    assert tx["count"] >= 2 and 0 < tx["median_ms"] <= tx["p95_ms"] <= tx["max_ms"] and tx["last_ms"] > 0
    assert m["vector_count"] >= after["counts"]["chunks"] > 0
    assert after["last_file"] in ("docs/lifecycle.md", "docs/retention.md")
    assert "secret" not in str(after["last_file"])


def test_serve_on_a_missing_database_without_a_root_starts_empty(tmp_path, errlog):
    """Seed 000 quick start: "# Initialize the database and report status" (a server given only
    `--db` for a file that does not exist yet starts on an empty database, not an error)."""
    db = tmp_path / "graphrag.sqlite"

    async def run(client):
        status = payload(await client.call_tool("status", {}))
        query = await client.call_tool("hybrid_query", {"query": "data retention policy"})
        ingest = await client.call_tool("ingest_docs", {"paths": ["docs/a.md"]})
        return status, query, ingest

    status, query, ingest = session(serve_params(db, profile="graphrag", env=STUB), run, errlog)
    assert db.is_file() and status["empty"] is True and status["project"] == "kgr"
    assert status["metrics"]["queue_depth"] == 0 and status["writer"]["alive"] is False
    assert not query.is_error  # an empty answer, not a failure
    assert ingest.is_error and "no knowledge root" in text(ingest)
