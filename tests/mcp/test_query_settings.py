"""`kgr query` and the MCP tool hybrid_query read the same settings: the same question with the
same configuration gets the same passages with the same scores from both."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from serve_fixtures import Mcp, make_service

from kgr import config
from kgr.cli import cli
from kgr.mcp import server as serve

DOCS = {
    "ledger.md": "# Ledger Service\n\nThe Ledger Service stores every settlement record. It is owned by the "
    "Treasury Team and depends on the Fare Engine.\n\n## Retention\n\nSettlement records are kept for seven years.\n",
    "fare.md": "# Fare Engine\n\nThe Fare Engine computes fares and caps. Alice Moreau is on call for the Fare "
    "Engine. It uses the Tariff Tables.\n",
    "tariff.md": "# Tariff Tables\n\nThe Tariff Tables define the price of each zone. The Pricing Board approves "
    "every change to the Tariff Tables.\n",
    "oncall.md": "# On call\n\nThe on-call rota names who answers pages: Alice Moreau for the Fare Engine, Bob "
    "Lind for the Ledger Service.\n",
    "board.md": "# Pricing Board\n\nThe Pricing Board meets monthly. It approves fare changes and cites the "
    "Tariff Tables.\n",
    "glossary.md": "# Glossary\n\nA fare cap is the most a rider pays in a day. A zone is an area of the "
    "network with one price.\n",
}

# Not the defaults: a tool that kept its own k=10, hops=2 would answer differently.
CONFIG = """\
embed:
  stub: true
normalize:
  workers: 1
retrieval:
  k: 3
  hops: 1
  rels: [uses, depends_on, owned_by]
  weights:
    semantic: 0.6
    hop: 0.3
    rel: 0.1
"""

QUESTIONS = ["who is on call for the fare engine", "how long are settlement records kept", "who approves fare changes"]


@pytest.fixture(scope="module")
def small_kb(tmp_path_factory):
    base = tmp_path_factory.mktemp("same-answer")
    root = base / "kb"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    cfg = base / "config.yaml"
    cfg.write_text(CONFIG, encoding="utf-8")
    db = base / "kb.sqlite"
    res = CliRunner().invoke(cli, ["ingest", str(root), "--db", str(db), "--config", str(cfg)])
    assert res.exit_code == 0, res.output
    return db, cfg


def _cli_answer(db, cfg, question, *extra):
    res = CliRunner().invoke(cli, ["query", question, "--db", str(db), "--config", str(cfg), "--json", *extra])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    return [(r["chunk_id"], r["score"]) for r in rows]


def _mcp_answer(mcp, question, **args):
    r = mcp.call("hybrid_query", {"query": question, **args})
    assert not r.is_error, r
    return [(x["chunk_id"], x["score"]) for x in r.structured_content["results"]]


def test_kgr_query_and_hybrid_query_give_the_same_answer(small_kb):
    db, cfg = small_kb
    svc = make_service(db, config.load(str(cfg)))
    try:
        mcp = Mcp(serve.build_server(svc, "graphrag"))
        for question in QUESTIONS:
            from_cli = _cli_answer(db, cfg, question)
            assert len(from_cli) == 3, question  # retrieval.k from the file
            assert _mcp_answer(mcp, question) == from_cli, question
        # arguments given to either still win over the settings, the same way
        question = QUESTIONS[0]
        assert _mcp_answer(mcp, question, k=5, hops=2, mode="hybrid") == _cli_answer(
            db, cfg, question, "--k", "5", "--hops", "2", "--mode", "hybrid"
        )
    finally:
        svc.close()
