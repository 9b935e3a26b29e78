"""The learned relation model's candidates, features, weights file and decision rule."""

import numpy as np
import pytest

from kgr.stages import relmodel
from kgr.stages.relations import extract_relations
from kgr.stages.relmodel import LABELS, RelationModel, candidates, learned_relations
from kgr.stages.textmodel import parse_document


@pytest.fixture()
def read(extractor):
    def run(text: str):
        doc = parse_document(text, path="t.md")
        spans = extractor.mentions(doc)
        return doc, spans, extract_relations(doc, spans)

    return run


def by_kind(cands, kind):
    return [c for c in cands if c.kind == kind]


def test_a_sentence_pair_is_described_by_its_parse(read):
    doc, spans, rules = read("# Overview\n\nThe Billing Team owns the Invoice Service since 2021.\n")
    (c,) = [c for c in by_kind(candidates(doc, spans, rules), "sentence") if c.b.surface == "Invoice Service"]
    assert c.a.surface == "Billing Team"
    f = set(c.features)
    assert {"lca=own", "dp=nsubj|dobj", "w=own", "a:r=nsubj", "b:r=dobj"} <= f
    assert "rule=owned_by<" in f  # the rules read "T owns X" as X owned_by T: b is the source
    assert doc.text[c.start : c.end].strip().startswith("The Billing Team owns")


def test_list_items_pair_with_the_section_subject_and_rows_with_their_columns(read):
    text = (
        "# Payment Router\n\n## Dependencies\n\n- Fraud Scorer for every payment\n\n"
        "| Service | Owner |\n| --- | --- |\n| Fraud Scorer | Risk Team |\n"
    )
    doc, spans, rules = read(text)
    cands = candidates(doc, spans, rules)
    subj = [c for c in by_kind(cands, "subject") if c.b.surface == "Fraud Scorer" and c.a.surface == "Payment Router"]
    assert subj and any("h=dependencies" in c.features for c in subj)
    (row,) = [c for c in by_kind(cands, "row") if c.b.surface == "Risk Team"]
    assert {"cola=service", "colb=owner", "ca=first"} <= set(row.features)


def test_names_up_to_max_sentence_gap_sentences_apart_in_a_paragraph_are_paired(read):
    gap = relmodel.MAX_SENTENCE_GAP

    def filler(n: int) -> str:
        return " ".join(["The queue there is long."] * n)

    text = (
        f"# Billing\n\nThe Invoice Service sends invoices. {filler(gap - 1)} The Billing Team is small. "
        f"{filler(gap)} The Risk Team meets weekly.\n"
    )
    doc, spans, rules = read(text)
    near = {(c.a.surface, c.b.surface): c for c in by_kind(candidates(doc, spans, rules), "near")}
    assert f"sd={gap}" in near[("Invoice Service", "Billing Team")].features
    assert ("Billing Team", "Risk Team") not in near  # one sentence too far


def test_numbered_steps_come_in_through_the_rules(read):
    text = "# Restore\n\n1. The Backup Agent copies the snapshot.\n2. The Restore Worker loads it.\n"
    doc, spans, rules = read(text)
    cands = candidates(doc, spans, rules)
    steps = [c for c in cands if "rule=precedes>" in c.features]
    assert [(c.a.surface, c.b.surface) for c in steps] == [("Backup Agent", "Restore Worker")]
    assert steps[0].kind == "rule"


def _model(weights: dict[tuple[str, str], float], threshold=0.5, veto=0.0):
    vocab = sorted({f for f, _ in weights})
    W = np.zeros((len(vocab), len(LABELS)), dtype=np.float32)
    for (f, label), w in weights.items():
        W[vocab.index(f), LABELS.index(label)] = w
    b = np.zeros(len(LABELS), dtype=np.float32)
    b[0] = 3.0  # "none" unless a feature says otherwise
    return RelationModel(vocab, W, b, list(LABELS), threshold, {"veto": veto})


def test_weights_survive_a_round_trip_and_give_probabilities(tmp_path):
    m = _model({("w=feed", "uses>"): 6.0, ("lca=own", "owned_by<"): 5.0}, threshold=0.4, veto=0.05)
    m.save(tmp_path / "m.npz")
    back = RelationModel.load(tmp_path / "m.npz")
    assert back.labels == list(LABELS) and back.threshold == 0.4 and back.veto == 0.05
    p = back.probabilities([["w=feed", "unknown"], []])
    assert p.shape == (2, len(LABELS)) and np.allclose(p.sum(axis=1), 1.0)
    assert LABELS[int(p[0].argmax())] == "uses>" and LABELS[int(p[1].argmax())] == "none"


def test_rules_first_unless_vetoed_then_the_models_likeliest(read):
    doc, spans, rules = read(
        "# Overview\n\nThe Billing Team owns the Invoice Service. The Invoice Service feeds the Ledger Cache.\n"
    )
    sure = _model({("w=feed", "uses>"): 6.0, ("rule=owned_by<", "owned_by<"): 4.0})
    got = {(r["src"], r["rel"], r["dst"]): r for r in learned_relations(doc, spans, rules, model=sure)}
    assert ("Invoice Service", "owned_by", "Billing Team") in got
    assert ("Invoice Service", "uses", "Ledger Cache") in got
    assert got[("Invoice Service", "uses", "Ledger Cache")]["pattern"] == "learned:sentence"
    assert 0.5 < got[("Invoice Service", "uses", "Ledger Cache")]["confidence"] <= 1
    assert got[("Invoice Service", "owned_by", "Billing Team")]["pattern"].startswith("learned+rule")
    # a model that finds the rule's relation unlikely drops it; one that finds nothing likely adds nothing
    doubtful = _model({("rule=owned_by<", "none"): 4.0}, veto=0.2)
    assert not learned_relations(doc, spans, rules, model=doubtful)


def test_a_relations_confidence_is_what_its_probability_has_meant(read):
    doc, spans, rules = read(
        "# Overview\n\nThe Billing Team owns the Invoice Service. The Invoice Service feeds the Ledger Cache.\n"
    )
    weights = {("w=feed", "uses>"): 6.0, ("rule=owned_by<", "owned_by<"): 2.0}
    raw = {(r["src"], r["rel"]): r["confidence"] for r in learned_relations(doc, spans, rules, model=_model(weights))}
    # measured out of sample: a rule's relation holds more often than the model's probability
    # says, and what the model adds alone less often
    calibrated = _model(weights)
    calibrated.meta["calibration"] = {"rule": [0.5, 1.5], "model": [1.0, -1.0]}
    got = {(r["src"], r["rel"]): r["confidence"] for r in learned_relations(doc, spans, rules, model=calibrated)}
    assert got.keys() == raw.keys()
    ruled, alone = ("Invoice Service", "owned_by"), ("Invoice Service", "uses")
    assert got[ruled] > raw[ruled] and got[alone] < raw[alone]
    assert got[ruled] == pytest.approx(calibrated.confidence(raw[ruled], said=True), abs=1e-4)
    # the calibration is saved with the model
    assert _model(weights).confidence(0.3, said=True) == 0.3


@pytest.mark.parametrize(
    "text, denied",
    [
        (  # a supposition
            "# Overview\n\nIf the Invoice Service feeds the Ledger Cache, the Audit Log grows.\n\n"
            "The Invoice Service feeds the Billing Queue.\n",
            ["Ledger Cache"],
        ),
        (  # a negated statement
            "# Overview\n\nThe Invoice Service does not feed the Ledger Cache.\n\n"
            "The Invoice Service never feeds the Audit Log.\n\nThe Invoice Service feeds the Billing Queue.\n",
            ["Ledger Cache", "Audit Log"],
        ),
    ],
    ids=["supposition", "negated"],
)
def test_the_model_adds_nothing_from_a_supposition_or_a_negated_statement(read, text, denied):
    doc, spans, rules = read(text)
    sure = _model({("w=feed", "uses>"): 6.0})
    got = {(r["src"], r["rel"], r["dst"]) for r in learned_relations(doc, spans, rules, model=sure)}
    assert ("Invoice Service", "uses", "Billing Queue") in got, got
    for dst in denied:
        assert ("Invoice Service", "uses", dst) not in got, got


def test_the_shipped_model_is_in_the_package_and_says_how_it_was_trained():
    if not relmodel.MODEL_FILE.exists():
        pytest.fail(f"{relmodel.MODEL_FILE} is missing: run the command in kgr/learn/relations.py's docstring")
    m = relmodel.default_model()
    assert m.labels == list(LABELS) and all(0 < m.threshold_for(rel) <= 1.01 for rel in relmodel.VOCABULARY)
    assert m.meta["command"].startswith("kgr train relations") and m.meta["trained_on"]
    # confidences as measured out of sample: a rule's relation, and one the model adds alone
    assert set(m.meta["calibration"]) == {"rule", "model"}
    assert m.confidence(0.2, said=True) < m.confidence(0.6, said=True)
    assert relmodel.MODEL_FILE.stat().st_size < 5_000_000
    # with the dense head, read for the candidates the sparse model finds plausible
    assert m.dense is not None and m.dense.w1.shape[1] == m.dense.w2.shape[0] and 0 < m.cascade < 1


def test_the_features_read_each_names_type_as_the_type_model_decides_it_over_the_documents_mentions(read):
    from kgr.stages.entitytypes import Typer

    # a plumbing model: a multi-word name whose last word is "team" is a TEAM, anything else a PERSON
    typer = Typer({"types": ["PERSON", "TEAM"], "features": ["last=team"], "weights": [[-5.0, 5.0]], "bias": [0, 0]})
    doc, spans, rules = read("# Overview\n\nThe Billing Team owns the Invoice Service since 2021.\n")
    with relmodel.typing_with(lambda path: typer):
        assert relmodel.document_types(doc, spans)["Billing Team"] == "TEAM"
        (c,) = [c for c in by_kind(candidates(doc, spans, rules), "sentence") if c.b.surface == "Invoice Service"]
    f = set(c.features)
    assert {"lta=TEAM", "ltb=PERSON", "lt=TEAM|PERSON", "k=sentence|lt=TEAM|PERSON"} <= f
    assert f"ta={c.a.type}" in f  # the extractor's own guess stays beside it
    with relmodel.typing_with(lambda path: None):  # no type model: no learned types
        (c,) = [c for c in by_kind(candidates(doc, spans, rules), "sentence") if c.b.surface == "Invoice Service"]
    assert not [x for x in c.features if x.startswith(("lt=", "lta=", "ltb="))]


def test_a_place_within_a_place_locates_what_is_in_it_when_both_links_are_likely(read):
    doc, spans, rules = read(
        "# Hotel Adlon\n\nThe Hotel Adlon is a luxury hotel in Berlin.\n\nBerlin is a city in Germany.\n"
    )

    def located(weight: float) -> dict:
        # "X is a <noun> in Y": both sentences' dependency path
        m = _model({("dp=nsubj|attrvprepvpobj", "located_in>"): weight}, threshold={"located_in": 0.5})
        return {
            (r["src"], r["rel"], r["dst"], r["evidence"]["sentence"]): r
            for r in learned_relations(doc, spans, rules, model=m)
        }

    got = located(8.0)  # both links ~0.99: so is what they entail
    assert ("Hotel Adlon", "located_in", "Berlin", "The Hotel Adlon is a luxury hotel in Berlin.") in got, got
    assert ("Berlin", "located_in", "Germany", "Berlin is a city in Germany.") in got, got
    inferred = {k: r for k, r in got.items() if k[:3] == ("Hotel Adlon", "located_in", "Germany")}
    # one record for each link's sentence, so the store keeps both as its evidence
    assert {k[3] for k in inferred} == {"The Hotel Adlon is a luxury hotel in Berlin.", "Berlin is a city in Germany."}
    assert all(r["pattern"] == "learned:inferred" for r in inferred.values())
    stated = [r["confidence"] for k, r in got.items() if k not in inferred]
    assert all(0.5 <= r["confidence"] <= min(stated) for r in inferred.values())
    # two links each just likely enough (0.58) are together less likely than a stated link must be
    weak = located(4.0)
    assert ("Berlin", "located_in", "Germany") in {k[:3] for k in weak}, weak
    assert ("Hotel Adlon", "located_in", "Germany") not in {k[:3] for k in weak}, weak


def test_a_rename_is_said_by_the_text_never_by_the_model_alone(read):
    doc, spans, rules = read(
        "# Overview\n\nThe Height and the Width of the Invoice Service are set at start.\n\n"
        "The Invoice Service was called Billing Engine until 2024.\n"
    )
    # a model sure that any two names in a sentence are one thing, and that what the rules say holds
    sure = _model({("k=sentence", "same_as>"): 9.0, ("rule=same_as<", "same_as<"): 9.0}, threshold=0.1)
    assert sure.threshold_for("same_as") > 1.0 and sure.threshold_for("uses") == 0.1
    got = {(r["src"], r["rel"], r["dst"]) for r in learned_relations(doc, spans, rules, model=sure)}
    assert ("Billing Engine", "same_as", "Invoice Service") in got  # the text says it: "was called"
    assert not [t for t in got if t[1] == "same_as" and "Height" in (t[0], t[2])]
    assert len([t for t in got if t[1] == "same_as"]) == 1


def test_a_list_item_that_is_only_a_link_relates_nothing_to_the_page(read):
    doc, spans, rules = read(
        "# Invoice Service\n\nThe Invoice Service issues invoices.\n\n## Components\n\n"
        "- [Tax Engine](tax.md): computes the tax of each invoice.\n\n## See also\n\n- [Ledger Cache](ledger.md)\n\n"
        "## Related links\n\n[Audit Log](audit.md)\n"
    )
    names = {name for sp in spans for name in [relmodel.name_of(sp)]}
    assert {"Invoice Service", "Tax Engine", "Ledger Cache", "Audit Log"} <= names, names
    # a model that reads every name under the page's subject as a part of it
    parts = _model({("subj=page", "part_of<"): 6.0})
    got = {(r["src"], r["rel"], r["dst"]) for r in learned_relations(doc, spans, rules, model=parts)}
    assert ("Tax Engine", "part_of", "Invoice Service") in got, got
    assert ("Ledger Cache", "part_of", "Invoice Service") not in got, got
    assert ("Audit Log", "part_of", "Invoice Service") not in got, got  # a paragraph that is only a link


def test_the_subjects_of_sibling_sections_are_peers_not_parts(read):
    doc, spans, rules = read(
        "# Format-Widget\n\nThe `Format-Widget` cmdlet formats widgets. Add **Force** to see hidden ones.\n\n"
        "## Parameters\n\n### -Force\n\nShows hidden widgets. Use with the **DisplayError** parameter.\n\n"
        "### -DisplayError\n\nShows errors on the command line.\n\n"
        "## Components\n\nThe **Tax Engine** computes the tax of each widget.\n"
    )
    # a model that reads every name under a section's or the page's subject as a part of it
    parts = _model({("subj=section", "part_of<"): 6.0, ("subj=page", "part_of<"): 6.0})
    got = {(r["src"], r["rel"], r["dst"]) for r in learned_relations(doc, spans, rules, model=parts)}
    assert ("Tax Engine", "part_of", "Format-Widget") in got, got
    assert not [t for t in got if {t[0], t[2]} == {"DisplayError", "Force"}], got


def test_a_tables_header_row_names_columns_not_related_things(read):
    doc, spans, rules = read(
        "# Widgets\n\nWidgets are made of parts.\n\n"
        "| **Tax Engine** | **Ledger Cache** |\n| --- | --- |\n| **Fee Store** | **Audit Log** |\n"
    )
    names = {relmodel.name_of(sp) for sp in spans}
    assert {"Tax Engine", "Ledger Cache", "Fee Store", "Audit Log"} <= names, names
    # a model that reads the second cell of any row as the whole the first is a part of
    rows = _model({("ca=first", "part_of>"): 6.0})
    got = {(r["src"], r["rel"], r["dst"]) for r in learned_relations(doc, spans, rules, model=rows)}
    assert ("Fee Store", "part_of", "Audit Log") in got, got
    assert ("Tax Engine", "part_of", "Ledger Cache") not in got, got


def test_a_name_the_corpus_writes_as_a_term_is_no_place_to_be_located_in(read):
    doc, spans, rules = read(
        "# Widget Agent\n\nThe agent ships for **Linux**.\n\n"
        "The Widget Agent records events in Linux. The Widget Agent records events in Tallinn.\n"
    )
    places = _model({("w=in", "located_in>"): 6.0})
    got = {(r["src"], r["rel"], r["dst"]) for r in learned_relations(doc, spans, rules, model=places)}
    assert ("Widget Agent", "located_in", "Tallinn") in got, got
    # spaCy calls this "Linux" a place; the corpus writes it as a term of its own
    assert ("Widget Agent", "located_in", "Linux") not in got, got


def test_a_name_said_to_be_an_alias_of_the_other_is_no_part_of_it(read):
    doc, spans, rules = read(
        "# Get-Widget\n\nThe **ArgumentList** parameter takes values. The alias for **ArgumentList** is **Args**.\n\n"
        "The **ArgumentList** parameter passes values to the **Widget Engine**.\n"
    )
    # a model that reads a part in every pair of names a sentence or two put together
    parts = _model({("k=sentence", "part_of>"): 6.0, ("k=near", "part_of>"): 6.0})
    got = {(r["src"], r["rel"], r["dst"]) for r in learned_relations(doc, spans, rules, model=parts)}
    assert ("ArgumentList", "part_of", "Widget Engine") in got, got
    assert not [t for t in got if {t[0], t[2]} == {"ArgumentList", "Args"}], got


def test_what_a_sentence_sends_the_reader_to_relates_nothing(read):
    doc, spans, rules = read(
        "# Invoice Service\n\nThe Invoice Service issues invoices.\n\n## Components\n\n"
        "The [Tax Engine](tax.md) computes the tax of each invoice.\n\n"
        "For more information, see [Ledger Cache](ledger.md).\n\n"
        "For an example of how to use retries, see Example 7 of [Audit Log](audit.md).\n"
    )
    names = {relmodel.name_of(sp) for sp in spans}
    assert {"Invoice Service", "Tax Engine", "Ledger Cache", "Audit Log"} <= names, names
    # a model that reads every name under the page's subject as a part of it
    parts = _model({("subj=page", "part_of<"): 6.0})
    got = {(r["src"], r["rel"], r["dst"]) for r in learned_relations(doc, spans, rules, model=parts)}
    assert ("Tax Engine", "part_of", "Invoice Service") in got, got
    assert not [t for t in got if "Ledger Cache" in (t[0], t[2]) or "Audit Log" in (t[0], t[2])], got


def test_the_model_makes_no_parameter_part_of_another(read):
    doc, spans, rules = read(
        "# Stop-Spool\n\nStops a spool. Use the **Queue** parameter to pick one.\n\n"
        "## Parameters\n\n### -QueueName\n\nOne or more **Queue** names to be stopped.\n\n"
        "### -Force\n\nStops the spool without asking.\n"
    )
    # a model that reads every name under a section's subject as a part of it
    parts = _model({("subj=section", "part_of<"): 6.0, ("subj=page", "part_of<"): 6.0})
    got = {(r["src"], r["rel"], r["dst"]) for r in learned_relations(doc, spans, rules, model=parts)}
    assert ("Queue", "part_of", "Stop-Spool") in got, got  # a parameter is its command's
    assert ("Queue", "part_of", "QueueName") not in got, got
