"""Where a name begins and ends: initials, a capitalised "The", titles, possessives, names spaCy
joins or splits, quoted titles and surnames (texts written for these tests)."""

from kgr.stages.extract import Span, _join_names, _name_runs, _split_names, _trim_titles, _versioned_names


def runs(text):
    return [text[s:e] for s, e in _name_runs(text, {0})]


def test_initials_belong_to_the_name_and_a_final_one_loses_its_full_stop():
    assert runs("He moved to the U.S. and met Arlo P. Quenby there.") == ["U.S.", "Arlo P. Quenby"]
    assert runs("It came from Plan B. The next day J.R.R. Vantor wrote.") == ["Plan B", "J.R.R. Vantor"]


def test_a_capitalised_the_inside_a_sentence_opens_the_name():
    assert runs("It was a hit for The Marrow Brothers in 1958.") == ["The Marrow Brothers"]
    assert runs("The Marrow Brothers toured. (1) The Quill renderer runs.")[0] == "Marrow Brothers"
    assert "The Quill" not in runs("Two things. (1) The Quill renderer runs.")


def test_possessive_and_adjective_suffixes_are_not_part_of_the_name():
    assert runs("They were friends until Orrin Dask' death.") == ["Orrin Dask"]
    assert runs("The film was Brevio-nominated in the Caldish-language press.") == ["Brevio", "Caldish"]
    assert runs("Ledger-Svc runs") == []  # a sentence-initial single word stays out


def _span(text, surface, source="name", type_="ORG", label=None, nth=1):
    start = -1
    for _ in range(nth):
        start = text.index(surface, start + 1)
    sp = Span(start, start + len(surface), surface, type_, source, 0.6)
    if label:
        sp.features["ner_label"] = label
    return sp


def test_names_spacy_reads_as_one_are_joined_only_across_connectors():
    text = "They met the Council for Harbour Order and Tamsin & Reeve at Veld Basin."
    primary = [_span(text, s) for s in ("Council", "Harbour Order", "Tamsin", "Reeve", "Veld Basin")]
    ner = [
        _span(text, "Council for Harbour Order", "ner", "ORG", "ORG"),
        _span(text, "Tamsin & Reeve", "ner", "ORG", "ORG"),
        _span(text, "Reeve at Veld Basin", "ner", "ORG", "ORG"),  # "at" joins nothing
    ]
    got = sorted(sp.surface for sp in _join_names(text, primary, ner))
    assert got == ["Council for Harbour Order", "Tamsin & Reeve", "Veld Basin"]  # "at" never joins
    # terms of the gazetteer are names of their own: joined across "&" or a possessive only
    text = "They met Orrel and Tamsin & Reeve."
    gaz = [_span(text, s, "gazetteer") for s in ("Orrel", "Tamsin", "Reeve")]
    ner = [
        _span(text, "Orrel and Tamsin & Reeve", "ner", "ORG", "ORG"),
        _span(text, "Tamsin & Reeve", "ner", "ORG", "ORG"),
    ]
    assert sorted(sp.surface for sp in _join_names(text, gaz, ner)) == ["Orrel", "Tamsin & Reeve"]


def test_names_spacy_reads_as_several_are_split():
    text = "She joined fellow Vandric Oren Halley and Tobin Rusk of Caldera Port."
    primary = [_span(text, "Vandric Oren Halley"), _span(text, "Tobin Rusk of Caldera Port")]
    ner = [
        _span(text, "Vandric", "ner", "CONCEPT", "NORP"),
        _span(text, "Oren Halley", "ner", "PERSON", "PERSON"),
        _span(text, "Tobin Rusk", "ner", "PERSON", "PERSON"),
        _span(text, "Caldera Port", "ner", "LOCATION", "GPE"),
    ]
    got = [(sp.surface, sp.type) for sp in _split_names(text, primary, ner)]
    assert got == [
        ("Vandric", "CONCEPT"),
        ("Oren Halley", "PERSON"),
        ("Tobin Rusk", "PERSON"),
        ("Caldera Port", "LOCATION"),
    ]
    assert [sp.surface for sp in _split_names(text, primary[1:], [])] == ["Tobin Rusk of Caldera Port"]
    # an entity spanning the whole name keeps it whole
    whole = [_span(text, "Tobin Rusk of Caldera Port", "ner", "ORG", "ORG"), *ner]
    assert [sp.surface for sp in _split_names(text, [_span(text, "Tobin Rusk of Caldera Port")], whole)] == [
        "Tobin Rusk of Caldera Port"
    ]


def test_a_full_name_then_of_and_an_organisation_or_an_unread_name_are_two():
    text = "It was produced by Tobin Rusk of Hollow Lantern Crew, and Maren Solt of Vantor spoke."
    primary = [_span(text, "Tobin Rusk of Hollow Lantern Crew"), _span(text, "Maren Solt of Vantor")]
    ner = [
        _span(text, "Tobin Rusk", "ner", "PERSON", "PERSON"),  # spaCy reads no entity in "Hollow Lantern Crew"
        _span(text, "Maren Solt", "ner", "PERSON", "PERSON"),
        _span(text, "Vantor", "ner", "ORG", "ORG"),
    ]
    got = [(sp.surface, sp.type) for sp in _split_names(text, primary, ner)]
    assert [g[0] for g in got] == ["Tobin Rusk", "Hollow Lantern Crew", "Maren Solt", "Vantor"]
    assert got[0][1] == got[2][1] == "PERSON" and got[3][1] == "ORG"
    # one given name before "of" is one name ("Joan of Arc"); so is an organisation before "of"
    text = "Orla of Brenn met the Guild Office of Tallis."
    primary = [_span(text, "Orla of Brenn"), _span(text, "Guild Office of Tallis")]
    ner = [_span(text, "Orla", "ner", "PERSON", "PERSON"), _span(text, "Guild Office", "ner", "ORG", "ORG")]
    assert [sp.surface for sp in _split_names(text, primary, ner)] == ["Orla of Brenn", "Guild Office of Tallis"]


def test_titles_before_a_name_and_titles_alone():
    text = "Prime Minister Ilsa Varn met the Chairman and the Governor of Velmar."
    primary = [_span(text, "Prime Minister Ilsa Varn"), _span(text, "Chairman"), _span(text, "Governor of Velmar")]
    assert [sp.surface for sp in _trim_titles(text, primary)] == ["Ilsa Varn", "Velmar"]
    kept = [_span(text, "Prime Minister Ilsa Varn", "gazetteer"), _span(text, "Chairman", "gazetteer")]
    assert [sp.surface for sp in _trim_titles(text, kept)] == ["Prime Minister Ilsa Varn"]


def test_a_year_between_the_and_a_name_belongs_to_it():
    text = "She raced at the 1998 Merrow Games and in 1999 Merrow Cup."
    primary = [_span(text, "Merrow Games", "gazetteer"), _span(text, "Merrow Cup")]
    assert [sp.surface for sp in _trim_titles(text, primary)] == ["1998 Merrow Games", "Merrow Cup"]


def test_quoted_titles_and_surnames_at_sentence_starts(analyse):
    text = (
        "Dorian Kessvale wrote the songs. Kessvale recorded \"Leave It to Marnie\" and 'a small tune' "
        "in the spring. Later Dorian sang it.\n"
    )
    spans, _ = analyse(text)
    names = [s.surface for s in spans if s.source != "coref"]
    assert "Leave It to Marnie" in names and "Marnie" not in names
    assert names.count("Kessvale") == 1 and "Dorian Kessvale" in names
    assert not any("small" in n for n in names)


def test_a_name_of_several_words_keeps_its_edition_number():
    text = "Pages follow Tarn Layout Rules 2.1. Brisk 1.9.6 reads Otter Grid 3.6 files."
    primary = [
        _span(text, "Tarn Layout Rules"),
        _span(text, "Brisk", type_="PRODUCT"),
        _span(text, "1.9.6", "regex", "VERSION"),
        _span(text, "Otter Grid"),
    ]
    got = [(sp.surface, sp.features.get("base")) for sp in _versioned_names(text, primary)]
    assert got == [
        ("Tarn Layout Rules 2.1", "Tarn Layout Rules"),
        ("Brisk", None),
        ("1.9.6", None),
        ("Otter Grid 3.6", "Otter Grid"),
    ]


def test_a_title_the_first_sentence_opens_with_is_one_name_in_both(analyse):
    text = "# Velora minima\n\nVelora minima is a flowering plant of the Orrin Hills. Velora grows on rocks.\n"
    spans, _ = analyse(text, title="Velora minima")
    got = [(s.surface, s.start) for s in spans if s.features.get("lead_title")]
    assert got == [("Velora minima", 2), ("Velora minima", 17)]
    assert "Orrin Hills" in [s.surface for s in spans]
    # the sentence must go on with a verb, and restate the whole title
    for text in (
        "# Velora minima\n\nVelora minima, a plant, grows on rocks.\n",
        "# Velora minima seeds\n\nVelora minima is a flowering plant.\n",
    ):
        spans, _ = analyse(text, title=text.splitlines()[0][2:])
        assert not any(s.features.get("lead_title") for s in spans)


def test_a_page_title_ending_in_a_number_names_that_page_alone(tmp_path):
    """ "Heinkel HD 23" and "Heinkel HD 39" are two aircraft: each title is a name with its
    number, and a mention of one elsewhere links to that one, not to a shared "Heinkel HD"."""
    from click.testing import CliRunner

    from kgr.cli import cli
    from kgr.store import Store

    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("# Varn HX 23\n\nThe Varn HX 23 was a fighter biplane built at Varn Works.\n")
    (root / "b.md").write_text("# Varn HX 39\n\nThe Varn HX 39 was a cargo aircraft built at Varn Works.\n")
    (root / "c.md").write_text(
        "# Ostra Fleet\n\n## Example 1\n\nThe Ostra Fleet bought two Varn HX 23 fighters in 1927.\n"
    )
    (root / "d.md").write_text("# Fleet Review: 11 June 2024\n\nThe Ostra Fleet met on 11 June 2024.\n")
    db = tmp_path / "kb.sqlite"
    cfg = tmp_path / "config.yaml"
    cfg.write_text("embed:\n  stub: true\nnormalize:\n  workers: 1\n")
    r = CliRunner().invoke(cli, ["ingest", str(root), "--db", str(db), "--config", str(cfg), "--no-embed"])
    assert r.exit_code == 0, r.output
    with Store(db, readonly=True) as store:
        names = {row[0] for row in store.query("SELECT name FROM entities WHERE status = 'active'")}
        linked = store.query(
            "SELECT e.name FROM mentions m JOIN entities e ON e.id = m.entity_id JOIN chunks c ON c.id = m.chunk_id "
            "JOIN docs d ON d.id = c.doc_id WHERE d.path = 'c.md' AND m.surface LIKE 'Varn%'"
        )
    assert {"Varn HX 23", "Varn HX 39"} <= names
    assert "Varn HX" not in names
    assert [row[0] for row in linked] == ["Varn HX 23"]
    assert "Example 1" not in names  # a numbered heading labels a section; only a page's title is read so
    assert "Fleet Review: 11 June 2024" not in names  # a dated record's title: its date stays a date


def test_a_page_title_with_of_the_is_one_name(analyse):
    """ "Battle of the Varn River" names one thing, in its title and in its text: "the" after
    "of" joins the title's names, as "of" does; elsewhere in a title, and in a heading, it does not."""
    from kgr.stages.extract import mine_terms

    text = "# Battle of the Varn River\n\nThe Battle of the Varn River was fought by the Ostra Fleet.\n"
    docs = [
        {"title": "Battle of the Varn River", "text": text},
        {"title": "Orrin Hills (film)", "text": "# Orrin Hills (film)\n\n## Tour of the Orrin Hills\n\nA film.\n"},
        {"title": "Walk to the Orrin Hills", "text": "# Walk to the Orrin Hills\n\nA walk.\n"},
    ]
    terms = {t.term: t.source for t in mine_terms(docs, min_freq=1)}
    assert terms.get("Battle of the Varn River") == "title"
    assert "Tour of the Orrin Hills" not in terms  # a heading's "of the" stays a break
    assert "Walk to the Orrin Hills" not in terms  # "to the": no name by spelling
    spans, _ = analyse(text, title="Battle of the Varn River")
    battles = [s.start for s in spans if s.surface == "Battle of the Varn River"]
    assert battles == [2, text.index("Battle", 10)], [(s.surface, s.start) for s in spans]
