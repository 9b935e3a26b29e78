"""Extraction with the real spaCy model on texts written for these tests."""

from kgr.stages.extract import Gazetteer, GazTerm, mine_terms


def surfaces(spans, source=None):
    return [s.surface for s in spans if source is None or s.source == source]


def triples(relations):
    return {(r["src"], r["rel"], r["dst"]) for r in relations}


def test_regex_families(analyse):
    text = (
        "# Billing Gateway\n\nThe gateway exposes `ChargeCard` and `REFUND_LIMIT` on topic billing.charges.v2, "
        "fixed in v4.1.2 after INC-2041. It follows RFC 9110 and ISO 27001 and runs in eu-west-2. "
        "Clients call POST /v1/charges. Uptime was 99.95% over 2.5 days.\n"
    )
    spans, _ = analyse(text)
    got = {s.surface: (s.type, s.source) for s in spans}
    assert got["ChargeCard"][0] == "API"
    assert got["REFUND_LIMIT"][0] == "API"
    assert got["billing.charges.v2"][0] == "API"
    assert got["v4.1.2"] == ("VERSION", "regex")
    assert got["INC-2041"][1] == "regex"
    assert got["RFC 9110"][0] == "STANDARD" and got["ISO 27001"][0] == "STANDARD"
    assert got["eu-west-2"][0] == "LOCATION"
    assert got["POST /v1/charges"][0] == "API"
    assert "99.95" not in got and "2.5" not in got  # decimals are not versions


def test_a_dotted_pre_release_is_one_version(analyse):
    """Semantic Versioning's dotted pre-release identifiers belong to the version ("2.2.0-rc.1",
    "1.0.0-alpha.2"); a full stop after a version still ends the sentence."""
    spans, _ = analyse("Tag 2.2.0-rc.1 before 1.0.0-alpha.2 and v3.1.0-rc1. It ships in 4.0.0-beta.\n")
    got = {s.surface: s.type for s in spans if s.type == "VERSION"}
    assert got == {
        "2.2.0-rc.1": "VERSION",
        "1.0.0-alpha.2": "VERSION",
        "v3.1.0-rc1": "VERSION",
        "4.0.0-beta": "VERSION",
    }


def test_names_by_spelling_and_sentence_starts(analyse):
    text = "Promote the replica first. Then ask Hollis Varga to check the Quarry Scheduler and the Borealis queue.\n"
    spans, _ = analyse(text)
    names = surfaces(spans)
    assert "Hollis Varga" in names
    assert "Quarry Scheduler" in names
    assert "Promote" not in names and "Then" not in names
    # a line of a log opens with its time: its first word is no more a name's than a sentence's
    spans, _ = analyse(
        "# Night log\n\n01:40 Quarry Scheduler stopped.\n01:55 Restarted Quarry Scheduler through Ona Pike.\n"
    )
    names = surfaces(spans)
    assert names.count("Quarry Scheduler") == 2 and not [n for n in names if n.startswith("Restarted")], names
    # nor is a field's label after a middle dot, which separates fields as a line break would
    spans, _ = analyse("# Spool policy\n\n**Owner:** Quarry Team · **Approved by:** Hollis Varga · Version 2.0\n")
    names = surfaces(spans)
    assert "Hollis Varga" in names and not {"Approved", "Version"} & set(names), names


def test_bold_defined_terms_match_plurals_in_lower_case(analyse):
    text = (
        "# Glossary\n\n**Cold window**: The hour during which writes are refused.\n\n"
        "Two cold windows a day are too many; the cold window starts at noon.\n"
    )
    spans, _ = analyse(text)
    assert surfaces(spans).count("cold window") == 1
    assert "cold windows" in surfaces(spans)


def test_a_keyword_in_code_font_does_not_name_its_english_word_in_prose(analyse):
    """`return` and `try` are keywords; "returns" and "tries" in a sentence are English verbs,
    not mentions of them (the gazetteer matches plurals, so the plural needs the check too)."""
    text = (
        "# Keywords\n\nUse `return` to leave a function and `try` to catch errors.\n\n"
        "The cmdlet returns a string and tries again after a failure.\n"
    )
    spans, _ = analyse(text)
    assert "returns" not in surfaces(spans) and "tries" not in surfaces(spans), surfaces(spans)


def test_coreference_to_the_subject(analyse):
    text = (
        "# Quarry Scheduler\n\nThe Quarry Scheduler plans the nightly jobs. It is owned by Team Basin. "
        "Once a day the scheduler reads the calendar.\n"
    )
    spans, rels = analyse(text)
    corefs = {s.surface: s.refers for s in spans if s.source == "coref"}
    assert corefs.get("It") == "Quarry Scheduler"
    assert corefs.get("the scheduler") == "Quarry Scheduler"
    assert ("Quarry Scheduler", "owned_by", "Team Basin") in triples(rels)


def test_it_after_a_description_is_the_description_not_the_last_name(analyse):
    """ "This command gets the files of the Quarry Server. It uses ...": "it" is the command; a
    description that stands for a name ("The scheduler ... It ...") still leads to the name."""
    text = (
        "# Spool-Item\n\nThis command gets the spooled files of the Quarry Server. It uses the Strata Index.\n\n"
        "The Ferry Relay keeps the spool. It uses the Lumen Index.\n"
    )
    spans, rels = analyse(text)
    corefs = [(s.surface, s.refers) for s in spans if s.source == "coref"]
    assert ("It", "Quarry Server") not in corefs, corefs
    assert ("Quarry Server", "uses", "Strata Index") not in triples(rels), triples(rels)
    assert ("Ferry Relay", "uses", "Lumen Index") in triples(rels), triples(rels)
    # a paragraph after an example's code, or after a paragraph whose subject is a description
    text = (
        "# Spool-Item\n\nThe Quarry Server keeps spools.\n\n```\nSpool-Item C:\\Ferry\\*.log\n```\n\n"
        "It uses the Strata Index.\n\nThis example reads the Quarry Server log.\n\nIt uses the Lumen Index.\n"
    )
    spans, rels = analyse(text)
    assert not [t for t in triples(rels) if t[0] in ("Quarry Server", "Ferry") and t[1] == "uses"], triples(rels)
    # an "it" that is the main subject after an introductory clause continues the description too
    text = (
        "# Spool-Item\n\nInstead, the command uses the **Harbor** parameter to name the hosts. To list the "
        "hosts, it uses the `Get-Fellgate` cmdlet to read the hosts file.\n"
    )
    spans, rels = analyse(text)
    assert not [t for t in triples(rels) if t[2] == "Get-Fellgate" and t[0] != "Spool-Item"], triples(rels)
    text = "# Quarry Scheduler\n\nThe Quarry Scheduler plans jobs.\n\nThe scheduler reads the calendar. It uses the Lumen Index.\n"
    spans, rels = analyse(text)
    assert ("Quarry Scheduler", "uses", "Lumen Index") in triples(rels), triples(rels)
    # a name inside the description does not stand for it: "each instance of X" is an instance
    text = (
        "# Spool-Item\n\nThis command stops the Ferry Relay. Each instance of Ferry Relay runs alone. "
        "It uses the Strata Index.\n"
    )
    spans, rels = analyse(text)
    assert ("It", "Ferry Relay") not in [(s.surface, s.refers) for s in spans if s.source == "coref"]
    # spaCy takes "drive" for the verb and hangs "This command gets ..." under it: the subject
    # is still the command's, not the name written after it
    text = (
        "# Spool Provider\n\nThis command gets the `spool` function from the `Quarry:` drive. It uses the\n"
        "`Get-Fellgate` cmdlet to get the function.\n"
    )
    spans, rels = analyse(text)
    assert not [s for s in spans if s.source == "coref" and s.refers == "spool"], [
        (s.surface, s.refers) for s in spans if s.source == "coref"
    ]
    assert not [t for t in triples(rels) if t[0] == "spool" and t[1] == "uses"], triples(rels)
    assert not [t for t in triples(rels) if t[0] == "Ferry Relay"], triples(rels)
    # the same with a line break that leaves the parser no verb ("Each instance of Ferry Relay\nruns")
    text = (
        "# Spool-Item\n\nThis command stops all instances of the Ferry Relay process on the computer. Each instance of "
        "Ferry Relay\nruns in its own process. It uses the **Strata** parameter to name the processes.\n"
    )
    spans, rels = analyse(text)
    assert not [t for t in triples(rels) if t[0] == "Ferry Relay"], triples(rels)
    # "it" after an "it" that stood for nothing is that same nothing, not the name just written
    text = (
        "# Spool-Item\n\nThe Quarry Server keeps spools.\n\n```\nSpool-Item -Path C:\\x -Force\n```\n\n"
        "It uses the **Path** parameter to name the file. It uses the **Force** parameter too.\n\n"
        "The Ferry Relay keeps the spool. It uses the Lumen Index. It also uses the Strata Index.\n"
    )
    spans, rels = analyse(text)
    assert not [t for t in triples(rels) if t[0] in ("Path", "Quarry Server")], triples(rels)
    assert {("Ferry Relay", "uses", "Lumen Index"), ("Ferry Relay", "uses", "Strata Index")} <= triples(rels)


def test_coordinated_objects_and_inverse_triggers(analyse):
    text = "Team Basin owns the Quarry Scheduler, the Lumen Index and the Ferry Relay.\n"
    _, rels = analyse(text)
    assert {
        ("Quarry Scheduler", "owned_by", "Team Basin"),
        ("Lumen Index", "owned_by", "Team Basin"),
        ("Ferry Relay", "owned_by", "Team Basin"),
    } <= triples(rels)


def test_negated_statements_are_not_relations(analyse):
    _, rels = analyse("The Lumen Index never calls the Ferry Relay directly.\n")
    assert not any(r["rel"] == "uses" for r in rels)


def test_structural_rules(analyse):
    text = (
        "# Lumen Index\n\n**Owner:** Team Basin\n\n## Dependencies\n\n"
        "- **Ferry Relay**: required; the index cannot start without it.\n"
        "- **Borealis Cache**: speeds up reads.\n\n"
        "## Upgrades\n\nWe upgraded Borealis Cache from v2.1.0 to v2.2.0. Escalation: Hollis Varga -> Ona Pike.\n"
    )
    _, rels = analyse(text)
    t = triples(rels)
    assert ("Lumen Index", "owned_by", "Team Basin") in t
    assert ("Lumen Index", "depends_on", "Ferry Relay") in t
    assert ("Lumen Index", "uses", "Borealis Cache") in t
    assert ("v2.1.0", "precedes", "v2.2.0") in t
    assert ("Hollis Varga", "precedes", "Ona Pike") in t


def test_evidence_points_at_the_sentence(analyse):
    text = "# Ferry Relay\n\nThe Ferry Relay is built on the Borealis Cache.\n"
    _, rels = analyse(text)
    (rel,) = [r for r in rels if r["rel"] == "depends_on"]
    ev = rel["evidence"]
    assert text[ev["start"] : ev["end"]].strip() == ev["sentence"] == "The Ferry Relay is built on the Borealis Cache."
    assert 0 < rel["confidence"] <= 1


def test_gazetteer_matches_case_and_boundaries():
    g = Gazetteer([GazTerm("Lumen", "PRODUCT", 3, "name"), GazTerm("settlement batch", "CONCEPT", 2, "bold")])
    text = "lumen and Lumen-2 and Lumen. Settlement batches and a settlement batch."
    hits = [(text[s:e], t) for s, e, t in g.match(text)]
    assert ("Lumen", "Lumen") in hits and ("lumen", "Lumen") not in hits
    assert sum(1 for h, _ in hits if h == "Lumen") == 1  # not inside "Lumen-2"
    assert ("Settlement batches", "settlement batch") in hits and ("settlement batch", "settlement batch") in hits


def test_mining_keeps_titles_bold_code_and_frequent_names():
    docs = [
        {
            "title": "Ferry Relay",
            "text": "# Ferry Relay\n\nUse `ferry-cli` with **Cold window** rules. The cold window is short.\n",
        },
        {"title": "Notes", "text": "Ask Hollis Varga. Hollis Varga knows. Then Hollis Varga left. Always ask first.\n"},
    ]
    terms = {t.term: t.source for t in mine_terms(docs, min_freq=3)}
    assert terms["Ferry Relay"] == "title"
    assert terms["ferry-cli"] == "code"
    assert terms["Cold window"] == "bold"
    assert terms["Hollis Varga"] == "name"
    assert "Notes" not in terms or terms["Notes"] == "title"


def test_mining_drops_the_key_of_key_value_lines_but_keeps_a_glossary_term():
    """ "Default value: None" under every parameter is a field's name, even where a page writes it in
    bold; a glossary's "**Cold window**: ..." line is one of the term's uses, and stays a name."""
    params = "\n\n".join(f"### -Param{i}\n\n```yaml\nType: String\nDefault value: None\n```" for i in range(6))
    docs = [
        {"title": "Get-Ferry", "text": f"# Get-Ferry\n\nThe **Default value** column lists defaults.\n\n{params}\n"},
        {"title": "Set-Ferry", "text": "# Set-Ferry\n\nSee the **Default value** of each parameter.\n"},
        {
            "title": "Glossary",
            "text": "# Glossary\n\n- **Cold window**: the half hour when the relay rests.\n\n"
            "The Cold window starts at 01:30. Nothing ships in the Cold window.\n",
        },
    ]
    terms = {t.term for t in mine_terms(docs, min_freq=3)}
    assert "Default value" not in terms, terms
    assert "Cold window" in terms and "Get-Ferry" in terms, terms


def test_a_collection_page_has_no_single_subject(extractor):
    from kgr.stages.textmodel import parse_document

    for title, expect in (("Engineering Glossary", None), ("Team FAQ", None), ("Lumen Index", "Lumen Index")):
        doc = parse_document(f"# {title}\n\nThe Ferry Relay is owned by Team Basin.\n", title=title)
        extractor.mentions(doc)
        assert (doc.subject.surface if doc.subject else None) == expect, title


def test_reference_lists_cite_standards_and_refer_to_other_documents(analyse):
    text = (
        "# Backup Policy\n\nThe Backup Policy sets how long snapshots are kept.\n\n## 4. References\n\n"
        "- ISO 22301, clause 8.4: business continuity\n- Storage Handling Policy (POL-021)\n"
    )
    _, rels = analyse(text)
    got = triples(rels)
    assert ("Backup Policy", "cites", "ISO 22301") in got
    assert ("Backup Policy", "refers_to", "Storage Handling Policy") in got
    assert ("Backup Policy", "cites", "Storage Handling Policy") not in got


def test_it_in_a_clause_under_a_description_is_that_description(analyse):
    """ "This manifest declares that it requires X", "... define the new spool and use it as Y":
    "it" is the description a clause above it has as subject or object, not the name of the
    sentence before. A description in a clause below ("To renew the lease, it calls X") is not."""
    text = (
        "# Spool-Item\n\nThe **Quarry Server** keeps spools. This manifest declares that it requires the Strata Index.\n\n"
        "The **Ferry Relay** holds jobs. The Spool-Item cmdlet can define the new spool and use it as the Lumen Index.\n"
    )
    spans, rels = analyse(text)
    corefs = [(s.surface, s.refers) for s in spans if s.source == "coref"]
    assert ("it", "Quarry Server") not in corefs and ("it", "Ferry Relay") not in corefs, corefs
    assert not [t for t in triples(rels) if t[0] in ("Quarry Server", "Ferry Relay")], triples(rels)
    text = "# Quarry Scheduler\n\nThe Quarry Scheduler plans jobs. To renew the lease, it calls the Strata Index.\n"
    spans, rels = analyse(text)
    assert ("it", "Quarry Scheduler") in [(s.surface, s.refers) for s in spans if s.source == "coref"]


def test_object_pronouns_and_leading_clauses(analyse):
    text = (
        "# Quarry Scheduler\n\nThe Quarry Scheduler plans every batch. Storage Guild owns it.\n\n"
        "1. When Borealis confirms the plan, the scheduler starts the run.\n"
        "2. At noon it sends a report to Hollis Varga.\n"
    )
    spans, rels = analyse(text)
    owned = [r for r in rels if r["rel"] == "owned_by"]
    assert ("Quarry Scheduler", "owned_by", "Storage Guild") in triples(owned)
    it = [s for s in spans if s.source == "coref" and s.surface == "it"]
    assert it and all(s.refers == "Quarry Scheduler" for s in it)  # never "Storage Guild", never "Borealis"


def test_interfaces_of_a_service_are_its_parts(analyse):
    text = (
        "# Quarry Scheduler\n\nThe Quarry Scheduler plans batches.\n\n## Interfaces\n\n"
        "- gRPC: `PlanBatch`, `CancelBatch`.\n"
    )
    _, rels = analyse(text)
    got = triples(rels)
    assert ("PlanBatch", "part_of", "Quarry Scheduler") in got and ("CancelBatch", "part_of", "Quarry Scheduler") in got


def test_both_after_two_clauses_and_decision_error_codes(analyse):
    text = (
        "# ADR-031: Reject unbalanced batches\n\n"
        "The scheduler rejects an unbalanced batch with the error `ERR_BATCH_SKEW`.\n\n"
        "Quarry Store is the planner, and Borealis Queue is the queue that feeds it. Both are run by Storage Guild.\n"
    )
    _, rels = analyse(text)
    got = triples(rels)
    assert ("ADR-031", "defines", "ERR_BATCH_SKEW") in got
    assert ("Quarry Store", "owned_by", "Storage Guild") in got and (
        "Borealis Queue",
        "owned_by",
        "Storage Guild",
    ) in got
    assert ("ADR-031", "owned_by", "Storage Guild") not in got


def test_parsing_many_documents_in_one_stream_extracts_what_one_at_a_time_does(extractor):
    from kgr.stages.extract import extract_doc
    from kgr.stages.textmodel import parse_document

    texts = {
        "a.md": "# Billing Gateway\n\nThe Billing Gateway is owned by Hollis Varga. It depends on the Quarry Scheduler.\n",
        "b.md": "# Quarry Scheduler\n\nThe scheduler runs in eu-west-2.\n\n```\ncode block\n```\n\nIt uses `ChargeCard`.\n",
        "c.md": "Plain text without a heading, naming Borealis and Hollis Varga.\n",
    }
    docs = {p: {"kind": "doc", "path": p, "title": None, "text": t, "hash": p} for p, t in texts.items()}
    chunks = {
        p: [{"kind": "chunk", "doc": p, "ord": 0, "start": 0, "end": len(t), "text": t}] for p, t in texts.items()
    }
    one_by_one = {p: extract_doc(extractor, docs[p], chunks[p]) for p in texts}
    parsed = {p: parse_document(t, path=p) for p, t in texts.items()}
    extractor.parse_many(list(parsed.values()))
    assert all(len(d.parsed_blocks) == len(d.blocks) for d in parsed.values())
    streamed = {p: extract_doc(extractor, docs[p], chunks[p], parsed[p]) for p in texts}
    assert streamed == one_by_one
    assert any(r["kind"] == "mention" and r["surface"] == "Hollis Varga" for r in streamed["a.md"])


def test_every_page_title_survives_the_cap_on_mined_terms():
    # more pages than the cap: each still gets its title as a term; the cap bounds the rest
    docs = [
        {"title": f"Station {chr(65 + i // 26)}{chr(65 + i % 26)}", "text": "Run by Harbor Transit. " * 3}
        for i in range(60)
    ]
    terms = mine_terms(docs, topk=10, min_freq=3)
    titles = [t.term for t in terms if t.source == "title"]
    assert len(titles) == 60 and "Station AA" in titles and "Station CH" in titles
    assert "Harbor Transit" in [t.term for t in terms if t.source != "title"]
    assert len([t for t in terms if t.source != "title"]) <= 10


def test_redaction_tags_are_never_mentions(analyse):
    import re

    from kgr.stages.redact import redact

    key = "AKIA" + "QX7RZ2M4VB6NC3PT"
    text, counts = redact(
        "# Deploy Keys for Harbor Relay\n\n"
        f"Maria Lopez rotated the key {key} on Monday; the old one was **{key}**.\n\n"
        "| Service | Secret |\n|---|---|\n| Harbor Relay | password=Zq8#Lm2vT7x |\n\n"
        f"See [{key}](https://example.org/keys) and `{key}` (ask Tomas Berg).\n",
        key=b"k",
    )
    assert counts == {"aws-access-key-id": 4, "generic-secret": 1}
    # The tags in every form the text may carry them: bracketed, as a link label, in a bare "REDACTED:rule:digest".
    text += (
        "\nThe Quarry Scheduler logs REDACTED:generic-secret:0123abcd (in code font: `REDACTED:jwt:4567cdef`) "
        "when Ines Okafor signs in.\n"
    )
    spans, rels = analyse(text, title="Deploy Keys [REDACTED:aws-access-key-id:89abcdef]")
    found = [s.surface for s in spans] + [s.refers or "" for s in spans]
    assert not [f for f in found if "REDACTED" in f], found
    tags = [m.span() for m in re.finditer(r"\[?REDACTED:[a-z-]+:[0-9a-f]{8}\]?", text)]
    assert not [s for s in spans if any(s.start < e and b < s.end for b, e in tags)]
    assert {"Maria Lopez", "Tomas Berg", "Ines Okafor"} <= set(found)  # the prose around the tags is still read
    assert not [r for r in rels if "REDACTED" in r["src"] + r["dst"]]


def test_mined_terms_take_nothing_from_redaction_tags():
    tag_a, tag_b = "[REDACTED:generic-secret:0123abcd]", "[REDACTED:aws-access-key-id:89abcdef]"
    docs = [
        {
            "title": f"Generic Secret Store {tag_a}",
            "text": f"# Generic Secret Store\n\nThe **{tag_b}** key and `REDACTED:jwt:4567cdef` rotate; "
            f"password={tag_a} and {tag_b} again.\n",
        }
    ] * 3
    terms = [t.term for t in mine_terms(docs, min_freq=1)]
    assert "Generic Secret Store" in terms
    assert not [t for t in terms if "REDACTED" in t or t in ("generic-secret", "aws-access-key-id")], terms


def test_a_scripts_variable_is_no_name_but_an_environment_variable_is(analyse):
    text = (
        "# Ferry Tool\n\n`$SpoolReport` was created by using the `New-Spool` cmdlet with the **SpoolReport** class. "
        "Set `$FERRY_DATA_DIR` before starting the Ferry Tool.\n"
    )
    spans, _ = analyse(text)
    names = {(s.surface, s.start) for s in spans}
    variable = text.index("$SpoolReport") + 1
    assert not [n for n in names if n[1] == variable], names  # "$SpoolReport": a variable of the example
    assert ("SpoolReport", text.index("**SpoolReport**") + 2) in names  # the class, written as a name
    assert "FERRY_DATA_DIR" in surfaces(spans)


def test_a_letter_of_a_slashed_abbreviation_is_no_name(analyse):
    spans, _ = analyse(
        "# Sifter\n\nThe first Sifter run causes higher disk I/O for a few hours.\n\n"
        "We ran A/B tests of Plan B, written in C.\n"
    )
    names = surfaces(spans)
    assert "O" not in names and "B" not in names, names  # "I/O", "A/B"
    assert "Plan B" in names and "C" in names, names  # a letter that is a name stays one


def test_a_one_word_name_the_text_writes_inside_a_sentence_is_a_name_opening_one(analyse):
    text = (
        "# Hotel Adlon\n\nThe Hotel Adlon is a luxury hotel in Berlin. It lists its rooms.\n\n"
        "Berlin is a city in Germany.\n\n- Lists the rooms of the hotel.\n"
    )
    spans, _ = analyse(text)
    names = {(s.surface, s.start, s.type) for s in spans}
    assert ("Berlin", text.index("Berlin is"), "LOCATION") in names, names
    assert not [n for n in names if n[0] == "Lists"], names  # a verb opening an item stays a verb


def test_a_name_inside_a_word_of_the_title_is_not_the_pages_subject(extractor):
    """ "dir" is in "about_redirection" only as letters of another word: it names nothing there."""
    from kgr.stages.textmodel import parse_document

    text = (
        "# about_Redirection\n\n## Examples\n\nThis example runs `dir` on an item that does not exist.\n\n"
        "For example, using the native command `curl` you can download a binary file.\n"
    )
    doc = parse_document(text, title="about_Redirection")
    spans = extractor.mentions(doc)
    assert "dir" in {s.surface for s in spans}
    assert doc.subject is None or doc.subject.surface != "dir", doc.subject.surface
    # a word of its own still names the page: "Redirection" in "about_Redirection"
    doc = parse_document(text.replace("runs `dir`", "runs `Redirection`"), title="about_Redirection")
    extractor.mentions(doc)
    assert doc.subject is not None and doc.subject.surface == "Redirection"
    # and so does one whose plural the title writes: "Job" in "about_Jobs"
    doc = parse_document(text.replace("runs `dir`", "runs `Job`"), title="about_Jobs")
    extractor.mentions(doc)
    assert doc.subject is not None and doc.subject.surface == "Job"


def test_the_group_is_the_nearest_team_even_one_typed_otherwise():
    """ "It is maintained by the Query WG; Yusra leads the group": the group is the Query WG, by its
    name's head word where its type is wrong, not the page's subject."""
    from kgr.stages.extract import Span, _nominal_target

    page = Span(0, 5, "Cairn", "COMPONENT", "ner", 0.9, {})
    team = Span(40, 48, "Query WG", "PRODUCT", "ner", 0.9, {})
    assert _nominal_target("group", [page, team], 80, page) is team
    assert _nominal_target("group", [page], 80, page) is page  # no group named: the page's own team


def test_an_advisory_id_with_a_year_is_one_id(analyse):
    """ "QSA-2025-003" is an advisory id as "CVE-2024-3094" is (prefix, year, number), not a
    "QSA-2025" cut short; "ISO-8859-1" has no year in it and is no ticket."""
    spans, _ = analyse("# Security\n\nQSA-2025-003 was fixed in 2.1.1, as CVE-2024-3094 was. Files use ISO-8859-1.\n")
    tickets = {s.surface for s in spans if s.features.get("pattern") == "ticket"}
    assert {"QSA-2025-003", "CVE-2024-3094"} <= tickets, tickets
    assert not [t for t in tickets if t.startswith("ISO")], tickets


def test_two_names_the_text_also_writes_apart_are_not_joined_by_and(analyse):
    """spaCy may read "Anvil and Granary" as one organisation; where the text names each alone too
    they are two names, and "the working group" is the group named before it, which owns both."""
    spans, relations = analyse(
        "# Maintainers\n\nHaruto Sakamoto leads the Infra WG. The working group operates Anvil and Granary "
        "and owns the pools.\n\nWe built Anvil in 2020 and we moved Granary to a new host later.\n"
    )
    assert "Anvil and Granary" not in surfaces(spans), surfaces(spans)
    got = triples(relations)
    assert {("Anvil", "owned_by", "Infra WG"), ("Granary", "owned_by", "Infra WG")} <= got, got


def test_a_name_versioned_at_its_end_is_typed_by_the_word_before_the_number(analyse):
    """ "Apache License 2.0" is a licence (a standard a charter cites), "Governance Charter" a policy."""
    spans, relations = analyse(
        "# Governance Charter\n\nThe Governance Charter sets how the project is run.\n\n"
        "All code is contributed under the Apache License 2.0. The project follows Semantic Versioning 2.0.0.\n"
    )
    got = {s.surface: s.type for s in spans}
    assert got["Apache License 2.0"] == "STANDARD" and got["Governance Charter"] == "POLICY", got
    assert ("Governance Charter", "cites", "Apache License 2.0") in triples(relations), triples(relations)


def test_a_one_word_heading_the_text_names_again_is_a_name(analyse):
    """ "## Granary" over sentences that open with "Granary": the word is a name wherever it stands;
    "## Overview", which the text writes in lower case, stays a label."""
    text = (
        "# Build Services\n\nAn overview of the services.\n\n## Overview\n\nTwo services run here.\n\n"
        "## Granary\n\nGranary is the artifact store. Granary runs in nb-eu-north-1 and is mirrored hourly.\n\n"
        "## Outputs\n\n### None\n\nNone is returned. None of the runs write output.\n"
    )
    spans, relations = analyse(text)
    names = {(s.surface, s.start) for s in spans}
    assert ("Granary", text.index("Granary runs")) in names, names
    assert not [n for n in names if n[0] in ("Overview", "None")], names
    assert ("Granary", "located_in", "nb-eu-north-1") in triples(relations), triples(relations)


def test_a_long_gap_between_two_names_is_no_join_and_costs_nothing():
    """Whether a name stands alone reads the gap to its neighbours; a long run of spaces between
    two names (a page's blank lines, an indented block) must not send the join pattern into
    backtracking (34 spaces took hours before the gap was bounded). Run apart with a generous limit."""
    import subprocess
    import sys

    code = (
        "from kgr.stages.extract import _join_names, Span\n"
        "text = 'Anvil' + ' ' * 34 + '- Granary'\n"
        "a = Span(0, 5, 'Anvil', 'ORG', 'name', 0.6, {})\n"
        "b = Span(len(text) - 7, len(text), 'Granary', 'ORG', 'name', 0.6, {})\n"
        "print(len(_join_names(text, [a, b], [])))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "2", out.stderr


def test_a_name_the_text_wraps_at_a_line_end_is_one_name(analyse):
    # a paragraph hard-wrapped at its column: the break inside "Domain Admins" starts no sentence
    text = (
        "# Spool Settings\n\n"
        "Specifies the security groups of the spool account when a session that uses the settings\n"
        "is run as a spool account. If omitted, the spool account belongs to Quarry Domain\n"
        "Operators on the main servers and to Local Operators on all of the other computers.\n"
    )
    spans, _ = analyse(text)
    names = [" ".join(s.split()) for s in surfaces(spans)]
    assert "Quarry Domain Operators" in names, names  # one name across the break
    assert "Quarry Domain" not in names, names
    wrapped = next(s for s in spans if s.surface.startswith("Quarry Domain"))
    assert wrapped.surface == text[wrapped.start : wrapped.end]  # the mention is the text as written


def test_it_after_a_purpose_clause_is_the_main_subject_not_a_name_in_the_purpose(analyse):
    text = (
        "# Window Tools\n\n"
        "To shrink the Harbor Shell console, `Fold-Window` uses the `Get-Lantern` cmdlet to find the\n"
        "process. Then it uses the **Handle** property of the process to fold the window.\n"
    )
    spans, rels = analyse(text)
    it = [s for s in spans if s.source == "coref" and s.surface == "it"]
    assert it and all(s.refers == "Fold-Window" for s in it), [(s.surface, s.refers) for s in it]
    assert ("Fold-Window", "uses", "Handle") in triples(rels), triples(rels)
    assert not [r for r in rels if r["src"] == "Harbor Shell"], triples(rels)
