from kgr.stages.link import Linker, is_abbreviation, lead_name, learn_aliases, link, norm, unversioned


def test_norm_and_abbreviations():
    assert norm("Lucía Ferrante") == "luciaferrante" == norm("Lucia  Ferrante")
    assert is_abbreviation("QIS", "Quarry Intake Service")
    assert is_abbreviation("QuarPlat", "Quarry Platform")
    assert is_abbreviation("quarry-svc", "Quarry Service")
    assert is_abbreviation("BasinOps", "Basin Operations")
    assert not is_abbreviation("XYZ", "Quarry Intake Service")
    assert not is_abbreviation("Quarry", "Quarry")
    assert unversioned("ISO/IEC 27001:2022") == "ISO 27001"
    assert unversioned("Borealis Cache v2.1") == "Borealis Cache"


def test_declared_aliases():
    text = (
        "The Quarry Intake Service (QIS) takes orders. **LIX**: short for Lumen Index. "
        "Team Basin Operations, usually written BasinOps, runs it."
    )
    pairs = set(learn_aliases(text, None))
    assert ("QIS", "Quarry Intake Service") in pairs
    assert ("LIX", "Lumen Index") in pairs
    assert ("BasinOps", "Basin Operations") in pairs


def test_lead_name_is_the_titles_subject_only_when_the_title_adds_its_class():
    # the title adds the class the first sentence gives: one thing
    assert (
        lead_name("# Forge CI\n\nForge (`forge-ci`) is the continuous integration system of Pell.", "Forge CI")
        == "Forge"
    )
    assert lead_name(
        "# Quay storage engine\n\nQuay is the storage engine of Pell. It is fast.", "Quay storage engine"
    ) == ("Quay")
    assert (
        lead_name("Marsh Hollow, Oregon\n\nMarsh Hollow is a hamlet in Oregon.", "Marsh Hollow, Oregon")
        == "Marsh Hollow"
    )
    # the title says more than the sentence, or names two things, or the sentence is not about a name
    assert lead_name("# Forge CI\n\nForge is a tool we like.", "Forge CI") is None
    assert (
        lead_name("# Quay Service Runbook\n\nQuay Service is the service that stores blobs.", "Quay Service Runbook")
        is None
    )
    assert lead_name("# Quay and Weir\n\nQuay is a store, and Weir its index.", "Quay and Weir") is None
    assert lead_name("# Fen, Moor\n\nFen, Moor is an album.", "Fen, Moor") is None
    assert lead_name("# Quay storage engine\n\nQuay storage engine is fast.", "Quay storage engine") is None
    # declared as the title's name for the sentence's: the title mention links to the short name's entity
    assert ("Forge CI", "Forge") in learn_aliases(
        "# Forge CI\n\nForge is the continuous integration system.", "Forge CI"
    )


def test_a_title_that_adds_its_class_links_to_the_name_used_everywhere_else():
    docs = [
        ({"kind": "doc", "path": "a.md", "title": "Notes", "text": "Forge builds every branch."}, [mention("Forge")]),
        (
            {
                "kind": "doc",
                "path": "b.md",
                "title": "Forge CI",
                "text": "# Forge CI\n\nForge (`forge-ci`) is the continuous integration system of Pell.",
            },
            [mention("Forge CI"), mention("forge-ci", "COMPONENT"), mention("Forge")],
        ),
    ]
    linker = Linker()
    for doc, ms in docs:
        linker.learn(doc["text"], doc["title"])
    out = [r for doc, ms in docs for r in link([doc, *[dict(m, chunk=f"{doc['path']}#0") for m in ms]], linker=linker)]
    keys = {m["surface"]: m["entity"] for m in out if m["kind"] == "mention"}
    assert keys["Forge CI"] == keys["Forge"] == keys["forge-ci"]
    (ent,) = {e["key"]: e for e in out if e["kind"] == "entity" and e["key"] == keys["Forge"]}.values()
    assert {"Forge", "Forge CI"} <= {ent["name"], *ent["aliases"]}


def mention(surface, type_="SERVICE", ord_=0, **kw):
    return {
        "kind": "mention",
        "chunk": f"a.md#{ord_}",
        "surface": surface,
        "type": type_,
        "start": 0,
        "end": len(surface),
        "score": 0.8,
        "source": "name",
        **kw,
    }


def test_linking_merges_aliases_keeps_people_apart_and_is_deterministic():
    doc = {
        "kind": "doc",
        "path": "a.md",
        "title": "Quarry Intake Service",
        "text": "The Quarry Intake Service (QIS) is run by Ona Pike. Ona asked QIS to use quarry-intake.",
    }
    ms = [
        mention("Quarry Intake Service"),
        mention("QIS"),
        mention("Ona Pike", "PERSON"),
        mention("Ona", "PERSON"),
        mention("quarry-intake", "COMPONENT"),
        mention("It", source="coref", refers_to="Quarry Intake Service"),
    ]

    def run():
        out = list(link([doc, *[dict(m) for m in ms]]))
        return {m["surface"]: m["entity"] for m in out if m["kind"] == "mention"}, [
            e for e in out if e["kind"] == "entity"
        ]

    keys, entities = run()
    assert keys["QIS"] == keys["Quarry Intake Service"] == keys["quarry-intake"] == keys["It"]
    assert keys["Ona"] == keys["Ona Pike"] != keys["QIS"]
    again, _ = run()
    assert again == keys
    service = next(e for e in entities if e["key"] == keys["QIS"])
    assert service["name"] == "Quarry Intake Service"
    assert {"QIS", "quarry-intake"} <= set(service["aliases"])


def test_relations_get_entity_keys():
    doc = {"kind": "doc", "path": "a.md", "title": "x", "text": ""}
    ms = [mention("Lumen Index"), mention("Team Basin", "TEAM")]
    rel = {
        "kind": "relation",
        "src": "Lumen Index",
        "dst": "Team Basin",
        "rel": "owned_by",
        "confidence": 0.8,
        "evidence": {"start": 0, "end": 5, "sentence": "x"},
    }
    out = list(link([doc, *ms, rel]))
    (r,) = [x for x in out if x["kind"] == "relation"]
    keys = {m["surface"]: m["entity"] for m in out if m["kind"] == "mention"}
    assert (r["src"], r["dst"]) == (keys["Lumen Index"], keys["Team Basin"])
    assert r["src_surface"] == "Lumen Index"


def test_fuzzy_candidates_and_threshold():
    linker = Linker([{"key": "lumenindex", "name": "Lumen Index", "type": "SERVICE"}])
    ent, score, created = linker.link("Lumen Indx", "SERVICE", "b.md")  # edit distance 1
    assert not created and ent.key == "lumenindex" and score >= 0.72
    ent, _, created = linker.link("Ferry Relay", "SERVICE", "b.md")
    assert created and ent.key != "lumenindex"


def test_ids_and_numbers_only_link_exactly():
    linker = Linker(
        [{"key": "adr012", "name": "ADR-012", "type": "CONCEPT"}, {"key": "v321", "name": "v3.2.1", "type": "VERSION"}]
    )
    assert linker.link("ADR-019", "CONCEPT", "a.md")[2] is True  # created, not merged into ADR-012
    assert linker.link("v3.2.2", "VERSION", "a.md")[2] is True
    assert linker.link("ADR-012", "CONCEPT", "a.md")[0].key == "adr012"


def test_names_with_roman_numerals_only_link_exactly():
    """ "Johann Strauss II" is one edit from "Johann Strauss III" and is his father: a name that
    carries a numeral, written as one, is another thing unless it is written the same."""
    linker = Linker([{"key": "js3", "name": "Johann Strauss III", "type": "PERSON"}])
    for other in ("Johann Strauss II", "Johann Strauss"):
        ent, _, created = linker.link(other, "PERSON", "a.md")
        assert created and ent.key != "js3", other
    assert linker.link("Johann Strauss III", "PERSON", "b.md")[0].key == "js3"


def test_names_written_as_identifiers_only_link_exactly():
    """ "Set-Spool" is not a typo of "Get-Spool", nor "Get-SpoolItem" a longer "Get-Spool": an
    identifier is another thing unless it is written the same (case and punctuation aside)."""
    linker = Linker([{"key": "getspool", "name": "Get-Spool", "type": "API"}])
    for other in ("Set-Spool", "Get-SpoolItem", "Get-Spoal"):
        ent, _, created = linker.link(other, "API", "a.md")
        assert created and ent.key != "getspool", other
    assert linker.link("get-spool", "API", "b.md")[0].key == "getspool"
    assert linker.link("Get-Spool", "API", "b.md")[0].key == "getspool"
    # a name in words still finds its typo
    linker = Linker([{"key": "lumenindex", "name": "Lumen Index", "type": "SERVICE"}])
    assert linker.link("Lumen Indx", "SERVICE", "b.md")[0].key == "lumenindex"


def test_pages_whose_titles_qualify_one_name_differently_are_two_things():
    """ "Scott Howell (footballer)" and "Scott Howell (political consultant)" are two people; a
    page of the name without a qualifier, or one with the same qualifier, is no evidence of two."""

    def page(path, title, *extra):
        text = f"{title.split(' (')[0]} is a name. " + " ".join(extra)
        return [{"kind": "doc", "path": path, "title": title, "text": text}, mention("Scott Howell", "PERSON")]

    recs = [
        *page("a.md", "Scott Howell (footballer)"),
        *page("b.md", "Scott Howell (political consultant)"),
        *page("c.md", "Scott Howell (footballer)"),
        *page("d.md", "Scott Howell"),
    ]
    out = list(link([dict(r) for r in recs]))
    keys = [m["entity"] for m in out if m["kind"] == "mention"]
    assert keys[0] != keys[1]
    assert keys[2] == keys[0]
    assert keys[3] in keys[:2]


def test_a_first_name_links_to_a_person_whose_name_is_written_as_one():
    doc = {"kind": "doc", "path": "a.md", "title": "Notes", "text": "Velora minima and Ona Pike. Velora, Ona."}
    ms = [
        mention("Velora minima", "PERSON"),  # a species the type model took for a person
        mention("Ona Pike", "PERSON"),
        mention("Velora", "PERSON"),
        mention("Ona", "PERSON"),
    ]
    out = list(link([doc, *[dict(m) for m in ms]]))
    keys = {m["surface"]: m["entity"] for m in out if m["kind"] == "mention"}
    assert keys["Ona"] == keys["Ona Pike"]
    assert keys["Velora"] != keys["Velora minima"]


def test_a_product_linked_with_its_releases_is_named_without_a_release():
    """Mentions of "Borealis Cache 3.0" link to "Borealis Cache"; however often one release is
    written, the entity is the product, named as such."""
    first = {"kind": "doc", "path": "a.md", "title": "Notes", "text": ""}
    later = {"kind": "doc", "path": "b.md", "title": "Releases", "text": ""}
    ms = [mention("Borealis Cache 3.0", "PRODUCT", chunk="b.md#0")] * 3
    ms += [mention("Borealis Cache 5.1", "PRODUCT", chunk="b.md#0")]
    # the mentions' own types decide (no typing context in these records for the type model)
    recs = [first, mention("Borealis Cache", "PRODUCT"), later, *[dict(m) for m in ms]]
    out = list(link(recs, linker=Linker(typer=None)))
    keys = {m["entity"] for m in out if m["kind"] == "mention"}
    assert len(keys) == 1, out
    entity = [e for e in out if e["kind"] == "entity"][-1]  # as the last document leaves it
    assert entity["name"] == "Borealis Cache"
    assert {"Borealis Cache 3.0", "Borealis Cache 5.1"} <= set(entity["aliases"])


def test_a_relation_the_classifier_alone_says_is_refused_only_when_both_types_say_it_cannot_hold():
    """ "Westmere located_in Guilderland": the entity's type (here PERSON, as a type model trained on
    company documents reads a Wikipedia place) says no place, the mention the relation was read from
    says LOCATION: kept. When the mention agrees with the entity (a person), it is refused."""
    linker = Linker(
        [
            {"key": "westmere", "name": "Westmere", "type": "LOCATION"},
            {"key": "guilderland", "name": "Guilderland", "type": "PERSON"},
            {"key": "orrinvale", "name": "Orrin Vale", "type": "PERSON"},
        ],
        typer=None,
    )
    doc = {"kind": "doc", "path": "a.md", "title": "Westmere", "text": ""}

    def rel(dst, dst_type, pattern="learned:sentence"):
        return {
            "kind": "relation",
            "src": "Westmere",
            "dst": dst,
            "rel": "located_in",
            "confidence": 0.9,
            "pattern": pattern,
            "src_type": "LOCATION",
            "dst_type": dst_type,
            "evidence": {"start": 0, "end": 5, "sentence": "x"},
        }

    recs = [
        doc,
        mention("Westmere", "LOCATION"),
        mention("Guilderland", "PERSON"),
        mention("Orrin Vale", "PERSON"),
        rel("Guilderland", "LOCATION"),
        rel("Orrin Vale", "PERSON"),
    ]
    out = [x for x in link(recs, linker=linker) if x["kind"] == "relation"]
    assert [(r["src"], r["dst"]) for r in out] == [("westmere", "guilderland")]
    # what a rule says is the rule's to check: the link stage keeps it either way
    out = [x for x in link([doc, *recs[1:4], rel("Orrin Vale", "PERSON", "learned+rule:sentence")], linker=linker)]
    assert [(r["src"], r["dst"]) for r in out if r["kind"] == "relation"] == [("westmere", "orrinvale")]
