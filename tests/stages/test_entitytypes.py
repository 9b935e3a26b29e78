"""Entity types decided over all of an entity's mentions (kgr/stages/entitytypes.py), and one
real thing named in several documents linked to one entity (kgr/stages/link.py)."""

from __future__ import annotations

from kgr.stages import entitytypes
from kgr.stages.link import Linker, link


def test_context_reads_the_words_around_a_mention_on_its_line():
    text = "Intro line\nThe Quarry Team owns it.\nNext"
    start = text.index("Quarry Team")
    ctx = entitytypes.context(text, start, start + len("Quarry Team"))
    assert ctx[:4] == ["^", "The", "owns", "it"]
    feats = entitytypes.mention_features("Quarry Team", "TEAM", "name", {}, ctx)
    assert "p1=the" in feats and "n1=own" in feats  # common words as they are, stemmed ("owns")
    assert "headtype=TEAM" in feats and "last=team" in feats
    assert "w=own" in feats and "w=intro" not in feats  # the window stays on the mention's line
    # a neighbouring name is seen by its shape only: what is learned carries to other names
    ctx2 = entitytypes.context("Ask Ona Pike about Borealis today", 19, 27)
    feats2 = entitytypes.mention_features("Borealis", "PRODUCT", "name", {}, ctx2)
    assert ["p1=about", "n1=today", "p2=Xx about", "n2=today $"] == [
        f for f in feats2 if f[:3] in ("p1=", "n1=", "p2=", "n2=")
    ]
    assert "w=about" in feats2 and "w=today" in feats2 and not any(f.startswith(("w=O", "w=A")) for f in feats2)


def test_window_reads_what_the_sentence_says_a_name_is_and_its_section_heading():
    text = "# Vendors\n\n## Borealis\n\nWe use Borealis, the billing gateway for invoices. Then Quarry is a small library.\n"
    start = text.index("Borealis,")
    feats = entitytypes.mention_features("Borealis", "PRODUCT", "name", {}, entitytypes.context(text, start, start + 8))
    assert "desc=gateway" in feats and "desctype=SERVICE" in feats
    assert "w=then" not in feats  # the sentence ends at the full stop
    assert not any(f.startswith("hd=") for f in feats)  # its section's heading is its own name
    start = text.index("Quarry")
    feats = entitytypes.mention_features("Quarry", "PRODUCT", "name", {}, entitytypes.context(text, start, start + 6))
    assert "desc=librari" in feats and "desctype=COMPONENT" in feats  # stemmed ("library")
    assert "hd=boreali" in feats and "hd=vendor" not in feats  # the nearest heading above (stemmed)
    # a heading line reads the heading above it, not its own words
    start = text.index("Borealis")
    feats = entitytypes.mention_features("Borealis", "PRODUCT", "name", {}, entitytypes.context(text, start, start + 8))
    assert "hd=vendor" in feats and "hd=boreali" not in feats
    assert entitytypes.descriptor(["runs", "the", "bus"]) is None


def test_table_column_header_and_descriptor_stop_at_a_preposition():
    text = "# Groups\n\n| Group | Lead | Owns |\n|---|---|---|\n| Infra | Ona Pike | Borealis, Quarry |\n"
    start = text.index("Quarry")
    ctx = entitytypes.context(text, start, start + 6)
    feats = entitytypes.mention_features("Quarry", "PRODUCT", "name", {}, ctx)
    assert [f for f in feats if f.startswith("col=")] == ["col=own"]  # the header cell "Owns", stemmed
    assert "hd=group" in feats  # the heading is still read ("Groups")
    start = text.index("Group")  # a mention in the header row has no column header
    assert not any(
        f.startswith("col=")
        for f in entitytypes.mention_features(
            "Group", "CONCEPT", "name", {}, entitytypes.context(text, start, start + 5)
        )
    )
    # what the text says a name is stops at a preposition: "daemon", not "inside"
    assert entitytypes.descriptor("is the compaction daemon inside Borealis".split()) == "daemon"


def test_stem_and_entity_aggregation():
    assert [entitytypes.stem(w) for w in ("leads", "owned", "running", "is", "bus")] == [
        "lead",
        "own",
        "run",
        "is",
        "bus",
    ]
    # a feature counts by how many mentions have it over the square root of their number, at most 1
    feats = entitytypes.entity_features({"a": 1.0, "b": 4.0, "c": 9.0}, 9)
    assert feats["a"] == 1 / 3 and feats["b"] == 1.0 and feats["c"] == 1.0 and feats["n=3"] == 1.0


def test_shapes_and_strong_evidence():
    assert entitytypes.shape("Quarry Service") == "Xx Xx"
    assert entitytypes.shape("quarry-svc") == "x-x"
    assert entitytypes.shape("TKT-0042") == "X-d"
    assert entitytypes.shape("v3.2.1") == "xd.d.d"
    assert entitytypes.strong_type("Borealis meeting room", "LOCATION", "name", {}) == "LOCATION"
    assert entitytypes.strong_type("v3.2.1", "VERSION", "regex", {"pattern": "version"}) == "VERSION"
    assert entitytypes.strong_type("Ona Pike", "PERSON", "ner", {"ner_label": "PERSON"}) is None


def _typer(weights: dict[str, dict[str, float]], types=("PERSON", "TEAM")) -> entitytypes.Typer:
    feats = sorted(weights)
    return entitytypes.Typer(
        {
            "types": list(types),
            "features": feats,
            "weights": [[weights[f].get(t, 0.0) for t in types] for f in feats],
            "bias": [0.0] * len(types),
        }
    )


def _mention(surface, type_, ord_=0, **kw):
    return {
        "kind": "mention",
        "chunk": f"{kw.pop('doc', 'a.md')}#{ord_}",
        "surface": surface,
        "type": type_,
        "start": 0,
        "end": len(surface),
        "score": 0.7,
        "source": "gazetteer",
        **kw,
    }


def test_the_type_is_decided_once_over_all_mentions_of_all_documents():
    """Two documents call the same name a PERSON (spaCy's guess) once and a TEAM by what the text
    says ("the X team"); the model weighs all mentions and the one entity gets one type."""
    typer = _typer({"t=PERSON": {"PERSON": 1.0}, "t=TEAM": {"TEAM": 1.0}, "n1=team": {"TEAM": 3.0}})
    linker = Linker(typer=typer)
    a = {"kind": "doc", "path": "a.md", "text": "Borealis Ops said hello."}
    b = {"kind": "doc", "path": "b.md", "text": "Ask the Borealis Ops team."}
    chunk_a = {"kind": "chunk", "doc": "a.md", "ord": 0, "start": 0, "end": len(a["text"]), "text": a["text"]}
    chunk_b = {"kind": "chunk", "doc": "b.md", "ord": 0, "start": 0, "end": len(b["text"]), "text": b["text"]}
    m_a = _mention("Borealis Ops", "PERSON")
    m_b = _mention("Borealis Ops", "PERSON", doc="b.md")
    m_b["start"], m_b["end"] = 8, 20
    out = list(link([a, chunk_a, m_a, b, chunk_b, m_b], linker=linker))
    keys = {r["entity"] for r in out if r["kind"] == "mention"}
    assert len(keys) == 1
    entities = [r for r in out if r["kind"] == "entity"]
    assert entities[-1]["type"] == "TEAM"
    # the words around each mention are kept with it, for a later run to read from the store
    assert [r["features"]["ctx"] for r in out if r["kind"] == "mention"][1][:4] == ["Ask", "the", "team", "."]
    # without a model the mentions' types are voted: PERSON, as before
    voted = list(link([a, chunk_a, dict(m_a), b, chunk_b, dict(m_b)], linker=Linker(typer=None)))
    assert [r for r in voted if r["kind"] == "entity"][-1]["type"] == "PERSON"


def test_a_name_in_several_documents_is_one_entity_whatever_spacy_calls_it():
    linker = Linker(typer=None)
    first = linker.link_doc({"path": "a.md", "text": ""}, [_mention("Ona Pike", "ORG")], [])
    second = linker.link_doc({"path": "b.md", "text": ""}, [_mention("Ona Pike", "PERSON", doc="b.md")], [])
    third = linker.link_doc({"path": "c.md", "text": ""}, [_mention("Ona Pike", "PERSON", doc="c.md")], [])
    keys = {r["entity"] for r in first + second + third if r["kind"] == "mention"}
    assert len(keys) == 1


def test_strong_evidence_of_two_things_keeps_a_shared_name_apart():
    linker = Linker(typer=None)
    room, _, _ = linker.link("Borealis", "LOCATION", "a.md", strong="LOCATION")
    linker.entities[room.key].strong_types["LOCATION"] = 1
    other, _, created = linker.link("Borealis", "COMPONENT", "b.md", strong="COMPONENT")
    assert created and other.key != room.key
    # weak evidence (a guess from spelling or spaCy) links to the existing entity
    again, _, created = linker.link("Borealis", "PERSON", "c.md")
    assert not created and again.key in (room.key, other.key)


def test_the_packaged_model_types_what_the_text_shows():
    """Trained on annotated corpora (python -m kgr.eval.typetrain train ...): the clear cases hold."""
    typer = entitytypes.default_typer()
    assert typer is not None, "kgr/stages/models/types.json is missing"

    def typed(surface, mtype, source, features, ctx):
        counts: dict[str, float] = {}
        for _ in range(3):
            entitytypes.add_mention(counts, entitytypes.mention_features(surface, mtype, source, features, ctx))
        return typer.predict(entitytypes.entity_features(counts, 3))[0]

    assert typed("v7.4.1", "VERSION", "regex", {"pattern": "version"}, ["in", "release", ",", "the"]) == "VERSION"
    assert typed("Zorbel Yarrow", "PERSON", "ner", {"ner_label": "PERSON"}, ["^", "-", "(", "lead"]) == "PERSON"
    assert typed("us-west-2", "LOCATION", "regex", {"pattern": "region"}, ["runs", "in", "and", "Xx"]) == "LOCATION"
    assert typed("FROB_LIMIT", "API", "regex", {"pattern": "snake"}, ["set", "`", "`", "to"]) == "API"


def test_a_head_word_types_a_name_whatever_types_training_gave_weights():
    """The head-word weight is shared by every type: a model trained where no name ends in
    "Team" (no weight for "headtype=TEAM") still types "Release Team" a team; without the
    shared weight, the word of context it learned wins."""
    model = {"types": ["SERVICE", "TEAM"], "features": ["n2=; appoint"], "weights": [[1.5, 0.0]], "bias": [0.2, 0.0]}
    feats = entitytypes.entity_features(
        {
            f: 1.0
            for f in entitytypes.mention_features("Release Team", "TEAM", "name", {}, ["and", "the", ";", "appoint"])
        },
        1,
    )
    assert "headtype=TEAM" in feats and "n2=; appoint" in feats, feats
    assert entitytypes.Typer(model).predict(feats)[0] == "SERVICE"
    assert entitytypes.Typer({**model, "agreement": {"headtype": 6.0}}).predict(feats)[0] == "TEAM"
    # the packaged model carries the shared weight (python -m kgr.eval.typetrain train ...)
    assert entitytypes.default_typer().agreement.get("headtype", 0) > 0


def test_what_the_rules_say_a_name_does_is_a_typing_feature(extractor):
    """A mention keeps its part in the rules' relations ("owned_by<": something is owned by it),
    and its entity's typing reads it: a name with no head word ("Vantage Crew" has none the type
    words know) is typed by what it does as well as by its spelling."""
    from kgr.stages.extract import extract_doc

    text = "# Fare Rules\n\nThe Fare Rules engine is owned by Vantage Crew.\n\nFare Rules depends on the Toll Ledger.\n"
    doc = {"kind": "doc", "path": "fare.md", "title": None, "text": text, "hash": "h"}
    chunks = [{"kind": "chunk", "doc": "fare.md", "ord": 0, "start": 0, "end": len(text), "text": text}]
    out = extract_doc(extractor, doc, chunks)
    roles: dict[str, list] = {}
    for r in out:
        if r["kind"] == "mention" and r["source"] != "coref":
            roles.setdefault(r["surface"], []).append(r["features"].get("roles"))
    assert roles["Vantage Crew"] == [["owned_by<"]], roles
    assert roles["Toll Ledger"] == [["depends_on<"]], roles
    assert sorted(roles["Fare Rules"], key=str) == [None, ["depends_on>"], ["owned_by>"]], (
        roles
    )  # the title says nothing
    feats = entitytypes.mention_features("Vantage Crew", "ORG", "name", {"roles": ["owned_by<"]}, None)
    assert "role=owned_by<" in feats
    assert all(not f.startswith("role=") for f in entitytypes.mention_features("Vantage Crew", "ORG", "name", {}, None))


def test_a_name_the_text_wrapped_is_named_on_one_line():
    """A mention keeps its text as written ("Quarry Domain\nOperators", the paragraph wrapped
    there); its entity is named, and its alias kept, on one line, and the same name unwrapped
    elsewhere is the same entity."""
    linker = Linker(typer=None)
    first = linker.link_doc({"path": "a.md", "text": ""}, [_mention("Quarry Domain\nOperators", "TEAM")], [])
    second = linker.link_doc(
        {"path": "b.md", "text": ""}, [_mention("Quarry Domain Operators", "TEAM", doc="b.md")], []
    )
    names = {r["name"] for r in first + second if r["kind"] == "entity"}
    assert names == {"Quarry Domain Operators"}, names
    keys = {r["entity"] for r in first + second if r["kind"] == "mention"}
    assert len(keys) == 1
    assert [r["surface"] for r in first if r["kind"] == "mention"] == ["Quarry Domain\nOperators"]
