"""Template variables run in a sandbox: one read-only SELECT over kgr's graph tables, time-limited.
Every attack is refused with a clear error, and the database (and the disk) stay as they were."""

from __future__ import annotations

import hashlib
import re
import time

import pytest

from kgr.authoring import templates as tm
from kgr.store import Store

ATTACKS = [
    # (query, a fragment of the refusal)
    ("SELECT 1; DELETE FROM entities", "not allowed"),
    ("SELECT name FROM entities; DROP TABLE relations", "not allowed"),
    ("SELECT 1; SELECT 2", "one SELECT statement, not several"),
    ("DELETE FROM entities", "delete is not allowed"),
    ("UPDATE entities SET name = 'pwned'", "update is not allowed"),
    ("INSERT INTO entities(key, name, type, norm) VALUES ('x', 'x', 'x', 'x')", "insert is not allowed"),
    ("DROP TABLE entities", "not allowed"),
    ("CREATE TABLE evil(a)", "not allowed"),
    ("CREATE TEMP TABLE evil(a)", "not allowed"),
    ("CREATE VIEW evil AS SELECT 1", "not allowed"),
    ("CREATE VIRTUAL TABLE evil USING fts5(a)", "not allowed"),
    ("ATTACH DATABASE '{tmp}/evil.db' AS evil", "attach is not allowed"),
    ("SELECT 1; ATTACH '{tmp}/evil.db' AS evil", "attach is not allowed"),
    ("VACUUM INTO '{tmp}/copy.db'", "read-only SELECT"),
    ("PRAGMA user_version", "pragma is not allowed"),
    ("PRAGMA writable_schema = ON", "pragma is not allowed"),
    ("SELECT * FROM pragma_table_info('entities')", "pragma_table_info"),
    ("SELECT load_extension('/tmp/evil.so')", "load_extension"),
    ("SELECT readfile('/etc/passwd')", "readfile"),
    ("SELECT fts3_tokenizer('simple')", "fts3_tokenizer"),
    ("SELECT zeroblob(1000000000)", "zeroblob"),
    ("SELECT value FROM meta", "reading 'meta' is not allowed"),
    ("SELECT * FROM events", "reading 'events' is not allowed"),
    ("SELECT body FROM templates", "reading 'templates' is not allowed"),
    ("SELECT content FROM document_cache", "reading 'document_cache' is not allowed"),
    ("SELECT sql FROM sqlite_master", "reading 'sqlite_master' is not allowed"),
    ("SELECT sql FROM sqlite_schema", "reading 'sqlite_master' is not allowed"),
    ("SELECT name FROM temp.sqlite_master", "not allowed"),
    ("SELECT * FROM entities_fts", "not allowed"),
    ("SELECT name FROM entities UNION SELECT value FROM meta", "reading 'meta' is not allowed"),
    ("SELECT (SELECT value FROM meta LIMIT 1) AS v", "reading 'meta' is not allowed"),
    ("WITH m AS (SELECT value FROM meta) SELECT * FROM m", "reading 'meta' is not allowed"),
    ("EXPLAIN SELECT 1", "read-only SELECT"),
    ("BEGIN", "not allowed"),
    ("SAVEPOINT s", "not allowed"),
    ("ANALYZE", "not allowed"),
    ("REINDEX", "not allowed"),
    ("SELECT printf('%.*c', 100000000, 'x')", "larger than"),
    ("SELECT :secret", "unknown parameter :secret"),
    ("SELECT ?", "no name"),
    ("", "empty"),
]


def db_digest(db) -> str:
    """A hash of every row of every table (the schema included)."""
    h = hashlib.sha256()
    with Store(db, readonly=True) as s:
        for (name,) in s.query(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE '%vec%' ORDER BY name"
        ):
            h.update(repr(sorted(map(repr, s.query(f'SELECT * FROM "{name}"')))).encode())
        h.update(repr(s.query("SELECT * FROM sqlite_master ORDER BY name")).encode())
        h.update(repr(s.user_version).encode())
    return h.hexdigest()


@pytest.mark.parametrize("sql, why", ATTACKS, ids=[a[0][:40] or "empty" for a in ATTACKS])
def test_attacks_are_refused_and_change_nothing(graph, tmp_path, sql, why):
    db, ids = graph
    before = db_digest(db)
    files = sorted(p.name for p in tmp_path.iterdir())
    sql = sql.format(tmp=tmp_path)
    node = {"id": ids["Charlie Parker"], "name": "Charlie Parker", "type": "PERSON", "key": "x"}
    with tm.Sandbox(db) as box, pytest.raises(tm.TemplateError) as err:
        box.run("v", sql, node)
    assert why in str(err.value), str(err.value)
    assert str(err.value).startswith("variable v: ")
    assert db_digest(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == files  # no attached or vacuumed file appeared


@pytest.mark.parametrize("sql, why", ATTACKS[:20], ids=[a[0][:40] or "empty" for a in ATTACKS[:20]])
def test_a_template_with_an_attack_is_not_stored(store, sql, why, tmp_path):
    before = store.scalar("SELECT count(*) FROM templates")
    with pytest.raises(tm.TemplateError), store.write():
        tm.save_template(store, name="evil", structure="{{name}}", variables={"v": sql.format(tmp=tmp_path)})
    assert store.scalar("SELECT count(*) FROM templates") == before


def test_a_recursive_cte_bomb_is_stopped_by_the_time_limit(graph):
    db, ids = graph
    bomb = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    with tm.Sandbox(db, time_limit=0.3) as box:
        t0 = time.monotonic()
        with pytest.raises(tm.TemplateError, match="longer than 0.3 s"):
            box.run("bomb", bomb, {"id": 1})
        assert time.monotonic() - t0 < 3
        # the connection is still usable afterwards
        assert box.run("ok", "SELECT name FROM entities WHERE id = :id", {"id": ids["Bystander"]}) == [
            {"name": "Bystander"}
        ]


def test_a_cross_join_bomb_is_stopped_too(graph):
    db, _ = graph
    sql = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000) "
        "SELECT count(*) FROM c a, c b, c d"
    )
    with tm.Sandbox(db, time_limit=0.3) as box, pytest.raises(tm.TemplateError, match="took longer"):
        box.run("bomb", sql, {"id": 1})


def test_too_many_rows_is_an_error_not_a_silent_cut(graph):
    db, _ = graph
    sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20) SELECT x FROM c"
    with tm.Sandbox(db, max_rows=10) as box, pytest.raises(tm.TemplateError, match="more than 10 rows"):
        box.run("many", sql, {"id": 1})
    with tm.Sandbox(db, max_rows=20) as box:
        assert [r["x"] for r in box.run("many", sql, {"id": 1})] == list(range(1, 21))


def test_legitimate_queries_read_the_graph_bound_to_the_node(graph):
    db, ids = graph
    node = {"id": ids["Charlie Parker"], "name": "Charlie Parker", "type": "PERSON", "key": "charlie parker"}
    with tm.Sandbox(db) as box:
        rows = box.run(
            "fans",
            "SELECT e.name, r.rel, r.strength FROM relations r JOIN entities e ON e.id = r.src_id "
            "WHERE r.dst_id = :id ORDER BY e.name",
            node,
        )
        assert rows == [
            {"name": "Dizzy Gillespie", "rel": "same_as", "strength": "medium"},
            {"name": "Miles Davis", "rel": "refers_to", "strength": "strong"},
        ]
        assert box.run("me", "SELECT upper(:name) AS n, :type AS t", node) == [{"n": "CHARLIE PARKER", "t": "PERSON"}]
        assert box.run(
            "j", "SELECT json_extract(meta, '$.properties.born') AS born FROM entities WHERE id = :id", node
        ) == [{"born": 1920}]
        assert box.run("v", "SELECT count(*) AS n FROM graph_edges", node) == [{"n": 3}]
        assert box.run("t", "SELECT directionality FROM relation_types WHERE name = 'same_as'", node) == [
            {"directionality": "balanced"}
        ]


def test_the_sandbox_connection_cannot_write_even_without_the_authorizer(graph):
    db, _ = graph
    import apsw

    with tm.Sandbox(db) as box:
        box.conn.authorizer = None
        with pytest.raises(apsw.ReadOnlyError):
            box.conn.execute("DELETE FROM entities")


# -- template injection ------------------------------------------------------------------------------


def test_data_is_never_rendered_as_a_template(store, ids):
    from kgr.authoring import nodes as authoring

    evil = "{{#has_x}}{{/has_x}}{{> /etc/passwd}}{{{summary}}}{{=<% %>=}}<% name %>"
    out = authoring.manage_nodes(
        store, "create", [{"name": "Mallory " + evil, "summary": evil, "properties": {"note": "{{name}}"}}]
    )
    eid = out["results"][0]["node_id"]
    with store.write():
        tm.save_template(
            store,
            name="plain",
            structure="N={{name}}\nS={{summary}}\nP={{note}}\nV={{#v}}{{x}}{{/v}}",
            variables={"v": "SELECT :name AS x"},
        )
    docs, _ = tm.generate(store, [eid], template="plain")
    content = docs[0]["content"]
    assert content == f"N=Mallory {evil}\nS={evil}\nP={{{{name}}}}\nV=Mallory {evil}"


def test_partials_come_from_registered_templates_never_from_files(store, tmp_path, monkeypatch):
    # files a file-system loader would find: in the working directory, by name and with an extension
    monkeypatch.chdir(tmp_path)
    for name in ("secret", "secret.mustache"):
        (tmp_path / name).write_text("FILE CONTENT")
    for body, missing in (
        ("{{> /etc/passwd}}", "/etc/passwd"),
        ("x {{#a}}{{>secret}}{{/a}}", "secret"),
        ("x {{^a}}{{> secret}}{{/a}}", "secret"),
    ):
        with pytest.raises(tm.TemplateError, match=f"no template is named '{re.escape(missing)}'"), store.write():
            tm.save_template(store, name="p", structure=body)
    assert store.scalar("SELECT count(*) FROM templates WHERE name='p'") == 0


def test_partials_render_registered_templates_with_their_variables(store, ids):
    with store.write():
        tm.save_template(
            store,
            name="influences",
            structure="{{#has_infl}}Influenced by:{{#infl}} {{who}}{{/infl}}\n{{/has_infl}}",
            variables={
                "infl": "SELECT t.id AS target_id, t.name AS who FROM relations r JOIN entities t ON t.id = r.dst_id "
                "WHERE r.src_id = :id ORDER BY t.name"
            },
        )
        tm.save_template(store, name="header", structure="# {{name}}\n")
        tm.save_template(
            store, name="person", structure="{{> header}}{{summary}}\n{{> influences}}{{^x}}{{> header}}{{/x}}"
        )
    docs, _ = tm.generate(store, ["Miles Davis"], template="person")
    d = docs[0]
    assert d["status"] == "success", d
    assert d["content"] == "# Miles Davis\nAmerican jazz trumpeter\nInfluenced by: Charlie Parker\n# Miles Davis\n"
    assert d["dependencies"] == [ids["Miles Davis"], ids["Charlie Parker"]]  # the partial's variable's rows count


def test_a_changed_partial_invalidates_the_cached_documents_that_include_it(store):
    from kgr.authoring.templates import store_cache

    with store.write():
        tm.save_template(store, name="sig", structure="-- {{name}}")
        tm.save_template(store, name="card", structure="{{summary}} {{> sig}}")
    docs, writes = tm.generate(store, ["Charlie Parker"], template="card")
    with store.write():
        store_cache(store, writes)
    docs, _ = tm.generate(store, ["Charlie Parker"], template="card")
    assert docs[0]["from_cache"] and docs[0]["content"] == "American jazz saxophonist -- Charlie Parker"
    with store.write():
        tm.save_template(store, name="sig", structure="~ {{name}} ~")
    docs, _ = tm.generate(store, ["Charlie Parker"], template="card")
    assert not docs[0]["from_cache"] and docs[0]["content"] == "American jazz saxophonist ~ Charlie Parker ~"


def test_partial_cycles_are_refused_clearly(store):
    with store.write():
        tm.save_template(store, name="a", structure="A")
        tm.save_template(store, name="b", structure="B {{> a}}")
    with pytest.raises(tm.TemplateError, match=r"partials form a cycle: a > b > a"), store.write():
        tm.save_template(store, name="a", structure="A {{> b}}")
    with pytest.raises(tm.TemplateError, match=r"partials form a cycle: self > self"), store.write():
        tm.save_template(store, name="self", structure="{{#x}}{{> self}}{{/x}}")
    assert tm.get_template(store, "a")["structure"] == "A"  # the refused update changed nothing
    # a cycle made behind the check's back (the table edited by hand) is refused when rendering
    with store.write():
        store.execute("UPDATE templates SET body='A {{> b}}' WHERE name='a'")
    docs, _ = tm.generate(store, ["Charlie Parker"], template="b")
    assert docs[0]["status"] == "error" and "partials form a cycle: b > a > b" in docs[0]["message"]


def test_partial_depth_and_expansion_are_bounded(store):
    with store.write():
        tm.save_template(store, name="t0", structure="x")
        for i in range(1, tm.MAX_PARTIAL_DEPTH):
            tm.save_template(store, name=f"t{i}", structure=f"{{{{> t{i - 1}}}}}")
    docs, _ = tm.generate(store, ["Charlie Parker"], template=f"t{tm.MAX_PARTIAL_DEPTH - 1}")
    assert docs[0]["content"] == "x"
    with pytest.raises(tm.TemplateError, match="nest deeper than"), store.write():
        tm.save_template(store, name="deeper", structure=f"{{{{> t{tm.MAX_PARTIAL_DEPTH - 1}}}}}")
    # each level includes the one below ten times: 10^6 copies, refused before any rendering
    with store.write():
        tm.save_template(store, name="b0", structure="y" * 10)
        for i in range(1, 5):
            tm.save_template(store, name=f"b{i}", structure=f"{{{{> b{i - 1}}}}}" * 10)
    with pytest.raises(tm.TemplateError, match="expands to more than"), store.write():
        tm.save_template(store, name="bomb", structure="{{> b4}}" * 10)


def test_a_template_in_use_as_a_partial_cannot_be_deleted(store):
    with store.write():
        tm.save_template(store, name="part", structure="P")
        tm.save_template(store, name="whole", structure="W {{> part}}")
    with pytest.raises(tm.TemplateError, match="included as a partial by 'whole'"), store.write():
        tm.delete_template(store, "part")
    with store.write():
        tm.delete_template(store, "whole")
        tm.delete_template(store, "part")
    assert store.scalar("SELECT count(*) FROM templates WHERE name IN ('part', 'whole')") == 0


@pytest.mark.parametrize("body", ["{{#open}}never closed", "{{/close}}", "{{#a}}x{{/b}}", "{{^a}}x {{#b}}y{{/b}}"])
def test_invalid_mustache_is_refused(store, body):
    with pytest.raises(tm.TemplateError), store.write():
        tm.save_template(store, name="bad", structure=body)


@pytest.mark.parametrize("name", ["has_x", "name", "1x", "a-b", "summary", ""])
def test_bad_variable_names_are_refused(store, name):
    with pytest.raises(tm.TemplateError, match="bad variable name"), store.write():
        tm.save_template(store, name="bad", structure="x", variables={name: "SELECT 1"})
