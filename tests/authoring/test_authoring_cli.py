"""kgr render and kgr template add|list|rm (CliRunner: stdout, stderr and exit status apart)."""

from __future__ import annotations

import orjson
from click.testing import CliRunner

from kgr.cli import cli


def run(*args, input=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input)


def test_template_add_list_render_rm(graph, tmp_path):
    db, ids = graph
    body = tmp_path / "person.mustache"
    body.write_text("# {{name}}\n{{#fans}}- {{fan}}\n{{/fans}}")
    res = run(
        "template",
        "add",
        "person",
        "--body",
        body,
        "--type",
        "PERSON",
        "--db",
        db,
        "--var",
        "fans=SELECT e.id, e.name AS fan FROM relations r JOIN entities e ON e.id = r.src_id "
        "WHERE r.dst_id = :id ORDER BY e.name",
    )
    assert res.exit_code == 0, res.output
    rec = orjson.loads(res.stdout)
    assert rec["name"] == "person" and rec["variables"] == ["fans"]

    res = run("template", "list", "--db", db)
    assert res.stdout.splitlines() == ["default\t-\taliases,incoming,observations,outgoing", "person\tPERSON\tfans"]

    res = run("render", "Charlie Parker", "--db", db)
    assert res.exit_code == 0 and res.stdout == "# Charlie Parker\n- Dizzy Gillespie\n- Miles Davis\n"
    res = run("render", str(ids["Charlie Parker"]), "--db", db, "--json")
    doc = orjson.loads(res.stdout)
    assert doc["from_cache"] is True and doc["template_used"] == "person"
    res = run("render", "Charlie Parker", "--template", "default", "--db", db)
    assert res.stdout.startswith("# Charlie Parker\n\n*PERSON*")

    # adding again needs --replace
    res = run("template", "add", "person", "--body", body, "--db", db)
    assert res.exit_code == 1 and "already exists" in res.stderr
    res = run("template", "add", "person", "--body", "-", "--replace", "--db", db, input="{{name}}!")
    assert res.exit_code == 0
    assert run("render", "Charlie Parker", "--db", db).stdout == "Charlie Parker!\n"

    res = run("template", "rm", "person", "--db", db)
    assert res.exit_code == 0 and orjson.loads(res.stdout)["cached_documents_removed"] == 1
    res = run("template", "rm", "default", "--db", db)
    assert res.exit_code == 1 and "cannot be deleted" in res.stderr


def test_refusals_exit_1_with_one_clear_line(graph, tmp_path):
    db, _ = graph
    body = tmp_path / "b.mustache"
    body.write_text("{{name}}")
    res = run("template", "add", "evil", "--body", body, "--db", db, "--var", "x=SELECT 1; DROP TABLE entities")
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.startswith("Error: variable x: ") and "not allowed" in res.stderr
    res = run("template", "add", "evil", "--body", body, "--db", db, "--var", "no-equals-sign")
    assert res.exit_code == 2 and "bad --var" in res.stderr
    assert "evil" not in run("template", "list", "--db", db).stdout
    res = run("render", "qqqxxz zzvv", "--db", db)
    assert res.exit_code == 1 and "no node matches" in res.stderr


def test_render_migrates_a_database_from_before_templates(tmp_path):
    import apsw

    from kgr.store import migrations

    db = tmp_path / "old.sqlite"
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(migrations.MIGRATIONS[0][1])
    conn.execute("PRAGMA user_version=1")
    conn.execute("INSERT INTO entities(key, name, type, norm, description) VALUES ('ada', 'Ada', 'PERSON', 'ada', 'x')")
    conn.close()
    res = run("render", "Ada", "--db", db)
    assert res.exit_code == 0, res.stderr
    assert res.stdout.startswith("# Ada\n\n*PERSON*\n\nx\n")
    assert run("template", "list", "--db", db).stdout.startswith("default\t")
