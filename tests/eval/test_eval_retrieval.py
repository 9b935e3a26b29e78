"""eval retrieval: the three dataset layouts and the metrics (no model needed)."""

import json

import pytest

from kgr.errors import KgrError
from kgr.eval import retrieval as evalret


def test_metrics_by_hand():
    s = evalret.score_ranking(["a", "x", "b", "y"], {"a", "b"})
    assert s["recall@2"] == 0.5 and s["recall@5"] == 1.0
    assert s["mrr@10"] == 1.0
    # dcg = 1/log2(2) + 1/log2(4) = 1.5; idcg = 1 + 1/log2(3)
    assert s["ndcg@10"] == pytest.approx(1.5 / (1 + 1 / 1.5849625), rel=1e-6)
    assert evalret.score_ranking(["x", "y"], {"a"})["mrr@10"] == 0.0


def test_eval_folder_keeps_only_complete_gold(tmp_path):
    (tmp_path / "things_corpus.json").write_text(
        json.dumps([{"title": "A", "text": "alpha"}, {"title": "B", "text": "beta"}])
    )
    (tmp_path / "gold.json").write_text(
        json.dumps(
            [
                {"id": "1", "question": "q1", "type": "bridge", "gold_corpus_idx": [0, 1], "gold_complete": True},
                {"id": "2", "question": "q2", "type": "bridge", "gold_corpus_idx": [1], "gold_complete": False},
            ]
        )
    )
    ds = evalret.load_dataset(tmp_path)
    assert [q.id for q in ds.questions] == ["1"]
    assert ds.questions[0].gold == {"p/0.md", "p/1.md"}
    ds.write_corpus(tmp_path / "out")
    assert (tmp_path / "out" / "p" / "1.md").read_text() == "# B\n\nbeta\n"


def test_beir_folder(tmp_path):
    (tmp_path / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "T", "text": "x"}\n{"_id": "d/2", "title": "", "text": "y"}\n'
    )
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "what"}\n{"_id": "q2", "text": "unjudged"}\n')
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td/2\t1\n")
    ds = evalret.load_dataset(tmp_path, split="test")
    assert [(q.id, q.gold) for q in ds.questions] == [("q1", {"p/d_2.md"})]
    with pytest.raises(KgrError, match="qrels"):
        evalret.load_dataset(tmp_path, split="dev")


def test_golden_folder_and_unknown_layout(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "annotations").mkdir()
    (tmp_path / "annotations" / "queries.jsonl").write_text(
        '{"id": "D1", "q": "who", "gold_docs": ["a.md"], "kind": "lookup"}\n'
    )
    ds = evalret.load_dataset(tmp_path)
    assert ds.kind == "golden" and ds.questions[0].gold == {"a.md"} and ds.questions[0].type == "lookup"
    with pytest.raises(KgrError, match="no dataset"):
        evalret.load_dataset(tmp_path / "docs")
