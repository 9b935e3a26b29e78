"""Incremental updates: a file's evidence goes with it; manual graph members stay."""

from kgr.records import text_hash
from kgr.stages.load import delete_docs, load
from kgr.store import Store


def group(path, text, ents, rels):
    doc = {"kind": "doc", "path": path, "text": text, "hash": text_hash(text), "title": path, "size": 1, "mtime_ms": 1}
    chunk = {"kind": "chunk", "doc": path, "ord": 0, "text": text, "start": 0, "end": len(text)}
    recs = [doc, chunk]
    for key in ents:
        recs.append({"kind": "entity", "key": key, "name": key, "type": "SERVICE", "norm": key, "aliases": []})
        recs.append(
            {
                "kind": "mention",
                "chunk": f"{path}#0",
                "surface": key,
                "type": "SERVICE",
                "start": 0,
                "end": 1,
                "entity": key,
            }
        )
    for src, rel, dst in rels:
        recs.append(
            {
                "kind": "relation",
                "src": src,
                "dst": dst,
                "rel": rel,
                "confidence": 0.7,
                "src_surface": src,
                "evidence": {"chunk": f"{path}#0", "start": 0, "end": 1, "sentence": text},
            }
        )
    return recs


def edges(s):
    return set(
        s.query(
            "SELECT a.key, r.rel, b.key FROM relations r JOIN entities a ON a.id=r.src_id JOIN entities b ON b.id=r.dst_id"
        )
    )


def test_deleting_a_file_removes_exactly_the_edges_only_it_supported(db):
    with Store(db) as s:
        load(group("a.md", "A", ["x", "y", "z"], [("x", "uses", "y"), ("x", "uses", "z")]), s)
        load(group("b.md", "B", ["x", "y"], [("x", "uses", "y")]), s)
        assert edges(s) == {("x", "uses", "y"), ("x", "uses", "z")}
        delete_docs(s, ["a.md"])
        assert edges(s) == {("x", "uses", "y")}  # still supported by b.md
        assert {k for (k,) in s.query("SELECT key FROM entities")} == {"x", "y"}  # z had nothing left
        assert s.scalar("SELECT count(*) FROM relation_evidence") == 1


def test_reingesting_a_changed_file_replaces_its_graph(db):
    with Store(db) as s:
        load(group("a.md", "A", ["x", "y"], [("x", "uses", "y")]), s)
        load(group("a.md", "A2", ["x", "w"], [("x", "depends_on", "w")]), s)
        assert edges(s) == {("x", "depends_on", "w")}
        assert s.scalar("SELECT count(*) FROM entities WHERE key='y'") == 0


def test_manual_edges_and_entities_survive(db):
    with Store(db) as s:
        load(group("a.md", "A", ["x", "y"], [("x", "uses", "y")]), s)
        with s.write() as c:
            c.execute("UPDATE relations SET origin='manual'")
            c.execute("INSERT INTO entities(key, name, type, norm, origin) VALUES ('m', 'm', 'CONCEPT', 'm', 'manual')")
        delete_docs(s, ["a.md"])
        assert edges(s) == {("x", "uses", "y")}
        assert {k for (k,) in s.query("SELECT key FROM entities")} >= {"x", "y", "m"}


def test_same_graph_writes_nothing(db):
    with Store(db) as s:
        recs = group("a.md", "A", ["x", "y"], [("x", "uses", "y")])
        load(recs, s)
        before = s.scalar("SELECT total_changes()")
        summary = load(recs, s)
        assert summary.unchanged == 1 and s.scalar("SELECT total_changes()") == before
