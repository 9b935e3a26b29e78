"""eval extraction scoring on hand-built databases: scope.json, entity typing, a subset of documents."""

import orjson
import pytest

from kgr.eval import extraction as evalx
from kgr.store import open_store

TEXT_A = "Ada Lovelace met Charles Babbage in London on 5 June 1833. She worked for the Analytical Society."
TEXT_B = "Babbage Labs is in Paris. It shipped Loom 2.1 in 1999."


def _write(folder, name, rows):
    (folder / name).write_text("".join(orjson.dumps(r).decode() + "\n" for r in rows))


def _mention(doc, text, surface, entity, n=1):
    start = -1
    for _ in range(n):
        start = text.index(surface, start + 1)
    return {"doc": doc, "surface": surface, "entity": entity, "n": n, "start": start, "end": start + len(surface)}


def _golden(tmp_path, *, scope=None, relations=()):
    ann = tmp_path / "annotations"
    ann.mkdir()
    entities = [
        {"id": "P1", "name": "Ada Lovelace", "type": "PERSON"},
        {"id": "P2", "name": "Charles Babbage", "type": "PERSON"},
        {"id": "L1", "name": "London", "type": "LOCATION"},
        {"id": "O1", "name": "Analytical Society", "type": "ORG"},
        {"id": "O2", "name": "Babbage Labs", "type": "ORG"},
        {"id": "L2", "name": "Paris", "type": "LOCATION"},
    ]
    mentions = [
        _mention("a.md", TEXT_A, "Ada Lovelace", "P1"),
        _mention("a.md", TEXT_A, "Charles Babbage", "P2"),
        _mention("a.md", TEXT_A, "London", "L1"),
        _mention("a.md", TEXT_A, "the Analytical Society", "O1"),
        _mention("b.md", TEXT_B, "Babbage Labs", "O2"),
        _mention("b.md", TEXT_B, "Paris", "L2"),
    ]
    _write(ann, "entities.jsonl", entities)
    _write(ann, "mentions.jsonl", mentions)
    _write(ann, "relations.jsonl", [{"doc": d, "src": s, "rel": r, "dst": t} for d, s, r, t in relations])
    if scope is not None:
        (ann / "scope.json").write_text(orjson.dumps(scope).decode())
    return ann


class _Db:
    """A database holding predictions written by hand: each document is one chunk."""

    def __init__(self, path):
        self.store = open_store(path)
        self.docs, self.entities = {}, {}

    def doc(self, path, text):
        with self.store.write():
            did = self.store.execute(
                "INSERT INTO docs(path, text) VALUES (?, ?) RETURNING id", (path, text)
            ).fetchone()[0]
            cid = self.store.execute(
                'INSERT INTO chunks(doc_id, ord, text, start, "end") VALUES (?, 0, ?, 0, ?) RETURNING id',
                (did, text, len(text)),
            ).fetchone()[0]
        self.docs[path] = (did, cid, text)

    def entity(self, name, etype):
        with self.store.write():
            eid = self.store.execute(
                "INSERT INTO entities(key, name, type, norm) VALUES (?, ?, ?, ?) RETURNING id",
                (f"{etype}:{name.lower()}", name, etype, name.lower()),
            ).fetchone()[0]
        self.entities[name] = eid
        return eid

    def mention(self, path, surface, entity, mtype=None, n=1):
        did, cid, text = self.docs[path]
        start = -1
        for _ in range(n):
            start = text.index(surface, start + 1)
        with self.store.write():
            self.store.execute(
                'INSERT INTO mentions(entity_id, doc_id, chunk_id, start, "end", surface, type, source) '
                "VALUES (?, ?, ?, ?, ?, ?, ?, 'ner')",
                (self.entities.get(entity), did, cid, start, start + len(surface), surface, mtype),
            )

    def relation(self, path, src, rel, dst):
        """One edge (made once) with its evidence in `path`."""
        did, cid, _ = self.docs[path]
        with self.store.write():
            rid = self.store.execute(
                "INSERT INTO relations(src_id, dst_id, rel) VALUES (?, ?, ?) "
                "ON CONFLICT(src_id, dst_id, rel) DO UPDATE SET rel=excluded.rel RETURNING id",
                (self.entities[src], self.entities[dst], rel),
            ).fetchone()[0]
            self.store.execute(
                "INSERT INTO relation_evidence(relation_id, doc_id, chunk_id) VALUES (?, ?, ?)", (rid, did, cid)
            )


@pytest.fixture
def db(tmp_path):
    d = _Db(tmp_path / "pred.sqlite")
    d.doc("a.md", TEXT_A)
    d.doc("b.md", TEXT_B)
    for name, etype in [
        ("Ada Lovelace", "PERSON"),
        ("Charles Babbage", "PERSON"),
        ("London", "LOCATION"),
        ("Analytical Society", "ORG"),
        ("Babbage Labs", "PERSON"),  # typed wrong on purpose
        ("Paris", "LOCATION"),
        ("Loom", "PRODUCT"),
        ("5 June 1833", "DATE"),
        ("Loom 2.1", "VERSION"),
        ("1999", "DATE"),
    ]:
        d.entity(name, etype)
    for surface in ("Ada Lovelace", "Charles Babbage", "London", "Analytical Society", "5 June 1833"):
        d.mention("a.md", surface, surface)
    for surface in ("Babbage Labs", "Paris", "Loom", "1999"):
        d.mention("b.md", surface, surface)
    d.mention("b.md", "2.1", "Loom 2.1", mtype="VERSION")
    yield d
    d.store.close()


RELATIONS = [
    ("a.md", "P1", "part_of", "O1"),
    ("a.md", "P2", "located_in", "L1"),
    ("b.md", "O2", "located_in", "L2"),
]


def test_without_scope_every_prediction_counts(tmp_path, db):
    ann = _golden(tmp_path, relations=RELATIONS)
    db.relation("a.md", "Ada Lovelace", "part_of", "Analytical Society")
    db.relation("b.md", "Loom", "owned_by", "Babbage Labs")  # Loom is no annotated entity
    db.relation("a.md", "Ada Lovelace", "uses", "London")
    r = evalx.score(db.store, ann)
    # 10 predicted spans, 6 gold; "Analytical Society" finds the gold "the Analytical Society"
    assert (r["mention"]["tp"], r["mention"]["predicted"], r["mention"]["gold"]) == (6, 10, 6)
    assert (r["relation"]["tp"], r["relation"]["predicted"], r["relation"]["gold"]) == (1, 3, 3)
    assert "scope" not in r and "unjudged" not in r["mention"]


def test_scope_limits_relation_types_entity_types_and_value_mentions(tmp_path, db):
    scope = {"relation_types": ["part_of", "located_in"], "entity_types": ["PERSON", "ORG", "LOCATION"]}
    ann = _golden(tmp_path, scope=scope, relations=[*RELATIONS, ("a.md", "P1", "uses", "L1")])
    db.relation("a.md", "Ada Lovelace", "part_of", "Analytical Society")  # right
    db.relation("a.md", "Charles Babbage", "part_of", "London")  # wrong, in scope
    db.relation("b.md", "Loom", "owned_by", "Babbage Labs")  # type out of scope
    db.relation("b.md", "Loom", "part_of", "Babbage Labs")  # Loom is no gold entity: not judged
    db.relation("a.md", "Ada Lovelace", "uses", "London")  # type out of scope, though gold has it
    r = evalx.score(db.store, ann)
    # the date, the version and the year are not judged; "Loom" (a PRODUCT) still counts
    assert (r["mention"]["tp"], r["mention"]["predicted"], r["mention"]["unjudged"]) == (6, 7, 3)
    assert (r["relation"]["tp"], r["relation"]["predicted"], r["relation"]["gold"]) == (1, 2, 3)
    assert r["relation"]["out_of_scope"] == 3
    assert set(r["relation"]["by_relation"]) == {"part_of", "located_in"}
    assert r["scope"]["entity_types"] == ["LOCATION", "ORG", "PERSON"]


def test_scope_with_value_types_keeps_dates(tmp_path, db):
    ann = _golden(tmp_path, scope={"relation_types": ["part_of"], "entity_types": ["PERSON", "DATE"]})
    r = evalx.score(db.store, ann)
    assert r["mention"]["predicted"] == 9 and r["mention"]["unjudged"] == 1  # only the VERSION is left out


def test_typing_confusion(tmp_path, db):
    ann = _golden(tmp_path)
    r = evalx.score(db.store, ann)
    t = r["typing"]
    assert t["n"] == 6
    assert t["accuracy"] == pytest.approx(5 / 6, abs=1e-4)
    assert t["by_type"]["ORG"] == {"accuracy": 0.5, "n": 2}
    assert t["by_type"]["PERSON"] == {"accuracy": 1.0, "n": 2}
    assert t["confusion"]["ORG"] == {"ORG": 1, "PERSON": 1}
    table = evalx.format_table(r)
    assert "accuracy 0.833" in table
    org_row = next(line for line in table.splitlines() if line.startswith("ORG "))
    assert org_row.split()[1:] == [".", "1", "1", "0.50"]  # columns LOCATION, ORG, PERSON, then accuracy


def test_only_docs_restricts_gold_and_predictions(tmp_path, db):
    ann = _golden(tmp_path, relations=RELATIONS)
    db.relation("b.md", "Babbage Labs", "located_in", "Paris")
    db.relation("a.md", "Ada Lovelace", "uses", "London")
    r = evalx.score(db.store, ann, only_docs=["b.md"])
    assert r["documents"] == 1
    assert (r["mention"]["tp"], r["mention"]["predicted"], r["mention"]["gold"]) == (2, 5, 2)
    assert (r["relation"]["tp"], r["relation"]["predicted"], r["relation"]["gold"]) == (1, 1, 1)


def test_one_predicted_entity_maps_to_each_documents_gold_entity(tmp_path):
    """A corpus annotated document by document has one gold "Paris" per page; the predicted
    entity shared by both pages must map onto each page's own for its relations to count."""
    text = "Lumen is in Paris."
    ann = tmp_path / "annotations"
    ann.mkdir()
    _write(ann, "entities.jsonl", [{"id": f"{d}{x}", "type": "ORG"} for d in "ab" for x in "LP"])
    _write(
        ann, "mentions.jsonl", [_mention(f"{d}.md", text, s, f"{d}{s[0]}") for d in "ab" for s in ("Lumen", "Paris")]
    )
    _write(
        ann, "relations.jsonl", [{"doc": f"{d}.md", "src": f"{d}L", "rel": "located_in", "dst": f"{d}P"} for d in "ab"]
    )
    d = _Db(tmp_path / "p.sqlite")
    d.doc("a.md", text)
    d.doc("b.md", text)
    d.entity("Lumen", "ORG")
    d.entity("Paris", "LOCATION")
    for path in ("a.md", "b.md"):
        d.mention(path, "Lumen", "Lumen")
        d.mention(path, "Paris", "Paris")
        d.relation(path, "Lumen", "located_in", "Paris")
    r = evalx.score(d.store, ann)
    d.store.close()
    assert (r["relation"]["tp"], r["relation"]["predicted"], r["relation"]["gold"]) == (2, 2, 2)
    # nor can it say whether the two pages' Paris are one: the shared entity is judged page by page
    assert r["canonical"]["f1"] == 1.0 and r["canonical"]["per_document"]


@pytest.mark.parametrize("title_annotated", [False, True])
def test_titles_a_corpus_never_annotates_are_not_judged(tmp_path, title_annotated):
    texts = {f"{i}.md": f"# Orla Venn {i}\n\nOrla Venn met Tomas Reid in Lisbon.\n" for i in range(3)}
    ann = tmp_path / "annotations"
    ann.mkdir()
    mentions = [_mention(p, t, "Tomas Reid", "T") for p, t in texts.items()]
    if title_annotated:
        mentions.append(_mention("0.md", texts["0.md"], "Orla Venn", "O"))
    _write(ann, "mentions.jsonl", mentions)
    _write(ann, "entities.jsonl", [{"id": "T", "type": "PERSON"}, {"id": "O", "type": "PERSON"}])
    _write(ann, "relations.jsonl", [])
    d = _Db(tmp_path / "p.sqlite")
    d.entity("Orla Venn", "PERSON")
    d.entity("Tomas Reid", "PERSON")
    for path, text in texts.items():
        d.doc(path, text)
        d.mention(path, "Orla Venn", "Orla Venn")  # in the title
        d.mention(path, "Tomas Reid", "Tomas Reid")
    r = evalx.score(d.store, ann)
    d.store.close()
    if title_annotated:
        assert (r["mention"]["tp"], r["mention"]["predicted"]) == (4, 6) and "unjudged" not in r["mention"]
    else:
        assert (r["mention"]["tp"], r["mention"]["predicted"], r["mention"]["unjudged"]) == (3, 3, 3)
