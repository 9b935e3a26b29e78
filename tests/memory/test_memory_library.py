"""kgr.memory on a fresh database: the reference's semantics, validity history, pagination,
and what retrieval and ingest see of the memory graph."""

from __future__ import annotations

import pytest

from kgr.errors import BadRecord, UsageError
from kgr.memory import graph as memory
from kgr.store import Store


@pytest.fixture()
def store(memory_db):
    with Store(memory_db) as s:
        yield s


def ent(name, typ="person", obs=()):
    return {"name": name, "entityType": typ, "observations": list(obs)}


def rel(a, b, t="knows"):
    return {"from": a, "to": b, "relationType": t}


def test_rows_are_manual_graph_members(store):
    memory.create_entities(store, [ent("Alice", obs=["likes tea"]), ent("Acme", "org")])
    memory.create_relations(store, [rel("Alice", "Acme", "works_for")])
    rows = store.query("SELECT key, name, type, origin FROM entities ORDER BY id")
    assert rows == [("memory:Alice", "Alice", "person", "manual"), ("memory:Acme", "Acme", "org", "manual")]
    assert store.query("SELECT rel, origin FROM relations") == [("works_for", "manual")]
    assert store.query("SELECT content, source, valid_until_ms IS NULL FROM observations") == [
        ("likes tea", "manual", 1)
    ]
    # a new relation type joins the registry; a known one is left as it is
    assert store.scalar("SELECT description FROM relation_types WHERE name='works_for'") == memory.NEW_RELATION_TYPE
    before = store.query("SELECT * FROM relation_types WHERE name='uses'")
    memory.create_relations(store, [rel("Acme", "Alice", "uses")])
    assert store.query("SELECT * FROM relation_types WHERE name='uses'") == before
    # retrieval's entity index sees them
    assert store.query(
        "SELECT e.name FROM entities_fts f JOIN entities e ON e.id = f.rowid WHERE entities_fts MATCH 'alice'"
    ) == [("Alice",)]


def test_duplicates_are_skipped(store):
    assert len(memory.create_entities(store, [ent("A"), ent("B")])) == 2
    created = memory.create_entities(store, [ent("A", "other"), ent("C"), ent("C", "again")])
    assert [e["name"] for e in created] == ["C"]
    assert store.scalar("SELECT type FROM entities WHERE name='A'") == "person"
    assert memory.create_relations(store, [rel("A", "B"), rel("A", "B"), rel("B", "A")]) == [
        rel("A", "B"),
        rel("B", "A"),
    ]
    assert memory.create_relations(store, [rel("A", "B")]) == []
    res = memory.add_observations(
        store, [{"entityName": "A", "contents": ["x", "y"]}, {"entityName": "A", "contents": ["y", "z"]}]
    )
    assert res == [
        {"entityName": "A", "addedObservations": ["x", "y"]},
        {"entityName": "A", "addedObservations": ["z"]},
    ]


def test_missing_entities_are_errors_and_change_nothing(store):
    memory.create_entities(store, [ent("A")])
    with pytest.raises(UsageError, match="Entity with name Nope not found"):
        memory.add_observations(
            store, [{"entityName": "A", "contents": ["kept?"]}, {"entityName": "Nope", "contents": ["x"]}]
        )
    assert store.scalar("SELECT count(*) FROM observations") == 0
    with pytest.raises(UsageError, match="Entity with name Nope not found"):
        memory.create_relations(store, [rel("A", "A", "self"), rel("A", "Nope")])
    assert store.scalar("SELECT count(*) FROM relations") == 0
    with pytest.raises(UsageError, match='"observations" must be a list of strings'):
        memory.create_entities(store, [{"name": "B", "entityType": "t", "observations": "one string"}])


def test_delete_entities_cascades(store):
    memory.create_entities(store, [ent("A", obs=["o"]), ent("B"), ent("C")])
    memory.create_relations(store, [rel("A", "B"), rel("C", "A"), rel("B", "C")])
    assert memory.delete_entities(store, ["A", "missing"]) == 1
    graph = memory.read_graph(store)
    assert [e["name"] for e in graph["entities"]] == ["B", "C"]
    assert graph["relations"] == [rel("B", "C")]
    assert store.scalar("SELECT count(*) FROM observations") == 0


def test_delete_observations_closes_validity_and_keeps_history(store):
    memory.create_entities(store, [ent("A", obs=["old", "kept"])])
    assert memory.delete_observations(store, [{"entityName": "A", "observations": ["old"]}]) == 1
    assert memory.open_nodes(store, ["A"])["entities"][0]["observations"] == ["kept"]
    history = memory.observation_history(store, "A")
    assert [(h["content"], h["valid_until_ms"] is not None) for h in history] == [("old", True), ("kept", False)]
    # deleting again changes nothing; adding it again makes a new current observation
    assert memory.delete_observations(store, [{"entityName": "A", "observations": ["old"]}]) == 0
    assert memory.add_observations(store, [{"entityName": "A", "contents": ["old"]}])[0]["addedObservations"] == ["old"]
    assert memory.open_nodes(store, ["A"])["entities"][0]["observations"] == ["kept", "old"]
    assert len(memory.observation_history(store, "A")) == 3
    # hard: the rows go
    assert memory.delete_observations(store, [{"entityName": "A", "observations": ["old"]}], hard=True) == 2
    assert [h["content"] for h in memory.observation_history(store, "A")] == ["kept"]


def test_search_is_a_case_insensitive_substring_like_javascript(store):
    memory.create_entities(
        store,
        [
            ent("Alpha", "SERVICE", ["runs on Kubernetes"]),
            ent("İstanbul office", "place", []),  # İ lower-cases to "i̇": matches "i"
            ent("Temperature", "unit", ["255 \u212a"]),  # the Kelvin sign lower-cases to "k"
            ent("Ωmega", "letter", ["ΣΊΣΥΦΟΣ"]),
            ent("plain", "thing", ["nothing here"]),
        ],
    )
    names = lambda q: [e["name"] for e in memory.search_nodes(store, q)["entities"]]  # noqa: E731
    assert names("KUBER") == ["Alpha"]
    assert names("service") == ["Alpha"]
    assert names("istanbul") == []  # "i̇stanbul": the dot stays, as in JavaScript
    assert names("i̇stanbul") == ["İstanbul office"]
    assert names("255 k") == ["Temperature"]
    assert names("ωMEGA") == ["Ωmega"]
    assert names("σίσυφος") == ["Ωmega"]  # final sigma, as toLowerCase
    assert names("%") == [] and names("_") == []  # not LIKE patterns
    assert "plain" in names("")  # the empty query matches everything, as in the reference
    # a closed observation no longer matches
    memory.delete_observations(store, [{"entityName": "Alpha", "observations": ["runs on Kubernetes"]}])
    assert names("kuber") == []


def test_pages_cover_everything_once(store):
    memory.create_entities(store, [ent(f"e{i:03}", obs=[f"o{i}"]) for i in range(250)])
    made = memory.create_relations(
        store, [rel(f"e{i:03}", f"e{(i * 7) % 250:03}") for i in range(250) if (i * 7) % 250 != i]
    )
    seen, rels, cursor, pages = [], [], None, 0
    while True:
        page = memory.read_graph(store, limit=100, cursor=cursor)
        seen += [e["name"] for e in page["entities"]]
        rels += page["relations"]
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert pages == 3 and seen == [f"e{i:03}" for i in range(250)]
    assert sorted(map(str, rels)) == sorted(map(str, memory.read_graph(store, limit=1000)["relations"]))
    assert len(rels) == len(made) == 248  # every relation once (i = 0 and 125 map to themselves)
    names = memory.search_nodes(store, "e1", limit=5, names_only=True)
    assert names["names"] == ["e100", "e101", "e102", "e103", "e104"] and names["nextCursor"]
    rest = memory.search_nodes(store, "e1", limit=1000, cursor=names["nextCursor"], names_only=True)
    assert rest["names"] == [f"e{i}" for i in range(105, 200)] and rest["nextCursor"] is None
    with pytest.raises(UsageError, match="not a cursor"):
        memory.read_graph(store, cursor="abc")


def test_import_checks_every_line_and_is_all_or_nothing(store):
    good = '{"type":"entity","name":"A","entityType":"t","observations":["x"]}'
    with pytest.raises(BadRecord, match="line 2"):
        memory.import_jsonl(store, [good, '{"type":"relation","from":"A","to":"B","relationType":"r"}'])
    with pytest.raises(BadRecord, match="line 3"):
        memory.import_jsonl(store, [good, "", "{not json"])
    assert store.scalar("SELECT count(*) FROM entities") == 0
    counts = memory.import_jsonl(store, [good, "", '{"type":"other"}'])
    assert counts["entities"] == 1 and counts["observations"] == 1
    again = memory.import_jsonl(store, [good.replace('["x"]', '["x","y"]')])
    assert again["entities"] == 0 and again["skipped_entities"] == 1 and again["observations"] == 1


def test_search_agrees_with_a_plain_python_oracle(store):
    """The index path (ASCII queries of 3+ characters) and the scan path (the rest) both return
    exactly the entities the reference's rule selects, on random texts with awkward characters."""
    import random

    rng = random.Random(3)
    alphabet = list("abcKkSsİiı ") + ["\u212a", "ß", "Σ", "ς", "é", "E\u0301", "%", "_", '"']
    ents = []
    for i in range(300):
        word = lambda: "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))  # noqa: E731
        ents.append(
            ent(f"{word()}-{i}", rng.choice(["Kind", "kınd", "SORT"]), [word() for _ in range(rng.randint(0, 3))])
        )
    # where ASCII case folding is not enough: only U+0130 and U+212A lower-case to ASCII letters
    ents += [ent("xab\u0130", "Kind", []), ent("plain-1", "Kind", ["\u212aelvin scale"]), ent("\u212aiwi", "SORT", [])]
    memory.create_entities(store, ents)
    gone = [{"entityName": e["name"], "observations": e["observations"][:1]} for e in ents[::7] if e["observations"]]
    memory.delete_observations(store, gone)
    closed = {(d["entityName"], d["observations"][0]) for d in gone}
    current = {e["name"]: [o for o in e["observations"] if (e["name"], o) not in closed] for e in ents}

    def oracle(q):
        q = q.lower()
        return [
            e["name"]
            for e in ents
            if q in e["name"].lower() or q in e["entityType"].lower() or any(q in o.lower() for o in current[e["name"]])
        ]

    queries = [
        "abc",
        "kk",
        "KIND",
        "kın",
        "sss",
        "ss",
        "i̇",
        "ik",
        "a b",
        "%",
        "_a",
        '"',
        "s-1",
        "ΣΣ",
        "ςσ",
        "é",
        "K",
        "k",
        "ki",
        "ki-",
        "ind",
        "abi",
        "kelvin",
        "kiwi",
    ] + ["".join(rng.choice(alphabet) for _ in range(3)) for _ in range(40)]
    for q in queries:
        got = memory.search_nodes(store, q, limit=1000, names_only=True)["names"]
        assert got == oracle(q), q


def test_pages_within_a_byte_budget_are_shortened_and_still_cover_everything(store):
    import orjson

    memory.create_entities(store, [ent(f"n{i:02}", obs=["x" * (50 + 40 * (i % 5))]) for i in range(40)])
    memory.create_relations(store, [rel(f"n{i:02}", f"n{(i + 3) % 40:02}") for i in range(40)])
    for fn, kw, touching in ((memory.read_graph, {}, False), (memory.search_nodes, {"query": "N"}, True)):
        names, rels, cursor, pages = [], set(), None, 0
        while True:
            page = fn(store, limit=1000, cursor=cursor, max_bytes=1500, **kw)
            body = orjson.dumps({"entities": page["entities"], "relations": page["relations"]})
            assert len(body) <= 1500 or len(page["entities"]) == 1
            names += [e["name"] for e in page["entities"]]
            rels |= {(r["from"], r["to"]) for r in page["relations"]}
            pages += 1
            cursor = page["nextCursor"]
            if cursor is None:
                break
        assert names == [f"n{i:02}" for i in range(40)] and pages > 3, fn
        assert rels == {(f"n{i:02}", f"n{(i + 3) % 40:02}") for i in range(40)}, fn


def test_pages_are_the_same_without_the_memory_pages_index(store):
    """Migration m009_memory_pages's index walks the memory entities in id order; a database
    opened read-only before it walks them by id: the same pages, among extracted entities too."""
    for i in range(30):
        memory.create_entities(store, [ent(f"m{i:02}", "note" if i % 3 else "task", obs=[f"o{i}", "x" * (i * 7)])])
        store.execute(
            "INSERT INTO entities(key, name, type, norm, origin) VALUES (?, ?, 'note', ?, 'extracted')",
            (f"note:e{i}", f"e{i}", f"e{i}"),
        )
    memory.create_relations(store, [rel(f"m{i:02}", f"m{(i * 7) % 30:02}") for i in range(30) if i % 4])

    def every_page():
        out = {}
        for fn, args in ((memory.read_graph, ()), (memory.search_nodes, ("note",)), (memory.search_nodes, ("o",))):
            for n, kw in enumerate(({"limit": 7}, {"limit": 1000, "max_bytes": 600}, {"limit": 4, "names_only": True})):
                pages, cursor = [], None
                while True:
                    pages.append(fn(store, *args, cursor=cursor, **kw))
                    cursor = pages[-1]["nextCursor"]
                    if cursor is None:
                        break
                out[fn.__name__, args, n] = pages
        return out

    assert store.scalar("SELECT 1 FROM sqlite_master WHERE name = 'idx_entities_memory_pages'") == 1
    indexed = every_page()
    store.execute("DROP INDEX idx_entities_memory_pages")
    assert every_page() == indexed
    for n in range(2):  # every memory entity once, in order, over pages of 7 or of 600 bytes
        pages = indexed["read_graph", (), n]
        assert [e["name"] for p in pages for e in p["entities"]] == [f"m{i:02}" for i in range(30)]
        assert len(pages) == (5 if n == 0 else len(pages)) and len(pages) > 2
    tasks = [e["name"] for p in indexed["search_nodes", ("note",), 0] for e in p["entities"]]
    assert tasks == [f"m{i:02}" for i in range(30) if i % 3]
