"""Graph mode searches for what the best page leaves out: the question's words that page does not
write find the page of the question's other half, which the whole question's words rank below
look-alikes of the first half."""

import sys
from pathlib import Path

from kgr.config import RetrievalWeights
from kgr.retrieval.query import _is_question, hybrid_query
from kgr.stages.load import load
from kgr.store import Store, vectors

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from test_placement import _graph, _records  # noqa: E402
from test_vectors import CountingFake  # noqa: E402

QUESTION = "What is the minimum retention period for the records produced by the nightly payout job?"
PAGES = {
    "policy.md": (
        "Records Policy",
        "The minimum retention period for payout job records is ten years, says Vera Lind.",
    ),
    "person.md": ("Vera Lind", "Vera Lind keeps the books."),
    "runner.md": ("Payout Runner", "The nightly run produced the settlement files of each day."),
}
# look-alikes of the policy: the question's words it writes, none of those it lacks ("produced", "nightly")
LOOKALIKES = [f"Notes {i}: payout job records have a retention period of {i} days, at the minimum." for i in range(6)]
FILLER = [f"The nightly lunch {i} is on the roof terrace." for i in range(24)]  # what a knowledge base also holds


def _kb(path: Path):
    store = Store(path)
    for p, (title, text) in PAGES.items():
        load(_records(p, title, text), store)
    for i, text in enumerate(LOOKALIKES):
        load(_records(f"notes{i}.md", f"Notes {i}", text), store)
    for i, text in enumerate(FILLER):
        load(_records(f"lunch{i}.md", f"Lunch {i}", text), store)
    # a graph for graph mode to walk: the policy names a person with a page
    _graph(store, {1: "Vera Lind"}, {"person.md": 1}, {("policy.md", 1): 1.0})
    fake = CountingFake()
    vectors.embed_pending(store, lambda: fake)
    return store, (lambda text: fake._vec(text))


def _paths(store, embed, **weights) -> list[str]:
    res = hybrid_query(store, QUESTION, k=40, mode="graph", embed_query=embed, weights=RetrievalWeights(**weights))
    return [r["path"] for r in res["results"]], res["results"]


def test_the_words_the_best_page_lacks_find_the_other_half_of_the_question(tmp_path):
    store, embed = _kb(tmp_path / "kb.sqlite")
    without, _ = _paths(store, embed, residual=0.0, place=0.0)
    assert without[0] == "policy.md"
    assert without.index("runner.md") > 1  # the look-alikes outrank it on the whole question's words

    paths, results = _paths(store, embed, place=0.0)  # the shipped weight
    assert paths[:2] == ["policy.md", "runner.md"]
    runner = results[1]
    assert runner["scores"]["rest"] == 1.0
    # the reason names the words searched: those the policy page does not write
    assert "for what the best page lacks (produced nightly)" in runner["why"]
    assert results[0]["scores"]["rest"] == 0.0  # the best page's own chunks get nothing from it


def test_a_question_the_best_page_covers_searches_nothing_more(tmp_path):
    store, embed = _kb(tmp_path / "kb.sqlite")
    res = hybrid_query(store, "the minimum retention period of finance records", k=8, mode="graph", embed_query=embed)
    assert res["results"][0]["path"] == "policy.md"
    assert all(r["scores"]["rest"] == 0.0 for r in res["results"])
    assert not any("lacks" in r["why"] for r in res["results"])


def test_a_claim_to_check_has_no_other_half_to_look_for(tmp_path):
    store, embed = _kb(tmp_path / "kb.sqlite")
    claim = "The minimum retention period for the records produced by the nightly payout job is ten years."
    res = hybrid_query(store, claim, k=40, mode="graph", embed_query=embed)
    assert res["results"][0]["path"] == "policy.md"
    assert all(r["scores"]["rest"] == 0.0 for r in res["results"])


def test_what_counts_as_a_question():
    assert _is_question("Which team owns the ledger?")
    assert _is_question("who owns the fare engine")  # no question mark, an interrogative first word
    assert _is_question("  How do I rotate keys")
    assert not _is_question("Aspirin lowers the risk of a second stroke.")
    assert not _is_question("deploy failed E4012")


def test_a_page_the_graph_brings_in_does_not_stand_above_the_page_the_lacking_words_find(tmp_path, monkeypatch):
    from kgr.retrieval import query

    store, embed = _kb(tmp_path / "kb.sqlite")
    # the graph's hop weighs heavily: the person's page, reached through the policy's mention of her and
    # matching no word of the question, outranks the runner's page, a keyword match and the first page the
    # words the policy lacks ("produced nightly") find
    heavy = {"place": 0.0, "hop": 1.0}
    monkeypatch.setattr(query, "RESIDUAL_DIRECT", 0)
    before, _ = _paths(store, embed, **heavy)
    assert before[0] == "policy.md"
    assert before.index("person.md") < before.index("runner.md")

    monkeypatch.setattr(query, "RESIDUAL_DIRECT", 10)
    after, results = _paths(store, embed, **heavy)
    assert after[:3] == ["policy.md", "runner.md", "person.md"]  # the graph's page comes next, not lost
    assert "match #1 for what the best page lacks" in results[1]["why"]
