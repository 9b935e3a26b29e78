"""ingest_docs and extract_and_link go through the single writer (kgr.writer): created on the
first write, visible to the read side at once, refused clearly when another process writes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from serve_fixtures import Mcp, error_text, make_service

from kgr.mcp import server as serve


@pytest.fixture()
def writable(kb_copy, kb_config):
    db, root = kb_copy
    svc = make_service(db, kb_config)
    yield Mcp(serve.build_server(svc, "all")), svc, db, root
    svc.close()


def test_a_read_only_server_takes_no_writer_lock(writable):
    mcp, svc, db, _ = writable
    mcp.call("hybrid_query", {"query": "fare cap", "mode": "bm25"})
    assert svc.writer is None
    from kgr.store.lock import writer_pid

    assert writer_pid(db) is None


def test_ingest_docs_adds_a_new_file_and_it_is_answerable(writable):
    mcp, svc, db, root = writable
    (root / "handbook" / "ferries.md").write_text(
        textwrap.dedent("""\
        # Ferry fuel policy

        The Quokka Ferry Service refuels at Pelican Wharf every night. Refuelling is owned by
        Harbour Operations and follows the Zephyr refuelling checklist.
        """)
    )
    r = mcp.call("ingest_docs", {"paths": ["handbook/ferries.md"]})
    assert not r.is_error, error_text(r)
    out = r.structured_content
    assert out["done"] is True and out["ingested"] == 1 and out["failed"] == 0
    assert svc.writer is not None
    hit = mcp.call("hybrid_query", {"query": "Zephyr refuelling checklist", "k": 3}).structured_content
    assert hit["results"][0]["path"] == "handbook/ferries.md"
    st = mcp.call("status").structured_content
    assert st["counts"]["docs"] == 18
    w = st["writer"]
    assert w["active"] is True and w["queue_depth"] == 0 and w["busy"] is False
    assert "handbook/ferries.md" in str(w.get("last_file"))


def test_ingest_docs_globs_and_whole_root_are_idempotent(writable):
    mcp, *_ = writable
    out = mcp.call("ingest_docs", {"paths": ["services/*.md"]}).structured_content
    assert out["seen"] >= 3 and out["ingested"] == 0 and out["unchanged"] == out["seen"]
    whole = mcp.call("ingest_docs").structured_content
    assert whole["seen"] == 17 and whole["unchanged"] == 17 and whole["pruned"] == 0


def test_ingest_docs_without_waiting_is_queued(writable):
    mcp, svc, *_ = writable
    out = mcp.call("ingest_docs", {"wait": False}).structured_content
    assert out["queued"] is True
    assert svc.writer.wait_idle(120)


def test_ingest_docs_refuses_paths_outside_the_root(writable, tmp_path):
    mcp, svc, db, root = writable
    (root.parent / "secret.txt").write_text("canary-4b1d")
    for bad in ["../secret.txt", str(root.parent / "secret.txt"), "nope/*.md", "handbook/../../secret.txt"]:
        text = error_text(mcp.call("ingest_docs", {"paths": [bad]}))
        assert text.endswith("not found: no such file or directory under the knowledge root"), text
        assert str(root.parent) not in text


def test_extract_and_link_rebuilds_the_graph_of_given_documents(writable):
    mcp, svc, db, root = writable
    docs = mcp.call("status").structured_content["counts"]
    r = mcp.call("extract_and_link", {"paths": ["services/fare-engine.md"]})
    assert not r.is_error, error_text(r)
    out = r.structured_content
    assert out["documents"] == 1
    assert out["totals"]["relations"] == docs["relations"]  # same text, same graph
    assert out["entities_new"] == 0
    nothing = mcp.call("extract_and_link").structured_content
    assert nothing["documents"] == 0
    assert "no document with id 99999" in error_text(mcp.call("extract_and_link", {"doc_ids": [99999]}))
    assert "not found" in error_text(mcp.call("extract_and_link", {"paths": ["../x.md"]}))


def test_a_second_writer_process_is_refused_clearly(writable):
    mcp, svc, db, root = writable
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from kgr.store.lock import WriterLock
            with WriterLock({str(db)!r}):
                print("locked", flush=True)
                sys.stdin.read()
        """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        w = mcp.call("status").structured_content["writer"]
        assert w["alive"] is True and w["pid"] == holder.pid and w["active"] is False
        text = error_text(mcp.call("ingest_docs"))
        assert "is being written by another kgr process" in text
        assert str(db.parent) not in text  # host paths scrubbed
    finally:
        holder.stdin.close()
        holder.wait(10)
    assert not mcp.call("ingest_docs", {"paths": ["services"]}).is_error  # once it is gone, writes work


def test_no_root_means_no_ingest(tmp_path, kb_copy, kb_config):
    from kgr.store import Store

    db, _ = kb_copy
    with Store(db) as store, store.write():
        store.conn.execute("DELETE FROM meta WHERE key = 'root'")
    svc = make_service(db, kb_config)
    try:
        text = error_text(Mcp(serve.build_server(svc, "graphrag")).call("ingest_docs"))
    finally:
        svc.close()
    assert "this server has no knowledge root" in text and "--root DIR" in text
