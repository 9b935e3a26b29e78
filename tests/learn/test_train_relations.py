"""kgr train relations: a classifier learned from an annotated folder states what it was taught.

The synthetic corpus uses a verb no rule of kgr.stages.relations knows ("feeds"), so a
relation found in a new document can only come from the weights trained here.
"""

import json

import pytest

from kgr.learn import relations as learn
from kgr.learn.corpus import locate, read_corpus
from kgr.stages.relmodel import LABELS, RelationModel, using_model

SERVICES = ["Amber", "Birch", "Cobalt", "Dune", "Ember", "Fjord", "Garnet", "Heron", "Indigo", "Juniper"]
STORES = ["Kestrel", "Lumen", "Marlin", "Nimbus", "Opal", "Pike", "Quartz", "Raven", "Sable", "Tundra"]


def _corpus(root, pairs):
    docs = root / "docs"
    ann = root / "annotations"
    docs.mkdir(parents=True)
    ann.mkdir()
    entities, mentions, relations = {}, [], []
    for k, (svc, store) in enumerate(pairs):
        a, b = f"{svc} Service", f"{store} Store"
        text = (
            f"# {a}\n\n{a} feeds {b} every night.\n\nThe weather report mentions {a} and {b} without saying more.\n"
            f"\nThe Harbor Office reviewed {a} in March.\n"
        )
        path = f"doc{k:02d}.md"
        (docs / path).write_text(text)
        for surface, typ in ((a, "SERVICE"), (b, "COMPONENT"), ("Harbor Office", "LOCATION")):
            entities.setdefault(surface, {"id": f"E{len(entities)}", "name": surface, "type": typ, "aliases": []})
            for n in range(1, text.count(surface) + 1):
                start = -1
                for _ in range(n):
                    start = text.index(surface, start + 1)
                mentions.append(
                    {
                        "doc": path,
                        "surface": surface,
                        "entity": entities[surface]["id"],
                        "n": n,
                        "start": start,
                        "end": start + len(surface),
                        "kind": "name",
                    }
                )
        relations.append(
            {
                "src": entities[a]["id"],
                "rel": "uses",
                "dst": entities[b]["id"],
                "doc": path,
                "evidence": f"{a} feeds {b} every night.",
            }
        )
    for name, rows in (("entities", entities.values()), ("mentions", mentions), ("relations", relations)):
        (ann / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return _corpus(tmp_path_factory.mktemp("taught"), list(zip(SERVICES, STORES)))


def test_gold_mentions_and_evidence_are_found_in_kgrs_text(corpus):
    c = read_corpus(corpus)
    text = (corpus / "docs" / "doc03.md").read_text()
    gold = locate(text, c, "doc03.md")
    assert len(gold.spans) == 7  # the heading, the statement, the report, the review: 1 + 2 + 2 + 2
    ((src, rel, dst, where),) = gold.relations
    assert rel == "uses" and text[where[0] : where[1]] == "Dune Service feeds Nimbus Store every night."
    at = text.index("Nimbus Store")
    assert gold.entity_at(at, at + len("Nimbus Store")) == dst
    assert gold.entity_at(0, 1) is None


def test_candidates_are_labelled_inside_the_evidence_only(corpus):
    data = learn.collect(corpus)
    assert len(data.docs) == 10
    labels = [e.label for e in data.examples]
    assert labels.count("uses>") >= 10  # each document's statement
    # the same pair in the weather sentence is related in the document, but that sentence does
    # not say it: it is left out of training rather than called "none"
    assert None in labels
    assert "none" in labels  # the Harbor Office is related to nothing
    statement = [e for e in data.examples if e.label == "uses>"]
    assert all("k=sentence" in e.features or "k=subject" in e.features for e in statement)
    assert any("w=feed" in e.features for e in statement)


def test_a_trained_model_finds_the_taught_relation_in_an_unseen_document(corpus, tmp_path, analyse_learned):
    out = tmp_path / "relations.npz"
    summary = learn.train([corpus], out)
    assert out.exists() and summary["features"] > 0
    model = RelationModel.load(out)
    assert model.labels == list(LABELS) and 0 < model.threshold_for("uses") < 1
    text = "# Vesper Service\n\nVesper Service feeds Willow Store every night.\n"
    with using_model(lambda path: model):
        rels = analyse_learned(text)
    found = {(r["src"], r["rel"], r["dst"]) for r in rels}
    assert ("Vesper Service", "uses", "Willow Store") in found
    (rel,) = [r for r in rels if r["dst"] == "Willow Store"]
    assert 0 < rel["confidence"] <= 1 and "feeds" in rel["evidence"]["sentence"]
    assert rel["pattern"].startswith("learned:")
    # the rules alone do not know "feeds": the relation came from the weights
    assert not [r for r in analyse_learned(text, rules_only=True) if r["dst"] == "Willow Store"]


def test_training_is_deterministic(corpus, tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    learn.train([corpus], a)
    learn.train([corpus], b)
    ma, mb = RelationModel.load(a), RelationModel.load(b)
    assert ma.index == mb.index and (ma.weights == mb.weights).all() and ma.threshold == mb.threshold
    assert ma.dense is not None and mb.dense is not None
    assert ma.dense.keys == mb.dense.keys and (ma.dense.w1 == mb.dense.w1).all() and (ma.dense.w2 == mb.dense.w2).all()


def test_the_dense_head_is_saved_with_the_model_and_decides_with_it(corpus, tmp_path):
    import numpy as np

    data = learn.collect(corpus)
    assert all(e.view is not None and e.view.shape == (768,) for e in data.examples)
    model = learn.fit(data.examples, threshold=0.5)
    assert model.dense is not None and "k=sentence" in model.dense.keys
    model.save(tmp_path / "m.npz")
    loaded = RelationModel.load(tmp_path / "m.npz")
    assert loaded.cascade == model.cascade and loaded.dense.keys == model.dense.keys
    vectors = np.stack([e.view for e in data.examples])
    features = [e.features for e in data.examples]
    before, after = model.dense.probabilities(vectors, features), loaded.dense.probabilities(vectors, features)
    assert np.allclose(before, after, atol=0.02)  # the weights are stored as float16
    assert np.allclose(after.sum(axis=1), 1.0, atol=1e-4)
    # the head learned the taught relation from the view: the statement, not the weather report
    statement = [i for i, e in enumerate(data.examples) if e.label == "uses>"]
    unrelated = [i for i, e in enumerate(data.examples) if e.label == "none"]
    uses = LABELS.index("uses>")
    assert after[statement, uses].mean() > 0.5 > after[unrelated, uses].mean()
    # only what the sparse model finds plausible is read, and mixed half and half
    sparse = model.probabilities(features)
    top = sparse[:, 1:].max(axis=1)
    model.cascade = float(np.sort(top)[len(top) // 2])  # a cascade that reads about half of them
    rows = model.reads(sparse)
    assert 0 < len(rows) < len(features) and (top[rows] >= model.cascade).all()
    mixed = learn.example_probabilities(model, data.examples)
    rest = np.setdiff1d(np.arange(len(features)), rows)
    assert np.array_equal(mixed[rest], sparse[rest])
    assert np.allclose(mixed[rows], (sparse[rows] + before[rows]) / 2)


def test_a_pair_reader_is_fine_tuned_saved_and_decides_with_the_model(corpus, tmp_path, monkeypatch, analyse_learned):
    import numpy as np

    from kgr.stages import relview

    monkeypatch.setattr(learn, "READER_EPOCHS", 12.0)  # a few dozen candidates: more passes to learn from
    data = learn.collect(corpus)
    model = learn.fit(data.examples, threshold=0.5, reader=True)
    assert model.dense is not None and model.reader  # a third opinion beside the dense head
    # only adapters and the output layer are stored, in a small file
    assert all(k.startswith("reader_") for k in model.reader) and len(model.reader) == 2 + 6 * 4 * 2
    model.save(tmp_path / "m.npz")
    assert (tmp_path / "m.npz").stat().st_size < 3_000_000
    loaded = RelationModel.load(tmp_path / "m.npz")
    assert loaded.cascade == model.cascade and set(loaded.reader) == set(model.reader)
    # what the reader reads: the evidence with both names marked and typed
    statement = [e for e in data.examples if e.label == "uses>"]
    text = learn.reader_text(statement[0])
    assert "@ * " in text and "# ^ " in text and "feeds" in text
    assert text.index("Service @") < text.index("feeds") < text.index("Store #")
    got = loaded.pair_reader().probabilities([learn.reader_text(e) for e in data.examples])
    assert got.shape == (len(data.examples), len(LABELS)) and np.allclose(got.sum(axis=1), 1.0, atol=1e-4)
    uses = LABELS.index("uses>")
    unrelated = [i for i, e in enumerate(data.examples) if e.label == "none"]
    taught = [i for i, e in enumerate(data.examples) if e.label == "uses>"]
    assert got[taught, uses].mean() > 0.5 > got[unrelated, uses].mean()
    # the read rows are the mean of the sparse model's, the dense head's and the reader's probabilities
    sparse = loaded.probabilities([e.features for e in data.examples])
    rows = loaded.reads(sparse)
    features = [data.examples[i].features for i in rows]
    head = loaded.dense.probabilities(np.stack([data.examples[i].view for i in rows]), features)
    mixed = learn.example_probabilities(loaded, data.examples)
    assert len(rows) and np.allclose(mixed[rows], (sparse[rows] + head + got[rows]) / 3, atol=1e-5)
    # extraction of a new document reads it the same way
    doc = "# Vesper Service\n\nVesper Service feeds Willow Store every night.\n"
    with using_model(lambda path: loaded):
        found = {(r["src"], r["rel"], r["dst"]) for r in analyse_learned(doc)}
    assert ("Vesper Service", "uses", "Willow Store") in found
    # without the transformer, the sparse model decides alone
    monkeypatch.setattr(
        relview.PairReader, "from_arrays", classmethod(lambda cls, arrays: (_ for _ in ()).throw(OSError("gone")))
    )
    alone = RelationModel.load(tmp_path / "m.npz")
    assert alone.read([(("x", (0, 1), (0, 1)), "x")])["reader"] is None
    without = learn.example_probabilities(alone, data.examples)
    assert np.allclose(without[rows], (sparse[rows] + head) / 2, atol=1e-5)


def test_a_model_without_a_dense_head_or_reader_decides_with_the_sparse_model(corpus, monkeypatch, learned_extractor):
    from kgr.stages import relmodel, relview
    from kgr.stages.textmodel import parse_document

    data = learn.collect(corpus, views=False)
    assert all(e.view is None for e in data.examples)
    model = learn.fit(data.examples, threshold=0.5)
    assert model.dense is None and len(model.reads(model.probabilities([["k=sentence"]]))) == 0
    dense = learn.fit(learn.collect(corpus).examples, threshold=0.5)
    monkeypatch.setattr(relview, "default_reader", lambda: None)
    doc = parse_document("# Vesper Service\n\nVesper Service feeds Willow Store every night.\n", path="new.md")
    spans = learned_extractor.mentions(doc)
    decided = relmodel.decision(doc, spans, [], model=dense)
    assert len(decided.rows)  # the head would read the statement, but the reader is missing
    (alone,) = relmodel.decide_all([decided])
    assert alone == relmodel.Decision(doc, [], dense, decided.cands, decided.probs).finish()


def test_the_reader_pools_each_name_in_its_own_sentence():
    import numpy as np

    from kgr.stages.relview import default_reader

    reader = default_reader()
    first = "Dune Service feeds Nimbus Store every night."
    second = "The weather report mentions Nimbus Store and Dune Service."
    a = (first.index("Nimbus Store"), first.index("Nimbus Store") + 12)
    b = (second.index("Nimbus Store"), second.index("Nimbus Store") + 12)
    vectors = reader.vectors([(first, (0, 12), a), (second, b, (-5, 3)), (first, (0, 12), a)])
    assert vectors.shape == (3, 2 * reader.dim)
    assert np.array_equal(vectors[0], vectors[2])  # the same evidence reads the same
    assert not np.allclose(vectors[0, reader.dim :], vectors[1, : reader.dim])  # one name, two contexts
    assert np.abs(vectors[0, : reader.dim] - vectors[0, reader.dim :]).max() > 0.1  # two names, one context
    assert not vectors[1, reader.dim :].any()  # a name outside the evidence reads as zeros


def test_a_folder_without_annotations_is_a_clear_error(tmp_path):
    from kgr.errors import KgrError

    (tmp_path / "docs").mkdir()
    with pytest.raises(KgrError, match="mentions.jsonl not found"):
        read_corpus(tmp_path)


def _probs(rows):
    import numpy as np

    out = np.zeros((len(rows), len(LABELS)), dtype=np.float32)
    for i, (label, p) in enumerate(rows):
        out[i, LABELS.index(label)] = p
        out[i, 0] = 1 - p
    return out


def test_thresholds_are_chosen_for_the_relations_the_pipeline_keeps():
    # the model alone says "A located_in B" with confidence, but B is no place: extraction
    # drops it (kgr.stages.relations.types_ok), so the learner's decision must drop it too
    no_place = learn.Example("c", "d.md", [], "none", ("A", "e1"), ("B", "e2"), allowed=frozenset({"uses>"}))
    place = learn.Example("c", "d.md", [], "none", ("A", "e1"), ("C", "e3"), allowed=frozenset({"located_in>"}))
    learn._READINGS.clear()
    got = learn.decide([no_place, place], _probs([("located_in>", 0.9), ("located_in>", 0.9)]), 0.5)
    assert got[("c", "d.md")] == {("e1", "located_in", "e3")}


def test_a_corpus_is_scored_on_the_relation_types_it_annotates(tmp_path):
    from kgr.learn.corpus import Corpus, Scope

    corpus = Corpus(
        tmp_path,
        "c",
        {"e1": "ORG", "e2": "LOCATION", "e3": "ORG"},
        {"d.md": []},
        {"d.md": [{"src": "e1", "rel": "located_in", "dst": "e2"}]},
        Scope(relation_types=frozenset({"located_in"}), entity_types=None),
    )
    data = [learn.CorpusData(corpus, [], ["d.md"])]
    right = learn.Example("c", "d.md", [], "located_in>", ("A", "e1"), ("B", "e2"))
    unjudged = learn.Example("c", "d.md", [], "none", ("A", "e1"), ("C", "e3"))
    learn._READINGS.clear()
    probs = _probs([("located_in>", 0.9), ("uses>", 0.9)])
    # a "uses" edge is neither right nor wrong in a corpus that annotates located_in only
    assert learn.pair_scores(data, [right, unjudged], probs, 0.5)["c"]["precision"] == 1.0


def test_a_relation_the_model_adds_at_no_measured_gain_is_not_claimed(tmp_path, monkeypatch):
    from kgr.learn.corpus import Corpus, Scope

    gold = [{"src": "e1", "rel": "uses", "dst": "e2"}, {"src": "e1", "rel": "uses", "dst": "e3"}]
    types = {"e1": "PRODUCT", "e2": "PRODUCT", "e3": "PRODUCT", "e4": "PRODUCT"}
    corpus = Corpus(tmp_path, "c", types, {"d.md": []}, {"d.md": gold}, Scope(relation_types=None, entity_types=None))
    data = [learn.CorpusData(corpus, [], ["d.md"])]
    said = learn.Example("c", "d.md", ["rule=uses>"], "uses>", ("Kiln", "e1"), ("Tarn", "e2"))
    right = learn.Example("c", "d.md", [], "uses>", ("Kiln", "e1"), ("Brook", "e3"))
    wrong = learn.Example("c", "d.md", [], "none", ("Kiln", "e1"), ("Scree", "e4"))
    examples = [said, right, wrong]
    probs = _probs([("uses>", 0.9), ("uses>", 0.6), ("uses>", 0.6)])
    # the model alone adds one right and one wrong relation: F1 0.8 with them, 0.67 without
    learn._READINGS.clear()
    monkeypatch.setattr(learn, "TOLERANCE", 0.0)
    thresholds, _veto, score = learn.best_threshold(data, examples, probs)
    assert thresholds["uses"] <= 0.6 and score == pytest.approx(0.8)
    # a gain smaller than the tolerance is no gain: the model's own claims are left out
    monkeypatch.setattr(learn, "TOLERANCE", 0.2)
    thresholds, _veto, score = learn.best_threshold(data, examples, probs)
    assert thresholds["uses"] > 0.6 and score == pytest.approx(2 / 3)


def test_documents_decided_together_get_what_each_gets_alone(corpus, tmp_path, learned_extractor):
    from kgr.stages import relmodel
    from kgr.stages.textmodel import parse_document

    model = learn.fit(learn.collect(corpus).examples, threshold=0.3)
    texts = [
        "# Vesper Service\n\nVesper Service feeds Willow Store every night.\n",
        "# Alder Service\n\nThe weather report mentions Alder Service.\n\nAlder Service feeds Cedar Store at dawn.\n",
    ]
    decisions = []
    for k, text in enumerate(texts):
        doc = parse_document(text, path=f"new{k}.md")
        decisions.append(relmodel.decision(doc, learned_extractor.mentions(doc), [], model=model))
    assert all(len(d.rows) for d in decisions)  # both read by the dense head
    together = relmodel.decide_all(decisions)
    alone = [relmodel.decide_all([d])[0] for d in decisions]
    assert [[(r["src"], r["rel"], r["dst"]) for r in rels] for rels in together] == [
        [(r["src"], r["rel"], r["dst"]) for r in rels] for rels in alone
    ]
    assert ("Vesper Service", "uses", "Willow Store") in {(r["src"], r["rel"], r["dst"]) for r in together[0]}
    for a, b in zip(together, alone):
        assert [r["confidence"] for r in a] == pytest.approx([r["confidence"] for r in b], abs=1e-3)


def test_each_typed_corpus_reads_the_types_of_a_model_trained_on_the_others_only(tmp_path, monkeypatch):
    from kgr.eval import typetrain

    first = _corpus(tmp_path / "first", list(zip(SERVICES[:5], STORES[:5])))
    second = _corpus(tmp_path / "second", list(zip(SERVICES[5:], STORES[5:])))
    trained_on = []
    real_fit = typetrain.fit

    def spy(mentions, **kw):
        mentions = list(mentions)
        trained_on.append({m.corpus.split(":", 1)[1] for m in mentions})
        return real_fit(mentions, **kw)

    monkeypatch.setattr(typetrain, "fit", spy)
    typers = learn.left_out_typers([first, second])
    assert set(typers) == {str(first.resolve()), str(second.resolve())}
    assert trained_on == [{"second"}, {"first"}]  # the first corpus's model never saw it, and the other way round
    assert learn.left_out_typers([first]) == {}  # alone, a corpus keeps the packaged model


def test_the_readings_of_the_kfold_and_left_out_probabilities_are_each_computed_once(monkeypatch):
    # the threshold search scores the two sets of probabilities in turn, hundreds of times: each
    # set's readings (a pass over every candidate) must be kept, not recomputed at each turn
    examples = [learn.Example("c", "d.md", ["rule=uses>"], "uses>", ("A", "e1"), ("B", "e2"))]
    kfold, left_out = _probs([("uses>", 0.9)]), _probs([("uses>", 0.2)])
    learn._READINGS.clear()
    first = learn._readings(examples, kfold)
    other = learn._readings(examples, left_out)
    assert learn._readings(examples, kfold) is first
    assert learn._readings(examples, left_out) is other
    assert first[0][0][1] == pytest.approx(0.9) and other[0][0][1] == pytest.approx(0.2)


def _feeds_examples(corpus: str, label: str, n: int) -> list:
    return [learn.Example(corpus, f"d{i}.md", ["w=feed"], label, ("A", "e1"), ("B", "e2")) for i in range(n)]


def test_a_corpus_that_annotates_other_relations_does_not_teach_none_of_this_one():
    # "feeds" says uses in a corpus that annotates every relation; a corpus annotating only
    # located_in writes many "feeds" pairs it relates no way it annotates: it says "none of mine"
    taught = _feeds_examples("all", "uses>", 6) + [
        learn.Example("all", f"n{i}.md", ["w=near"], "none", ("A", "e1"), ("C", "e3")) for i in range(6)
    ]
    located = [learn.Example("wiki", f"p{i}.md", ["w=in"], "located_in>", ("X", "e4"), ("Y", "e5")) for i in range(6)]
    silent = _feeds_examples("wiki", "none", 60)
    train = taught + located + silent
    scopes = {"all": None, "wiki": frozenset({"located_in", "part_of"})}
    mask = learn.targets(train, scopes)
    assert mask[len(taught) + len(located)].sum() > 2 and mask[len(taught) + len(located), LABELS.index("uses>")]
    assert not mask[len(taught) + len(located), LABELS.index("located_in>")]
    assert mask[0].sum() == 1 and mask[len(taught)].sum() == 1
    uses = LABELS.index("uses>")
    partial = learn.fit(train, dense=False, scopes=scopes).probabilities([["w=feed"]])[0]
    plain = learn.fit(train, dense=False).probabilities([["w=feed"]])[0]
    assert partial[uses] > 0.5 > plain[uses]
    # and the other corpus still teaches what it annotates: "feeds" is no located_in
    assert partial[LABELS.index("located_in>")] < 0.1


def test_the_fitter_is_scikit_learns_logistic_regression_when_every_label_is_known():
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    labels = ["none", "uses>", "part_of<"]
    examples = [
        learn.Example(
            "c",
            f"d{i}.md",
            [f"f{j}" for j in rng.choice(12, 4, replace=False)],
            labels[i % 3],
            ("A", "e1"),
            ("B", "e2"),
        )
        for i in range(90)
    ]
    vocabulary = learn.features_of(examples)
    X = learn.design_matrix(vocabulary, examples)
    W, b = learn.fit_softmax(X, learn.targets(examples, None), np.ones(len(examples)), 0.5)
    ours = X @ W + b
    ours = np.exp(ours - ours.max(axis=1, keepdims=True))
    ours /= ours.sum(axis=1, keepdims=True)
    clf = LogisticRegression(C=0.5, max_iter=1000, tol=1e-8).fit(X, [e.label for e in examples])
    theirs = clf.predict_proba(X)
    cols = [LABELS.index(c) for c in clf.classes_]
    assert np.abs(ours[:, cols] - theirs).max() < 1e-3
    assert np.all(b[[j for j in range(len(LABELS)) if j not in cols]] == -30.0)  # never seen: never predicted


def test_confidence_is_fitted_to_how_often_relations_given_a_probability_held(tmp_path):
    from kgr.learn.corpus import Corpus, Scope
    from kgr.stages.relmodel import RelationModel

    docs = [f"d{i}.md" for i in range(40)]
    types = {f"e{i}": "PRODUCT" for i in range(4)}
    # in every document a rule says "e0 uses e1" (the model gives it 0.2 or 0.8) and the model
    # alone says "e2 uses e3" (0.9); the first holds in 9 of 10 documents, the second in 1 of 2
    gold = {d: [{"src": "e0", "rel": "uses", "dst": "e1"}] if i % 10 else [] for i, d in enumerate(docs)}
    for i, d in enumerate(docs):
        if i % 2:
            gold[d].append({"src": "e2", "rel": "uses", "dst": "e3"})
    corpus = Corpus(tmp_path, "c", types, {d: [] for d in docs}, gold, Scope(relation_types=None, entity_types=None))
    data = [learn.CorpusData(corpus, [], docs)]
    examples, rows = [], []
    for i, d in enumerate(docs):
        examples.append(learn.Example("c", d, ["rule=uses>"], "uses>", ("Kiln", "e0"), ("Tarn", "e1")))
        rows.append(("uses>", 0.2 if i % 4 < 2 else 0.8))
        examples.append(learn.Example("c", d, [], "uses>", ("Brook", "e2"), ("Scree", "e3")))
        rows.append(("uses>", 0.9))
    learn._READINGS.clear()
    fitted = learn.calibration(data, examples, _probs(rows), {"uses": 0.5})
    model = RelationModel(
        [], [[0.0] * len(LABELS)][:0], [0.0] * len(LABELS), list(LABELS), 0.5, {"calibration": fitted}
    )
    assert model.confidence(0.2, said=True) == pytest.approx(0.9, abs=0.05)
    assert model.confidence(0.8, said=True) == pytest.approx(0.9, abs=0.05)
    assert model.confidence(0.9, said=False) == pytest.approx(0.5, abs=0.05)
    # what the model adds under its relation's threshold is never kept, so it is not fitted on
    fitted_high = learn.calibration(data, examples, _probs(rows), {"uses": 0.95})
    assert "model" not in fitted_high


def test_the_reader_learns_from_every_sampled_text_once_per_pass_in_batches_of_like_length():
    import random

    texts = ["x" * random.Random(k).randint(5, 400) for k in range(1000)]
    batches = learn._length_batches(texts, random.Random(0))
    seen = sorted(i for b in batches for i in b)
    assert seen == list(range(len(texts)))  # each text once
    assert all(0 < len(b) <= learn.READER_BATCH for b in batches)
    padded = sum(max(len(texts[i]) for i in b) * len(b) for b in batches)
    drawn = list(range(len(texts)))
    random.Random(0).shuffle(drawn)
    at_random = sum(
        max(len(texts[i]) for i in drawn[k : k + learn.READER_BATCH]) * len(drawn[k : k + learn.READER_BATCH])
        for k in range(0, len(drawn), learn.READER_BATCH)
    )
    assert padded < 0.8 * at_random  # less padding than batches drawn at random
    assert batches != learn._length_batches(texts, random.Random(1))  # shuffled, by the seed
