"""kgr.retrieval.concepts, seed 004's atom: get_concept's body (the concept's own document, read
through kgr.confine) and kb_health's dangling references with the tenant's knownExternalIds."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from kgr.errors import UsageError
from kgr.retrieval import concepts
from kgr.stages.load import load
from kgr.store import Store

KESTREL = "# Kestrel\n\nKestrel is the event bus of the platform.\n\nIt cites RFC 7519 and ADR-012.\n"
LEDGER = "# Ledger notes\n\nThe ledger service publishes to Kestrel. See ADR-012 and SEC-77.\n"
SECRET = "aws_secret_access_key = 'Zk8qP3xR7vLm2NcT9wYb4HdJ6sFe1GuA5oKi0XyZ'\n"


def _doc(root, path: str, title: str, text: str, fmt: str = "md"):
    data = text.encode()
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_bytes(data)
    yield {
        "kind": "doc",
        "path": path,
        "hash": hashlib.sha256(data).hexdigest(),
        "file_hash": hashlib.sha256(data).hexdigest(),
        "title": title,
        "format": fmt,
        "source": "file",
        "text": text,
    }
    yield {"kind": "chunk", "doc": path, "ord": 0, "text": text, "prelude": title, "hash": path, "start": 0}


ENTITIES = [
    # id, name, type, pattern of its mentions
    (1, "Kestrel", "SERVICE", None),
    (2, "ADR-012", "CONCEPT", "ticket"),
    (3, "SEC-77", "CONCEPT", "ticket"),
    (4, "RFC 7519", "STANDARD", "standard"),
    (5, "Ledger Service", "SERVICE", None),
]


@pytest.fixture()
def kb(tmp_path):
    """Three documents under a root: Kestrel's own, ADR-012's own (found by its file name), and
    notes naming SEC-77 and RFC 7519, which have none."""
    root = tmp_path / "kb"
    root.mkdir()
    adr = "# Decision: one bus\n\nWe keep Kestrel as the only bus.\n"
    with Store(tmp_path / "c.sqlite") as store:
        load(_doc(root, "services/kestrel.md", "Kestrel", KESTREL), store)
        load(_doc(root, "notes/ledger.md", "Ledger notes", LEDGER), store)
        load(_doc(root, "adr/ADR-012-one-bus.md", "Decision: one bus", adr), store)
        with store.write() as conn:
            for eid, name, typ, pattern in ENTITIES:
                conn.execute(
                    "INSERT INTO entities(id, key, name, type, norm) VALUES (?, ?, ?, ?, ?)",
                    (eid, f"{typ}:{name.lower()}", name, typ, name.lower()),
                )
            docs = dict(conn.execute("SELECT path, id FROM docs"))
            chunks = dict(conn.execute("SELECT doc_id, id FROM chunks"))

            def mention(eid, path, surface, in_title=False, pattern=None):
                text = conn.execute("SELECT text FROM chunks WHERE id = ?", (chunks[docs[path]],)).fetchone()[0]
                start = text.index(surface)
                features = {"in_title": in_title, **({"pattern": pattern} if pattern else {})}
                conn.execute(
                    'INSERT INTO mentions(entity_id, doc_id, chunk_id, start, "end", surface, source, features) '
                    "VALUES (?, ?, ?, ?, ?, ?, 'gazetteer', ?)",
                    (eid, docs[path], chunks[docs[path]], start, start + len(surface), surface, json.dumps(features)),
                )

            mention(1, "services/kestrel.md", "Kestrel", in_title=True)
            mention(1, "notes/ledger.md", "Kestrel")
            mention(1, "notes/ledger.md", "Kestrel")  # the notes mention it more often than its own page
            mention(1, "adr/ADR-012-one-bus.md", "Kestrel")
            mention(2, "services/kestrel.md", "ADR-012", pattern="ticket")
            mention(2, "adr/ADR-012-one-bus.md", "bus")  # the ADR's own file (its name starts with the id)
            mention(3, "notes/ledger.md", "SEC-77", pattern="ticket")
            mention(4, "services/kestrel.md", "RFC 7519", pattern="standard")
            mention(5, "notes/ledger.md", "ledger service")
            conn.executemany(
                "INSERT INTO relations(src_id, dst_id, rel, confidence) VALUES (?, ?, ?, 0.9)",
                [(1, 2, "cites"), (1, 4, "cites"), (5, 3, "refers_to"), (5, 1, "uses")],
            )
        yield store, root


def test_the_body_is_the_concepts_own_document_read_from_the_root(kb):
    store, root = kb
    c = concepts.get_concept(store, "Kestrel", root=root)
    assert c["path"] == "services/kestrel.md"  # its title names it, though the notes mention it more
    assert c["body_from"] == "its title names the concept"
    assert c["body"] == KESTREL and c["truncated"] is False and c["changed"] is False
    assert c["body_format"] == "file" and c["external"] is False
    adr = concepts.get_concept(store, "ADR-012", root=root)
    assert adr["path"] == "adr/ADR-012-one-bus.md" and adr["body_from"] == "its file name names the concept"
    assert adr["body"].startswith("# Decision: one bus")
    # no document of its own: the one that mentions it most
    sec = concepts.get_concept(store, "SEC-77", root=root)
    assert sec["path"] == "notes/ledger.md" and sec["body_from"] == "it mentions the concept most"


def test_the_body_is_the_file_now_and_says_when_it_changed(kb):
    store, root = kb
    (root / "services" / "kestrel.md").write_text(KESTREL + "\nA new line.\n")
    c = concepts.get_concept(store, "Kestrel", root=root)
    assert c["body"].endswith("A new line.\n") and c["changed"] is True


def test_the_body_is_bounded_and_flagged(kb):
    store, root = kb
    c = concepts.get_concept(store, "Kestrel", root=root, max_chars=10)
    assert c["body"] == KESTREL[:10] and c["truncated"] is True
    (root / "services" / "kestrel.md").write_text("é" * 5000)  # cut inside a multi-byte character
    c = concepts.get_concept(store, "Kestrel", root=root, max_chars=100)
    assert c["body"] == "é" * 100 and c["truncated"] is True and c["changed"] is None
    with pytest.raises(UsageError, match="max_chars"):
        concepts.get_concept(store, "Kestrel", root=root, max_chars=0)


def test_secrets_are_redacted_in_the_body_as_at_ingest(kb, monkeypatch):
    store, root = kb
    monkeypatch.setenv("KGR_REDACT_KEY", "test-key")
    (root / "services" / "kestrel.md").write_text(KESTREL + SECRET)
    c = concepts.get_concept(store, "Kestrel", root=root)
    assert "Zk8qP3xR7vLm2NcT9wYb4HdJ6sFe1GuA5oKi0XyZ" not in c["body"] and "[REDACTED:" in c["body"]
    raw = concepts.get_concept(store, "Kestrel", root=root, redact=False)
    assert "Zk8qP3xR7vLm2NcT9wYb4HdJ6sFe1GuA5oKi0XyZ" in raw["body"]


def test_no_root_a_file_gone_or_a_link_out_of_the_root_is_said_not_read(kb, tmp_path):
    store, root = kb
    c = concepts.get_concept(store, "Kestrel", root=None)
    assert c["body"] is None and "no knowledge root" in c["body_note"] and c["path"] == "services/kestrel.md"
    outside = tmp_path / "outside.md"
    outside.write_text("# Kestrel\n\nTOP SECRET outside the root\n")
    target = root / "services" / "kestrel.md"
    target.unlink()
    gone = concepts.get_concept(store, "Kestrel", root=root)
    assert gone["body"] is None and "cannot be read under the knowledge root" in gone["body_note"]
    os.symlink(outside, target)
    linked = concepts.get_concept(store, "Kestrel", root=root)
    assert linked["body"] is None and "TOP SECRET" not in json.dumps(linked)
    assert "cannot be read under the knowledge root" in linked["body_note"]
    missing_root = concepts.get_concept(store, "Kestrel", root=tmp_path / "nowhere")
    assert missing_root["body"] is None and "root is missing" in missing_root["body_note"]


def test_a_known_external_concept_is_never_read(kb, tmp_path):
    """knownExternalIds marks a concept as living elsewhere: no document is chosen for it and
    nothing is read, even when a file of that name sits next to the root."""
    store, root = kb
    (tmp_path / "SEC-77.md").write_text("# SEC-77\n\nTOP SECRET\n")
    c = concepts.get_concept(store, "SEC-77", root=root, known_external=["sec-77", str(tmp_path / "SEC-77.md")])
    assert c["external"] is True and c["body"] is None and c["path"] is None
    assert "knownExternalIds" in c["body_note"] and "TOP SECRET" not in json.dumps(c)
    # a concept with its own document here is read as usual, listed or not
    k = concepts.get_concept(store, "Kestrel", root=root, known_external=["Kestrel"])
    assert k["external"] is False and k["body"] == KESTREL


def test_dangling_references_and_their_suppression(kb):
    store, root = kb
    d = concepts.dangling_references(store)
    # ADR-012 has its own file; SEC-77 and RFC 7519 have no document here
    assert [(r["src"], r["rel"], r["dst"], r["missing"]) for r in d["sample"]] == [
        ("Kestrel", "cites", "RFC 7519", ["RFC 7519"]),
        ("Ledger Service", "refers_to", "SEC-77", ["SEC-77"]),
    ]
    assert d["count"] == 2 and d["suppressed"] == 0
    known = concepts.dangling_references(store, ["sec 77"])  # case, spaces and hyphens alike
    assert known["count"] == 1 and known["sample"][0]["dst"] == "RFC 7519"
    assert known["suppressed"] == 1 and known["suppressed_sample"][0]["dst"] == "SEC-77"
    h = concepts.kb_health(store, root, known_external=["SEC-77", "RFC 7519"], client_id="acme")
    assert h["clientId"] == "acme" and h["dangling_references"]["count"] == 0
    assert h["dangling_references"]["suppressed"] == 2 and h["warnings"] == {"dangling_references": 0}
    assert h["ok"] is True and h["violations"] == []
    assert concepts.kb_health(store, root)["warnings"] == {"dangling_references": 2}
