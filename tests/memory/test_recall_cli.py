"""kgr remember, kgr recall and kgr memories through click's CliRunner (stub embedder):
stdout records, stderr lines and exit codes, asserted separately."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from kgr.cli import cli

ENV = {"KGR_EMBED_STUB": "true"}


@pytest.fixture()
def run():
    runner = CliRunner()

    def invoke(*args, input=None):
        return runner.invoke(cli, [str(a) for a in args], input=input, env=ENV)

    return invoke


def records(data: bytes) -> list[dict]:
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def test_remember_and_recall(run, tmp_path):
    db = tmp_path / "mem.sqlite"
    r = run(
        "remember",
        "Frank Lee approves the quarterly budget.",
        "--importance",
        "0.7",
        "--tag",
        "finance",
        "--tag",
        "people",
        "--db",
        db,
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    [mem] = records(r.stdout_bytes)
    assert mem["kind"] == "memory" and mem["created"] is True and mem["tags"] == ["finance", "people"]
    plain = run("remember", "The office plants are watered on Mondays.", "--db", db)
    assert plain.exit_code == 0 and plain.stdout.startswith("remembered ")
    again = run("remember", "Frank Lee approves the quarterly budget.", "--db", db)
    assert again.stdout.startswith(f"already remembered {mem['id']}")
    stdin = run("remember", "-", "--db", db, "--json", input="Gina Ortiz reviews security exceptions.\n")
    assert records(stdin.stdout_bytes)[0]["text"] == "Gina Ortiz reviews security exceptions."

    out = run("recall", "who approves the budget", "--db", db, "--json", "--k", "2")
    assert out.exit_code == 0, out.stderr
    rows = records(out.stdout_bytes)
    assert rows[0]["kind"] == "recall" and rows[0]["id"] == mem["id"] and rows[0]["access_count"] == 1
    text = run("recall", "who approves the budget", "--db", db)
    assert text.exit_code == 0 and mem["id"] in text.stdout and "recalled 2x" in text.stdout
    ro = run("recall", "budget", "--db", db, "--json", "--no-touch")
    assert records(ro.stdout_bytes)[0]["access_count"] == 2
    none = run("recall", "zebra crossing", "--db", db, "--no-graph")
    assert none.exit_code == 0 and none.stdout.strip() == "no memories"


def test_export_import_history_and_consolidate(run, tmp_path):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    run("remember", "Hana Sato maintains the ingest pipeline.", "--db", a)
    exported = run("memories", "export", "--db", a)
    assert exported.exit_code == 0 and "exported 1 memories" in exported.stderr
    out_file = tmp_path / "m.jsonl"
    assert run("memories", "export", "--db", a, "-o", out_file).exit_code == 0
    assert out_file.read_bytes() == exported.stdout_bytes
    imp = run("memories", "import", out_file, "--db", b, "--json")
    assert imp.exit_code == 0, imp.stderr
    assert records(imp.stdout_bytes)[0]["imported"] == 1
    assert run("memories", "export", "--db", b).stdout_bytes == exported.stdout_bytes
    hist = run("memories", "history", "Hana Sato", "--db", b)
    obs = records(hist.stdout_bytes)
    assert obs and obs[0]["kind"] == "observation" and obs[0]["entity"] == "Hana Sato"
    cons = run("memories", "consolidate", "--db", b, "--dry-run")
    assert cons.exit_code == 0 and "would merge 0 memories into 0" in cons.stderr


@pytest.mark.parametrize(
    "args,code,msg",
    [
        (["remember", "   "], 2, "Error: the memory is empty"),
        (["remember", "x", "--importance", "1.5"], 2, "--importance"),
        (["recall", "anything", "--db", "{tmp}/none.sqlite"], 1, "database not found"),
        (["recall", "x", "--as-of", "yesterday"], 2, "neither milliseconds nor an ISO date"),
        (["memories", "import", "{tmp}/bad.jsonl"], 1, "line 1"),
    ],
)
def test_errors_are_one_line_and_an_exit_status(tmp_path, args, code, msg):
    (tmp_path / "bad.jsonl").write_text('{"kind": "memory"}\n')
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "--db" not in argv:
        argv += ["--db", str(tmp_path / "mem.sqlite")]
    runner = CliRunner()
    r = runner.invoke(cli, argv, env=ENV)
    assert r.exit_code == code, (r.stdout, r.stderr)
    assert msg in r.stderr and "Traceback" not in r.stderr


def test_writes_take_the_writer_lock(run, tmp_path):
    from kgr.store.lock import WriterLock

    db = tmp_path / "mem.sqlite"
    run("remember", "Ivan Petrov hosts the onboarding.", "--db", db)
    with WriterLock(db):
        busy = run("remember", "Another memory.", "--db", db)
        assert busy.exit_code == 1 and "being written by another kgr process" in busy.stderr
        refused = run("recall", "onboarding", "--db", db)
        assert refused.exit_code == 1 and "--no-touch" in refused.stderr
        ro = run("recall", "onboarding", "--db", db, "--no-touch", "--json")
        assert ro.exit_code == 0 and records(ro.stdout_bytes)
