"""The trigger rules of kgr.stages.relations: who a sentence says acts."""

import textwrap

import pytest

from kgr.stages.relations import extract_relations
from kgr.stages.textmodel import parse_document


@pytest.fixture()
def rules(extractor):
    def run(text: str) -> set[tuple[str, str, str]]:
        doc = parse_document(text, path="t.md")
        spans = extractor.mentions(doc)
        return {(r["src"], r["rel"], r["dst"]) for r in extract_relations(doc, spans)}

    return run


def test_an_instruction_to_the_reader_is_not_the_page_subject_using_something(rules):
    got = rules(
        "# Listing Service\n\nThe Listing Service lists the items in a folder.\n\n"
        "To get only read-only items, use the **ReadOnly** parameter.\n\n"
        "You can use `Format-Listing` to change the output.\n\n"
        "Module authors can prevent name conflicts by using the **DefaultPrefix** setting.\n\n"
        "This command uses the `Sort-Listing` cmdlet to order the items.\n\n"
        "To restart the Spool Daemon without prompting, use the **Force** parameter.\n"
    )
    assert not [t for t in got if t[0] == "Listing Service" and t[1] == "uses"], got
    # nor a name earlier in the sentence
    assert not [t for t in got if t[0] == "Spool Daemon"], got


def test_the_subject_described_or_listing_a_duty_still_uses(rules):
    got = rules(
        "# Ledger Service\n\nThe Ledger Service records payments.\n\n"
        "The service uses the Strata Index to find rows.\n\n"
        "## Duties\n\n- Detect retried requests using the Token Vault.\n"
    )
    assert ("Ledger Service", "uses", "Strata Index") in got, got
    assert ("Ledger Service", "uses", "Token Vault") in got, got


def test_a_clause_without_its_own_subject_uses_for_the_clause_it_modifies(rules):
    """ "jobs started by using X" and "when using X, Y is inferred": whoever starts the jobs or
    passes X uses it, not the name written before; "Sluice loads the rows using X": Sluice does."""
    got = rules(
        "# Wait-Task\n\nYou can use the `Wait-Task` cmdlet to wait for tasks started by using the "
        "`Start-Task` cmdlet.\n\n"
        "As of Tasker 7.1, when using the **SkipSame** parameter, **KeepSame** is inferred.\n\n"
        "The Spool Daemon loads the rows using the Quarry Connector.\n\n"
        "It explains how to use the Strata Index to find rows.\n\n"
        "The cmdlet works on tasks, such as those created by using the `New-Task` cmdlet.\n\n"
        "It lists the modules on the Spool Gallery that were created using Quarry.\n"
    )
    assert ("Wait-Task", "uses", "Start-Task") not in got, got
    assert not [t for t in got if t[2] == "Strata Index"], got  # the reader is told how to use it
    assert not [t for t in got if t[2] in ("New-Task", "Quarry")], got  # the tasks and modules were made with them
    assert not [t for t in got if t[2] == "SkipSame"], got
    assert ("Spool Daemon", "uses", "Quarry Connector") in got, got


def test_a_participle_tagged_active_and_a_they_for_the_qualified_subject_use_nothing(rules):
    """ "interactive **Spools** started by using X": spaCy may hang "Spools" on "started" as its
    active subject, but the spools are started, whoever starts them uses X; "Tasker modules can
    declare what they are compatible with using X": the modules are, not Tasker."""
    got = rules(
        "# Disconnect-Spool\n\n`Disconnect-Spool` cannot disconnect broken or closed **Spools**, or interactive **Spools** "
        "started by using the `Enter-Spool` cmdlet.\n\n"
        "# Tasker Editions\n\nTasker modules can declare what editions of Tasker they are compatible with "
        "using the `CompatibleTaskerEditions` field of the module manifest.\n"
    )
    assert not [t for t in got if t[2] == "Enter-Spool"], got
    assert not [t for t in got if t[2] == "CompatibleTaskerEditions"], got


def test_use_as_a_noun_an_instructions_purpose_or_the_reader_relates_no_name(rules):
    """ "while X is in use" says no one uses X; "To use X, run ..." tells the reader what to do,
    whatever name the sentence also writes; "you must be a member of X" is said of the reader."""
    got = rules(
        "# Spool Daemon\n\nWhen the Spool Daemon is in use, the Quarry Connector waits.\n\n"
        "To use the `Make-Cert` tool with the Spool Daemon, run the following command.\n\n"
        "The Spool Daemon uses the Strata Index to find rows.\n\n"
        "You must be a member of the Operators group to restart the Spool Daemon.\n\n"
        "The Spool Daemon runs, but the user does not need to be a member of the Keepers group.\n"
    )
    assert ("Spool Daemon", "uses", "Quarry Connector") not in got, got
    assert not [t for t in got if {"Operators", "Keepers"} & {t[0], t[2]}], got  # the reader is a member
    assert not [t for t in got if t[2] == "Make-Cert"], got
    assert ("Spool Daemon", "uses", "Strata Index") in got, got


def test_instructions_in_other_forms_and_a_described_noun_relate_no_name(rules):
    """ "omit X or use Y" and a heading "Convert X by using Y" instruct; "it is best to use X"
    is the reader's; "the method implemented by X" is the method's. "X is the service owned by
    Y" still says who owns X."""
    got = rules(
        "# New-Spool\n\nThe `New-Spool` cmdlet creates a spool.\n\n"
        "Default: Use the authentication method implemented by the Quarry Protocol.\n\n"
        "To see hidden items, omit the **Hidden** parameter or use the **Attributes** parameter.\n\n"
        "In practice, it is best to use the **WhatIf** parameter with all `Set-Spool` commands.\n\n"
        "### Example 3: Convert spool rights to a Ledger Object by using ConvertFrom-Spool\n\n"
        "The Ferry Relay is the service owned by Team Basin.\n"
    )
    assert not [t for t in got if t[2] in ("Quarry Protocol", "Attributes", "WhatIf", "ConvertFrom-Spool")], got
    assert ("Ferry Relay", "owned_by", "Team Basin") in got, got


def test_a_value_a_parameter_specifies_or_sets_is_not_a_definition(rules):
    got = rules(
        "# Find-Spool\n\nThe **Pattern** parameter specifies the string **Failed**.\n\n"
        "MachinePolicy is set by a Group Policy for all users.\n\n"
        "Access tokens are JSON Web Tokens as specified in RFC 7519.\n"
    )
    assert not [t for t in got if t[1] == "defines" and t[0] in ("Pattern", "Group Policy")], got
    assert [t for t in got if t[:2] == ("RFC 7519", "defines")], got  # "as specified in" still defines


def test_introduced_in_says_when_introduced_by_says_who(rules):
    got = rules(
        "# Find-Spool\n\nThe **Depth** parameter was introduced in Tasker 3.0.\n\n"
        "The **Strict** mode was introduced in the Quarry module in 2019.\n\n"
        "The **Block Index** was introduced by QRFC-0041.\n"
    )
    assert not [t for t in got if t[1] == "defines" and t[0] in ("Tasker 3.0", "Tasker", "Quarry")], got
    assert [t for t in got if t[:2] == ("QRFC-0041", "defines")], got


def test_a_place_to_be_located_in_may_be_named_by_its_nationality():
    from kgr.stages.extract import Span
    from kgr.stages.relations import types_ok

    def span(surface, typ, label):
        return Span(0, len(surface), surface, typ, "ner", 0.9, {"ner_label": label})

    alberta = span("Alberta", "LOCATION", "GPE")
    # "the Canadian province of Alberta": spaCy calls "Canadian" NORP, whatever type kgr gives it
    assert types_ok("located_in", alberta, span("Canadian", "PRODUCT", "NORP"))
    assert types_ok("located_in", alberta, span("Canada", "LOCATION", "GPE"))
    assert not types_ok("located_in", alberta, span("Int32", "PRODUCT", "PRODUCT"))
    assert not types_ok("located_in", alberta, span("Alice Smith", "PERSON", "PERSON"))
    # a release is no place, however the tagger labels it
    assert not types_ok("located_in", alberta, span("Spooler 3.0", "LOCATION", "GPE"))


def test_a_term_set_off_in_bold_may_be_defined_whatever_ner_calls_it():
    """ "The **Ledger** class defines the **Size** property": spaCy may read "Size" as a person; a name
    the page sets off in bold is a term, and terms are defined. A person in plain text is not."""
    from kgr.stages.extract import Span
    from kgr.stages.relations import types_ok
    from kgr.stages.textmodel import parse_document

    text = "# Props\n\nThe **Ledger** class defines the **Size** property. Ask Alice Smith.\n"
    doc = parse_document(text, path="t.md")

    def span(surface, typ):
        at = text.index(surface)
        return Span(at, at + len(surface), surface, typ, "name", 0.6, {"ner_label": typ})

    ledger = span("Ledger", "CONCEPT")
    assert types_ok("defines", ledger, span("Size", "PERSON"), doc)
    assert not types_ok("defines", ledger, span("Alice Smith", "PERSON"), doc)


def test_an_owner_is_not_a_name_written_as_code(rules):
    """ "The `Start-Job` cmdlet runs a `Get-Process` command": a command runs another, it does not
    own it. Teams, people and companies own things; a name in code font is an identifier (none of
    the 275 annotated owners of golden, golden2 and redocred_dev is written so)."""
    got = rules("# Kestrel\n\nCore Infrastructure runs Kestrel.\n")
    assert ("Kestrel", "owned_by", "Core Infrastructure") in got, got
    got = rules("# Get-Process\n\nThe `Start-Job` cmdlet starts a background job that runs `Get-Process`.\n")
    assert not [t for t in got if t[1] == "owned_by"], got


def test_only_a_team_a_person_or_a_company_runs_a_thing_it_owns(rules):
    """ "X runs Y" says X owns Y when X is a team, a person or a company; a parameter or a
    command that runs another executes it."""
    got = rules("# Ledger Service\n\nThe Payments Team runs the Ledger Service.\n")
    assert ("Ledger Service", "owned_by", "Payments Team") in got, got
    got = rules(
        "# Receive-PSSession\n\nThe **Credential** parameter runs the Receive-PSSession command "
        "using the permissions of a domain user.\n"
    )
    assert not [t for t in got if t[1] == "owned_by"], got


def test_a_table_column_names_its_relation_in_either_direction(rules):
    """Under "Owner" or "Maintained by" the row's thing is owned by the cell's; under "Owns" or
    "Lead" the cell's thing is owned by, or belongs to, the row's."""
    got = rules(
        "# Groups\n\n"
        "| Working group | Lead | Owns |\n| --- | --- | --- |\n"
        "| Storage Group | Benedikt Szabo | Strata Engine, Sifter Daemon |\n\n"
        "## Services\n\n"
        "| Service | Maintained by | Region | Lead time |\n| --- | --- | --- | --- |\n"
        "| Ledger Store | Payments Team | eu-north-1 | Ines Okafor |\n"
    )
    assert ("Strata Engine", "owned_by", "Storage Group") in got, got
    assert ("Sifter Daemon", "owned_by", "Storage Group") in got, got
    assert ("Benedikt Szabo", "part_of", "Storage Group") in got, got
    assert ("Ledger Store", "owned_by", "Payments Team") in got, got
    assert ("Ledger Store", "located_in", "eu-north-1") in got, got
    # "Lead time" names no member
    assert not [t for t in got if "Ines Okafor" in (t[0], t[2])], got


def test_a_key_value_table_says_who_owns_a_proposal_and_what_it_supersedes(rules):
    """A proposal's "Author" and "Working group" own it; "Supersedes" puts the older one first.
    "Resource group" is where a thing is, no one who owns it."""
    got = rules(
        "# QRFC-0042: Faster spools\n\n| Field | Value |\n|---|---|\n"
        "| Status | Implemented (2.0.0) |\n| Author | Odile Brasseur |\n| Working group | Spool WG |\n"
        "| Supersedes | QRFC-0004 |\n\n## Machines\n\n| Name | Resource group |\n|---|---|\n"
        "| Ledger Store | Quarry Hosts |\n"
    )
    assert ("QRFC-0042", "owned_by", "Odile Brasseur") in got, got
    assert ("QRFC-0042", "owned_by", "Spool WG") in got, got
    assert ("QRFC-0004", "precedes", "QRFC-0042") in got, got
    assert not [t for t in got if t[2] == "Quarry Hosts"], got


def test_a_person_in_a_team_column_belongs_to_the_team():
    """A person is not owned: "| Ines Okafor | Payments Team |" under "Name | Team" is part_of."""
    from kgr.stages.extract import Span
    from kgr.stages.relations import _add_cell
    from kgr.stages.textmodel import parse_document

    row = parse_document("| Ines Okafor | Payments Team |\n", path="t.md").blocks[0]
    got = []

    def add(src, dst, rel, *rest):
        got.append((src.surface, rel, dst.surface))

    team = Span(0, 13, "Payments Team", "TEAM", "ner", 0.9, {})
    for name, typ in (("Ines Okafor", "PERSON"), ("Ledger Store", "SERVICE")):
        _add_cell(add, Span(0, len(name), name, typ, "ner", 0.9, {}), team, ("owned_by", False), "table:team", row)
    assert got == [("Ines Okafor", "part_of", "Payments Team"), ("Ledger Store", "owned_by", "Payments Team")]


def test_an_id_naming_a_kind_of_thing_is_no_reference(rules):
    got = rules(
        "# Zorblat tool\n\nThe `Zorblat` tool writes files.\n\n"
        "- `zbx32`: Encodes in ZBX-32 format.\n- `qrx`: Stores a QRX-256 hash of each file.\n\n"
        "Zorblat fixed the crash (see FOO-1234). The FOO-1235 proposal was rejected. "
        "Old files go once they pass the period that KAP-77 sets.\n"
    )
    refs = {t[2] for t in got if t[1] == "refers_to"}
    assert {"FOO-1234", "FOO-1235", "KAP-77"} <= refs, got
    assert not refs & {"ZBX-32", "QRX-256"}, got


def test_a_condition_states_no_relation(rules):
    got = rules(
        "# Zorblat\n\nIf **Frob32** is specified in 64-bit Quibble, `Zorblat` throws an error.\n\n"
        "The Flux format is specified in Quibble Standard 12.\n"
    )
    assert not [t for t in got if t[2] == "Frob32"], got
    assert ("Quibble Standard", "defines", "Flux") in got, got


def test_a_clause_on_an_instruction_or_on_other_things_is_not_the_subjects(rules):
    got = rules(
        "# ConvertFrom-Zorb\n\nThe `ConvertFrom-Zorb` cmdlet converts zorb strings.\n\n"
        "When using the **Header** parameter, omit the column header string.\n\n"
        "Before using the Fnord Cache, run the `Clear-Zorb` command.\n\n"
        "In contrast, a cmdlet run using a **Quib Session** runs on the target computer.\n\n"
        "Stop the services that depend on the Lumen Index before you convert strings.\n\n"
        "The Quibble Gateway checks tokens when using the Strata Index.\n"
    )
    assert not [t for t in got if t[0] == "ConvertFrom-Zorb"], got
    assert ("Quibble Gateway", "uses", "Strata Index") in got, got


def test_a_likeness_states_no_use(rules):
    got = rules(
        "# Kiln\n\nKiln is the batch scheduler of the Tarnwick platform.\n\n"
        "The `kiln-web` console works much like using `Harrowdale` from a shell.\n\n"
        "The `kiln-sync` command is equivalent to using `Quernfield` with a lock.\n\n"
        "The `kiln-run` command uses `Brook` to start each job.\n"
    )
    assert not [t for t in got if t[2] in ("Harrowdale", "Quernfield")], got
    assert ("kiln-run", "uses", "Brook") in got, got
    # a line break after "Use" makes the parser take "as you would use" for the sentence's verb
    got = rules(
        "# Test-Zorb\n\nThe `Test-Zorb` cmdlet checks zorb paths.\n\n"
        "The cmdlets that contain the **Zorb** noun work with paths and return the\n"
        "names in a concise format. They're designed for use in programs where you want to display a path. Use\n"
        "them as you would use **Fellgate**, **Harrowdale**, or other path\nfunctions.\n"
    )
    assert not [t for t in got if t[2] in ("Fellgate", "Harrowdale")], got


def test_a_bare_verb_is_an_instruction_wherever_the_parse_hangs_it(rules):
    # the parser takes "drive" for the sentence's verb and "use" for its complement
    got = rules(
        "# Connect-Zorb\n\nThe `Connect-Zorb` cmdlet reconnects to a zorb session.\n\n"
        "## Parameters\n\n### -KeyThumbprint\n\n"
        "Specifies the digital public key certificate of a user account that has permission to connect\n"
        "to the disconnected session. Enter the certificate thumbprint of the certificate.\n\n"
        "To get a certificate thumbprint, use a `Get-Zorb` or `Get-ChildZorb` command in the Quibble\n"
        "`Cert:` drive.\n\n"
        "The `Connect-Zorb` cmdlet uses `Quibble Remoting` to reach the session.\n"
    )
    assert not [t for t in got if t[2] in ("Get-Zorb", "Get-ChildZorb")], got
    assert ("Connect-Zorb", "uses", "Quibble Remoting") in got, got


def test_a_name_that_only_qualifies_what_is_acted_on_does_not_act(rules):
    got = rules(
        "# About Kiln logging\n\nKiln writes a record of every job it runs.\n\n"
        "## Viewing the Kiln log entries\n\n"
        "Tarnwick Kiln logs can be viewed using the `tarn-console` viewer. The log is\nkept for a week.\n\n"
        "Kiln uses the Brook Store for its queue.\n"
    )
    assert not [t for t in got if t[2] == "tarn-console"], got
    assert [t for t in got if t[1:] == ("uses", "Brook Store")], got


def test_a_gerund_that_is_a_nouns_topic_states_no_use(rules):
    got = rules(
        "# Zorb-Item\n\nThe `Zorb-Item` cmdlet gets zorb items from a location.\n\n"
        "For more information about using `Quibble-Path`, see the provider help.\n\n"
        "For details on using the **Fellgate** parameter, see the examples.\n\n"
        "The `Zorb-Item` cmdlet uses the **Harrowdale** provider to read items.\n"
    )
    assert not [t for t in got if t[2] in ("Quibble-Path", "Fellgate")], got
    assert ("Zorb-Item", "uses", "Harrowdale") in got, got


def test_an_instruction_after_its_purpose_is_the_readers_in_a_list_too(rules):
    got = rules(
        "# Save-Zorb\n\nThe `Save-Zorb` cmdlet saves zorb files to a folder.\n\n## Notes\n\n"
        "- To save zorbs for modules in the Quibble folder, start Fellgate by using the Harrowdale\n"
        "  option. Only members of the Operators group can save them.\n\n"
        "## Duties\n\n- Detect retries using Brook keys.\n"
    )
    assert not [t for t in got if t[2] == "Harrowdale"], got
    # a duty listed under a heading keeps the page's subject
    assert ("Save-Zorb", "uses", "Brook") in got, got


def test_a_when_clause_on_an_instruction_is_the_readers_in_a_list_too(rules):
    got = rules(
        "# Save-Zorb\n\nThe `Save-Zorb` cmdlet saves zorb files to a folder.\n\n## Buffering\n\n"
        "- `Spill` - When the buffer is full, old output is dropped. When using the `Fellgate` value,\n"
        "  redirect the output to a file.\n"
        "- Before using the Harrowdale option, close the session.\n\n"
        "## Duties\n\n- Detect retries using Brook keys.\n"
    )
    assert not [t for t in got if t[1] == "uses" and t[2] in ("Fellgate", "Harrowdale")], got
    assert ("Save-Zorb", "uses", "Brook") in got, got


def test_an_it_that_stands_for_no_name_is_not_the_page_subject(rules):
    """ "It uses X" after an example's code, or after "This command ...": "it" is the command
    shown, which no name covers, so the page's subject is not said to use X; an "it" that stands
    for the page's subject still does."""
    got = rules(
        "# Stop-Spool\n\nThe `Stop-Spool` cmdlet stops spools.\n\n## Examples\n\n"
        "```\nGet-Spool -Name Ferry | Stop-Spool\n```\n\n"
        "It uses the `Get-Spool` cmdlet to get the spool.\n\n"
        "This command stops every spool on the computer. It uses the **Force** parameter.\n"
    )
    assert not [t for t in got if t[0] == "Stop-Spool" and t[1] == "uses"], got
    got = rules("# Spool Daemon\n\nThe Spool Daemon keeps spools. It uses the Strata Index to find them.\n")
    assert ("Spool Daemon", "uses", "Strata Index") in got, got


def test_an_alternative_to_using_something_is_no_use_of_it(rules):
    got = rules(
        "# Ask-Secret\n\nThe **PromptForSecret** method is an alternative to using the `Get-Secret` cmdlet.\n\n"
        "The Spool Daemon reads the Strata Index instead of using the Lumen Index.\n\n"
        "The Spool Daemon uses the Quarry Index.\n"
    )
    assert not [t for t in got if t[2] in ("Get-Secret", "Lumen Index")], got
    assert ("Spool Daemon", "uses", "Quarry Index") in got, got


def test_a_possessive_after_the_trigger_is_not_what_is_used(rules):
    """ "FERRY can choose the level using its algorithm": "its" only qualifies the algorithm, so
    the name it stands for is not what is used."""
    got = rules(
        "# New-SpoolOption\n\n### -Level\n\nCreates a FERRY session to Spool Management Service (SMS) "
        "using a level.\n\nValid values for this parameter are:\n\n"
        "- Default: FERRY can choose the level using its normal negotiation algorithm.\n"
    )
    assert not [t for t in got if t[1] == "uses" and t[2] == "Spool Management Service"], got


def test_the_evidence_keeps_the_markup_that_opens_its_sentence(extractor):
    """The sentence splitter leaves the opening backtick of "`Stop-Spool` uses ..." to the
    sentence before; the evidence gives it back, and drops the next sentence's."""
    text = (
        "# Stop-Spool\n\nThe cmdlet stops spools.\n\n"
        "`Stop-Spool` uses the Strata Index to find spools. **Ferry** uses the Quarry Index.\n"
    )
    doc = parse_document(text, path="t.md")
    got = {(r["src"], r["dst"]): r["evidence"] for r in extract_relations(doc, extractor.mentions(doc))}
    sentences = {pair: ev["sentence"] for pair, ev in got.items()}
    assert sentences[("Stop-Spool", "Strata Index")] == "`Stop-Spool` uses the Strata Index to find spools.", got
    assert sentences[("Ferry", "Quarry Index")] == "**Ferry** uses the Quarry Index.", got
    for ev in got.values():
        assert text[ev["start"] : ev["end"]] == ev["sentence"]


def test_evidence_bounds_move_only_over_markup():
    from kgr.stages.relations import evidence

    text = "Intro. `A` runs B. `C` runs D."
    s = text.index("A")
    e = text.index("`C") + 1
    assert evidence(text, s, e)["sentence"] == "`A` runs B."
    # a name glued to a closing mark is not widened over it
    assert evidence("x`A runs B.", 2, 11)["sentence"] == "A runs B."
    assert evidence("Plain sentence here.", 0, 20)["sentence"] == "Plain sentence here."


def test_what_builds_on_another_depends_on_it_and_a_release_follows_it(rules):
    got = rules("# Spool Classes\n\nThe **SpoolList** class builds on the **Spool** class.\n")
    assert ("SpoolList", "depends_on", "Spool") in got, got
    assert not [t for t in got if t[1] == "precedes"], got
    got = rules("# Spool v2.1.0\n\nThis release builds on v2.0.3 and includes all of its fixes.\n")
    assert [t for t in got if t[1] == "precedes" and t[0] == "v2.0.3"], got


def test_a_trigger_word_inside_inline_code_is_code(rules):
    got = rules(
        "# about Imports\n\nThe `Ferry.Text` and `Ferry.Store` namespaces hold the types.\n\n"
        "Note how the `using namespace Ferry.Text` and `using namespace Ferry.Store`\n"
        "simplify the references to `[Encoder]` in `Ferry.Text` and `[Pipe]` in `Ferry.Store`.\n\n"
        "The Spool Daemon uses the Strata Index.\n"
    )
    assert not [t for t in got if t[0].startswith("Ferry")], got
    assert ("Spool Daemon", "uses", "Strata Index") in got, got


def test_a_sentence_runs_across_the_line_breaks_of_a_hard_wrapped_text(extractor):
    """Markdown wrapped at a column breaks sentences, not facts: the line break after "the
    **Path** and" (the next word did not fit) starts no sentence, so ItemType is an object too
    and the evidence is whole; a short line of its own ("Owner: Strata Team") still ends there."""
    lead = "In the default set-up of the spool host, the `New-Spool` cmdlet uses the **Path** and"
    rest = "**ItemType** settings to create the spool file in the folder that you give it here."
    width = len(lead) + 5  # "**ItemType**" does not fit after the lead
    text = (
        "# New-Spool\n\n"
        + textwrap.fill(f"{lead} {rest}", width)
        + "\n\nOwner: Strata Team\nThe Spool Daemon uses the Quarry Index.\n"
    )
    assert f"{lead}\n**ItemType**" in text
    doc = parse_document(text, path="t.md")
    rels = extract_relations(doc, extractor.mentions(doc))
    got = {(r["src"], r["rel"], r["dst"]): r["evidence"]["sentence"] for r in rels}
    assert ("New-Spool", "uses", "ItemType") in got, got
    assert got[("New-Spool", "uses", "Path")].endswith("you give it here."), got
    assert got[("Spool Daemon", "uses", "Quarry Index")] == "The Spool Daemon uses the Quarry Index.", got
    # without a wrap column (no long lines), each line is its own sentence, as before
    short = parse_document("# Notes\n\nOwner: Strata Team\nThe Spool Daemon uses the Quarry Index.\n", path="n.md")
    assert len(short.blocks[1].sentences()) == 2


def test_no_one_is_said_to_use_in_an_instruction_or_an_act_that_is_the_subject(rules):
    got = rules(
        "# Spool provider\n\nThe provider lets you manage spools.\n\n"
        "Start a remote session on the S1 computer using the `New-Spool` cmdlet, and save it.\n\n"
        "Beginning with Ferry 7.7, using the **Append** parameter with the **NoHeader** parameter throws an error.\n\n"
        "The Spool Daemon loads the rows using the Strata Index.\n"
    )
    assert not [t for t in got if t[2] in ("New-Spool", "Append")], got
    assert ("Spool Daemon", "uses", "Strata Index") in got, got
    # "They" are several things, never the page's one subject
    got = rules(
        "# Remove-Spool\n\nThe `Remove-Spool` cmdlet deletes a spool.\n\n## NOTES\n\n"
        "The cmdlets in the Ferry module are similar. They use the Quarry Index to write spools.\n"
    )
    assert not [t for t in got if t[2] == "Quarry Index"], got


def test_from_one_thing_to_another_is_an_order_only_between_releases(rules):
    got = rules(
        "# Move-Spool\n\nThis command renames the spool from `old.txt` to `new.txt`.\n\n"
        "It moves a key from `LocalMachine` to `CurrentUser`.\n\n"
        "We upgraded the Ledger Store from 1.2.7 to 1.3.2 last week.\n"
    )
    assert not [t for t in got if t[1] == "precedes" and t[0] in ("old.txt", "LocalMachine")], got
    assert ("1.2.7", "precedes", "1.3.2") in got, got


def test_a_parameter_a_command_uses_is_part_of_it(rules):
    """The guideline makes a flag or parameter part of what it belongs to: "X uses the **A** and
    **B** parameters" says A and B are X's; "the Name parameter of Y" is Y's, not X's."""
    got = rules(
        "# New-Spool\n\nThe `New-Spool` cmdlet uses the **Path** and **ItemType** parameters to create the file.\n\n"
        "`Get-Spool` uses the **Name** parameter of `Get-Item`.\n\n"
        "The Spool Daemon uses the Strata Index.\n"
    )
    assert {("Path", "part_of", "New-Spool"), ("ItemType", "part_of", "New-Spool")} <= got, got
    assert not [t for t in got if t[0] == "New-Spool" and t[1] == "uses"], got
    assert not [t for t in got if t[:2] == ("Name", "part_of")], got
    assert ("Spool Daemon", "uses", "Strata Index") in got, got


def test_a_quoted_note_wrapped_over_its_lines_is_one_paragraph(rules):
    """The "> " lines of one quoted paragraph are one block: a sentence wrapped from one to the
    next is read whole; the "[!NOTE]" marker and a quoted list item stay lines of their own."""
    lead = "> In the default set-up of the spool host, for every job that it runs, the Spool Daemon uses the"
    text = (
        "# Spool Daemon\n\nThe Spool Daemon writes spools.\n\n> [!NOTE]\n"
        f"{lead}\n> Quarry Index to find the rows that the job of the day has to write out to the spool.\n"
        "> - Ferry uses the Strata Index.\n"
    )
    assert len(lead) + 1 + len("Quarry") > max(len(line) for line in text.splitlines()[5:]) - 5
    got = rules(text)
    assert ("Spool Daemon", "uses", "Quarry Index") in got, got
    doc = parse_document(text, path="t.md")
    quotes = [b.masked.strip() for b in doc.blocks if b.kind == "quote"]
    assert quotes[0] == "[!NOTE]" and quotes[-1].startswith("- Ferry"), quotes


def test_a_use_coordinated_under_without_is_denied(rules):
    got = rules(
        "# Save-Tool\n\nThe `Save-Tool` cmdlet copies files to a share without encountering an access error "
        "or using the `Copy-Ledger` cmdlet.\n\nThe `Save-Tool` cmdlet calls the `Move-Ledger` cmdlet "
        "without a prompt or a confirmation.\n"
    )
    assert ("Save-Tool", "uses", "Copy-Ledger") not in got, got
    assert ("Save-Tool", "uses", "Move-Ledger") in got, got  # "without" after the use denies nothing


def test_it_is_also_possible_to_use_x_is_the_readers_use(rules):
    got = rules(
        "# Save-Tool\n\nThe `Save-Tool` cmdlet saves help files.\n\n"
        "It is also possible to save a **ModuleInfo** object using `Export-Ledger` on a computer that has no "
        "internet access.\n\nIt's possible to start the copy by using `Copy-Ledger`.\n"
    )
    assert not [t for t in got if t[1] == "uses"], got  # an expletive "it" stands for nothing


def test_no_relation_joins_a_date(rules):
    """No relation type takes a date at either end: a meeting's date line is not located in the
    meeting room, and a release day is no part of the service."""
    got = rules(
        "# 11 June 2024\n\nDate: 11 June 2024 · Location: Porto office\n\n"
        "11 June 2024 is part of the Ledger Service release window.\n\n"
        "The Ledger Service is part of Tessellate.\n"
    )
    assert ("Ledger Service", "part_of", "Tessellate") in got, got
    assert not [t for t in got if "2024" in t[0] or "2024" in t[2]], got


def test_a_name_in_the_clause_a_sentence_opens_with_is_not_its_subject(rules):
    """ "When used with SSH, this parameter specifies ... as defined in X": the parameter is
    meant, not SSH; a name after the opening clause still is the subject."""
    got = rules(
        "# Invoke-Task\n\nWhen used with SSH, this parameter specifies the subsystem to use on the target "
        "as defined in `sshd_config`.\n\n"
        "When the queue is full, the Ledger Service uses the Spill Store.\n"
    )
    assert not [t for t in got if "SSH" in (t[0], t[2])], got
    assert ("Ledger Service", "uses", "Spill Store") in got, got


@pytest.mark.parametrize(
    "text, said, not_said",
    [
        (  # "X cannot delete events created by using Y": the events were made with Y; X does not use Y
            "# Remove-Signal\n\n`Remove-Signal` cannot delete signals created by using the `New-Signal` cmdlet.\n\n"
            "The `Remove-Signal` cmdlet uses the `Signal-Store` cmdlet to find signals.\n",
            ("Remove-Signal", "uses", "Signal-Store"),
            ("Remove-Signal", "uses", "New-Signal"),
        ),
        (  # "has the same effect as using Y": a likeness, not a use
            "# Quit-Task\n\nThe `Quit-Task` cmdlet has the same effect as using `Exit-Task`.\n\n"
            "The `Quit-Task` cmdlet uses the `Task-Store` cmdlet to save the state.\n",
            ("Quit-Task", "uses", "Task-Store"),
            ("Quit-Task", "uses", "Exit-Task"),
        ),
    ],
    ids=["made_with", "same_effect"],
)
def test_a_sentence_that_names_a_use_it_does_not_state(rules, text, said, not_said):
    got = rules(text)
    assert not_said not in got, got
    assert said in got, got


def test_a_hard_wrapped_line_break_does_not_break_the_parse(rules):
    """A Markdown source wrapped at 80 columns breaks "use" from its object; spaCy read the
    break as a token of its own and took "use" for a noun, and the instruction to the reader
    became "Set-Widget uses Get-Widget". The parser reads a wrapped break as the space it is."""
    text = (
        "# Set-Widget\n\n"
        "The `Set-Widget` cmdlet changes the properties of a widget, such as its colour and\n"
        "its size, and the order in which the spool daemon draws it on the printed page.\n\n"
        "In this example, a widget's display name is changed. To view the old name, use\n"
        "`Get-Widget`.\n"
    )
    assert ("Set-Widget", "uses", "Get-Widget") not in rules(text)
    # the same sentence on one line was never the page's subject's use
    assert ("Set-Widget", "uses", "Get-Widget") not in rules(text.replace("use\n", "use "))


def test_a_name_that_only_qualifies_a_noun_does_not_act_for_the_sentence(rules):
    """ "The following example gets the events from the Spool Daemon event log and decrypts them using
    X": the parse gives the sentence its subject ("example"), and the first name written, inside
    the object, is no one that uses X. A name inside the subject still acts ("The `Set-Widget`
    cmdlet ... using X")."""
    got = rules(
        "# Unseal-Note\n\n"
        "The following example gets all encrypted events from the Spool Daemon event log and "
        "decrypts them using `Unseal-Note`.\n\n"
        "The `Set-Widget` cmdlet in the Quarry module stores the widgets using the Strata Index.\n"
    )
    assert ("Spool Daemon", "uses", "Unseal-Note") not in got, got
    assert ("Set-Widget", "uses", "Strata Index") in got, got


def test_a_dotted_name_does_not_end_the_sentence_for_the_parser(rules):
    """spaCy ends a sentence at the dot before a capital in "Contoso.Globalization.CultureInfo",
    and "To get the X object for the system, use Y" lost its verb: X became the one that uses Y."""
    got = rules(
        "# about_Things\n"
        "\n"
        "Contains the name of the user interface (UI) culture that's configured in the\n"
        "operating system. The UI culture determines which text strings are used for\n"
        "user interface elements, such as menus and messages. This is the value of the\n"
        "**Contoso.Globalization.CultureInfo.CurrentUICulture.Name** property of the\n"
        "system. To get the **Contoso.Globalization.CultureInfo** object for the system,\n"
        "use the `Get-Widget` cmdlet.\n"
    )
    assert not [t for t in got if t[2] == "Get-Widget"], got


def test_an_example_of_how_a_thing_came_to_be_is_not_the_subjects_use(rules):
    """ "spools that are detached intentionally, such as by using X": the example says how the
    spools were detached, not what the page's command uses."""
    got = rules(
        "# Join-Spool\n\nThe `Join-Spool` cmdlet reconnects to spools. It works on spools that are "
        "detached intentionally, such as by using the `Split-Spool` cmdlet, and those that were "
        "detached unexpectedly.\n"
    )
    assert ("Join-Spool", "uses", "Split-Spool") not in got, got
    # nor when the parser hangs the example on the sentence's verb past the clause it is about
    got = rules(
        "# Spool Daemon\n\nThe Spool Daemon runs scripts.\n\n- Runs scripts that are downloaded from the "
        "internet and not signed, if the scripts are unblocked, such as by using the `Unblock-Zorb` cmdlet.\n"
    )
    assert not [t for t in got if t[2] == "Unblock-Zorb"], got


def test_a_purpose_taken_for_the_sentences_verb_leaves_the_instruction_to_the_reader(rules):
    """The parser makes "To enable" the verb of "To enable X to stop a task, import the module
    ... by using Y", and "import" a verb joined to it: the reader imports, X uses nothing."""
    got = rules(
        "# Halt-Task\n\nTo enable `Halt-Task` to stop a task with a custom task type, import the "
        "module that supports the custom task type into the session before you run a `Halt-Task` "
        "command, either by using the `Load-Module` cmdlet or by using or getting a cmdlet in the module.\n"
    )
    assert ("Halt-Task", "uses", "Load-Module") not in got, got


def test_a_name_after_a_verb_with_no_subject_is_what_it_acts_on(rules):
    """ "Shows a Quarry file in the console using Strata escape sequences": with no subject, the
    verb acts for the section's subject; the Quarry file is what is shown."""
    got = rules(
        "# Widget Cmdlets\n\n### Show-Widget\n\nShows a Quarry file or string in the console in a "
        "friendly way using Strata escape sequences.\n"
    )
    assert ("Quarry", "uses", "Strata") not in got, got


def test_an_instruction_joined_to_another_is_the_readers_too(rules):
    """ "To do so, export X ... and then import the file by using Y": "import" is joined to the
    sentence's verb, and the reader imports; neither the page's command nor Get-Note uses Y."""
    got = rules(
        "# Add-Note\n\nYou can pass a file of notes to `Add-Note`. To do so, export the results of a "
        "`Get-Note` command to a file by using the `Export-Sheet` cmdlet and then import the file by "
        "using the `Import-Sheet` cmdlet.\n"
    )
    assert not [t for t in got if t[2] in ("Import-Sheet", "Export-Sheet")], got


def test_what_a_passive_verb_acts_on_does_not_use_its_means(rules):
    """ "X and Y commands are submitted ... by using Z": the commands are what is submitted; whoever
    submits them uses Z. The page's subject still uses what its own sentences say it does."""
    got = rules(
        "# Wait-Task\n\n## Examples\n\n"
        "Both `Start-Task` and `Wait-Task` commands are submitted to the remote computer by using the "
        "`Send-Remote` cmdlet.\n\n"
        "The `Wait-Task` cmdlet reads the queue by using the `Read-Queue` cmdlet.\n"
    )
    assert not [t for t in got if t[2] == "Send-Remote"], got
    assert ("Wait-Task", "uses", "Read-Queue") in got, got


def test_a_use_the_sentence_prevents_is_no_use(rules):
    got = rules(
        "# Update-Manual\n\n"
        "This Quota Policy setting prevents users from using `Update-Manual` to download files.\n\n"
        "The Spool Daemon blocks old clients from calling the Quarry Connector.\n\n"
        "The Spool Daemon uses the Strata Index.\n"
    )
    assert not [t for t in got if t[2] in ("Update-Manual", "Quarry Connector")], got
    assert ("Spool Daemon", "uses", "Strata Index") in got, got


def test_the_object_an_infinitive_is_about_uses_its_object(rules):
    """ "Allows users to use X": the users use X, not the parameter the section is about, nor a
    subject that only lets them."""
    got = rules(
        "# Register-Widget\n\nA **widget configuration** sets the widget's defaults.\n\n"
        "## Parameters\n\n### -AccessMode\n\n"
        "Allows local and remote users to use the widget configuration to create widgets.\n\n"
        "## Notes\n\nThe Spool Daemon uses the Strata Index.\n"
    )
    assert not [t for t in got if t[2] == "widget configuration"], got
    assert ("Spool Daemon", "uses", "Strata Index") in got, got


def test_a_gerund_completing_an_instruction_is_the_readers_use(rules):
    """ "..., connect using X" and "avoid using X" tell the reader how to do something: the page's
    subject does not use X. A duty in a list keeps its subject."""
    got = rules(
        "# Get-Zorb\n\nThe `Get-Zorb` cmdlet gets zorb instances from a server.\n\n"
        "If many operations run on the same computer, connect using a Quibble Session for better speed.\n\n"
        "For best compatibility, avoid using Fellgate marks in zorb files.\n\n"
        "## Duties\n\n- Detect retries using Brook keys.\n"
    )
    assert not [t for t in got if t[2] in ("Quibble Session", "Fellgate")], got
    assert ("Get-Zorb", "uses", "Brook") in got, got


def test_a_release_or_record_cites_the_decision_records_it_names_and_others_refer_to_them(rules):
    got = rules(
        "# Zorblat release notes\n\n## v3.0.0\n\n"
        "- Breaking: double-entry frobs replace single frobs (ADR-019).\n"
        "- New: frob batching, as designed in ZRFC-0012.\n\n"
        "## Zorblat Gateway\n\nThe Zorblat Gateway batches frobs (ADR-023, see FOO-1234).\n"
    )
    assert ("v3.0.0", "cites", "ADR-019") in got, got
    assert ("v3.0.0", "cites", "ZRFC-0012") in got, got  # a project's own prefix on its RFCs
    # a service is no document: it refers to records and tickets
    assert ("Zorblat Gateway", "refers_to", "ADR-023") in got, got
    assert ("Zorblat Gateway", "refers_to", "FOO-1234") in got, got


def test_a_name_qualifying_the_noun_a_clause_describes_does_not_act_in_it(rules):
    got = rules(
        "# Zap-Session\n\nThe `Zap-Session` cmdlet disconnects a Quibble session, such as one started by using "
        "the `New-Zorb` cmdlet, from the current session.\n\n"
        "The `Zap-Session` cmdlet uses `Brook` to reach the session.\n"
    )
    assert not [t for t in got if t[2] == "New-Zorb"], got
    assert ("Zap-Session", "uses", "Brook") in got, got


def test_an_arrow_path_written_as_code_is_a_menu_not_an_order(rules):
    """ "through `Templates -> Spool Components -> Quarry Logging`" names where a setting sits;
    the same arrows in running text ("Hollis Varga -> Ona Pike") give an order."""
    got = rules(
        "# Logging\n\nEnable the `Audit` feature through `Administrative Templates -> Spool Components\n"
        "-> Quarry Logging`.\n\nEscalation goes Hollis Varga -> Ona Pike -> Dana Reyes.\n"
    )
    assert not [t for t in got if t[1] == "precedes" and "Spool Components" in (t[0], t[2])], got
    assert ("Hollis Varga", "precedes", "Ona Pike") in got, got
    # each name in its own code span, the arrows outside them: an order
    got = rules("# Query\n\nA query goes `Parse Stage` -> `Plan Stage` -> `Run Stage`.\n")
    assert ("Parse Stage", "precedes", "Plan Stage") in got, got


def test_a_name_that_only_qualifies_the_noun_a_relative_clause_describes_does_not_act_in_it(rules):
    """ "Spool sessions that use the configuration": the sessions use it, not Spool; a name that
    is itself the noun described ("the Ledger Service, which uses Kestrel") still does."""
    got = rules(
        "# Session configurations\n\nDoing so defines the environment of any Spool sessions that use "
        "the Quarry Configuration.\n\nThe Ledger Service, which uses the Kestrel Bus, records payments.\n"
    )
    assert ("Spool", "uses", "Quarry Configuration") not in got, got
    assert ("Ledger Service", "uses", "Kestrel Bus") in got, got


def test_one_of_a_kind_that_uses_something_is_not_the_page_subject(rules):
    """ "allows a client that uses X": some client, not the section's subject; "X is a service
    that uses Y" still says X uses Y."""
    got = rules(
        "# New-SpoolOption\n\n## SkipCheck\n\nThis option allows a client that uses a Quarry Token to "
        "authenticate.\n\n## Ledger Service\n\nThe Ledger Service is a service that uses the Kestrel Bus.\n"
    )
    assert not [t for t in got if t[2] == "Quarry Token"], got
    assert ("Ledger Service", "uses", "Kestrel Bus") in got, got


def test_a_parameter_is_no_part_of_another_parameter(rules):
    """Under a parameter's own section ("### -CommandName"), "use the **AllowClobber** parameter"
    names a parameter of the page's command; a parameter said to use another says not whose."""
    got = rules(
        "# Export-Spool\n\n## Parameters\n\n### -CommandName\n\nTo export all commands, even those that "
        "hide other commands, use the **AllowClobber** parameter.\n\n### -Session\n\nThe **Filter** "
        "parameter uses the **Depth** parameter to limit the search.\n\n## Examples\n\n`Export-Spool` uses "
        "the **Format** parameter to pick the output.\n"
    )
    assert ("AllowClobber", "part_of", "Export-Spool") in got, got
    assert not [t for t in got if t[2] in ("CommandName", "Filter")], got
    assert ("Format", "part_of", "Export-Spool") in got, got


def test_one_of_a_kind_the_sentence_introduces_is_not_the_page_subject(rules):
    """ "A trace source is the part of each Spool component ...": some trace source, not the page's
    subject, is part of something; "The service is part of ..." is the page's subject."""
    got = rules(
        "# Ledger Service\n\nA trace source is the part of each Spool component that manages tracing.\n\n"
        "The service is part of the Payments Platform.\n"
    )
    assert not [t for t in got if t[2] == "Spool"], got
    assert ("Ledger Service", "part_of", "Payments Platform") in got, got


def test_all_or_part_of_is_a_quantity_not_membership(rules):
    got = rules(
        "# Start-Spool\n\nCreates a record of all or part of a `Quarry` session to a text file.\n\n"
        "## Ledger Service\n\nThe service is part of the Payments Platform.\n"
    )
    assert not [t for t in got if t[2] == "Quarry"], got
    assert ("Ledger Service", "part_of", "Payments Platform") in got, got
    got = rules("# Listing\n\nIt measures a recursive `Find-Spool` command that uses the Quarry Index.\n")
    assert ("Find-Spool", "uses", "Quarry Index") in got, got


def test_a_rename_reads_from_the_former_name_whichever_comes_first(rules):
    got = rules(
        "# Changelog\n\n"
        "Billing Engine was renamed to Invoice Service in the spring release.\n\n"
        "Spool Daemon is now Quarry Relay; the old binary is gone.\n\n"
        "The Tax Engine was called Levy Desk until 2023.\n\n"
        "The Audit Log is now available to every team.\n\n"
        "Since the upgrade the Ledger Cache is now Faster than before.\n\n"
        "The Quarry Relay is now GA. The Quarry Relay job is now Disconnected.\n\n"
        "## Glossary\n\n**Ledger Desk**: The name of Levy Desk before 2.0.0.\n\n"
        "**Spool Cache**, the former name of the Ledger Cache.\n"
    )
    assert ("Billing Engine", "same_as", "Invoice Service") in got, got
    assert ("Levy Desk", "same_as", "Tax Engine") in got, got
    # "A is now B", B a name that ends the clause: a rename
    assert ("Spool Daemon", "same_as", "Quarry Relay") in got, got
    # "the name of B before ...", "the former name of B": the name defined is the former one
    assert ("Ledger Desk", "same_as", "Levy Desk") in got, got
    assert ("Spool Cache", "same_as", "Ledger Cache") in got, got
    # "is now" says how a thing is as often as what it is called ("is now Faster than before",
    # "is now GA", "is now Disconnected", "is now available")
    assert len([t for t in got if t[1] == "same_as"]) == 5, got


def test_a_table_of_renames_maps_each_former_name_to_the_current_one(rules):
    got = rules(
        "# Upgrade guide\n\n## Renamed settings\n\n| Version 1 | Version 2 |\n|---|---|\n"
        "| `OLD_HOME_DIR` | `NEW_HOME_DIR` |\n| `spool.max_items` | `quarry.max_items` |\n\n"
        "## Services\n\n| Old name | New name |\n|---|---|\n| Billing Engine | Invoice Service |\n\n"
        "## Settings\n\n| Setting | Default |\n|---|---|\n| `spool.depth` | `quarry.depth` |\n\n"
        "## Renaming a queue\n\n| Command | Note |\n|---|---|\n| `Rename-Queue` | `Spool-Queue` |\n"
    )
    assert ("OLD_HOME_DIR", "same_as", "NEW_HOME_DIR") in got, got
    assert ("spool.max_items", "same_as", "quarry.max_items") in got, got
    assert ("Billing Engine", "same_as", "Invoice Service") in got, got
    # a table under another heading with other columns renames nothing
    assert ("spool.depth", "same_as", "quarry.depth") not in got, got
    assert ("Rename-Queue", "same_as", "Spool-Queue") not in got, got  # how to rename, not what was
    assert len([t for t in got if t[1] == "same_as"]) == 3, got


def test_a_when_clause_on_a_main_clause_with_no_subject_is_the_readers(rules):
    got = rules(
        "# Line editor functions\n\n### NextEntry\n\n"
        "When using `GridStyle` as the view style for prediction, navigate to the next\nentry in the list.\n\n"
        "### SelectNextWord\n\nAdjust the current selection to include the next word using WordMover.\n"
    )
    assert not [t for t in got if t[2] == "GridStyle"], got  # "navigate" is parsed as an adjective
    assert ("SelectNextWord", "uses", "WordMover") in got, got  # what the function does


def test_a_participle_on_a_common_noun_says_nothing_of_the_sentence_subject(rules):
    got = rules(
        "# Set-Spool\n\n### -Authentication\n\nPossible values are:\n\n"
        "- `Default` : Use the authentication method implemented by the Quarry protocol.\n"
        "- `Basic`: Basic is a scheme in which the password is sent in clear text.\n\n"
        "## Notes\n\nThe Ledger Cache, implemented by the Spool Daemon, keeps the rows.\n"
    )
    assert not [t for t in got if t[2] == "Quarry"], got  # the method is implemented by it
    assert ("Ledger Cache", "part_of", "Spool Daemon") in got, got  # the participle describes the name


def test_a_participle_on_a_description_belongs_to_the_name_described(rules):
    got = rules(
        "# Platform services\n\n"
        "- Quarry Relay: event bus on Apache Kafka, run by Ledger Operations.\n"
        "- Levy Desk: single sign-on for people and OAuth 2.0 tokens for services, run by Audit Engineering.\n\n"
        "We will run a Kafka-based event bus, named Tally Queue, operated by Ledger Operations:\n"
    )
    # the description stands in apposition to the name before the colon, wherever the parse
    # hangs the participle inside it
    assert ("Quarry Relay", "owned_by", "Ledger Operations") in got, got
    assert ("Apache Kafka", "owned_by", "Ledger Operations") not in got, got
    assert ("Levy Desk", "owned_by", "Audit Engineering") in got, got
    # "a queue, named X, operated by Y": the queue is X
    assert ("Tally Queue", "owned_by", "Ledger Operations") in got, got


def test_a_role_in_a_group_makes_the_person_a_member(rules):
    """The guideline's part_of holds a person who belongs to or leads a group: "chairs", "is the
    treasurer of", "whose lead is", "has five members: A (chair), B and C"."""
    got = rules(
        "# Governance\n\nThe Quarry Council and the Spool Guild run the project.\n\n"
        "The storage engine is owned by the Spool Guild, whose lead is Benedikt Szabo.\n\n"
        "The Quarry Council has three members: Odalys Verhoeven (chair), Haruto Sakamoto and Marisol Quintero.\n\n"
        "Dagny Fairweather chairs the Quarry Council.\n\n"
        "Ilse Marchetti is the treasurer of the Foundation Board.\n"
    )
    assert ("Benedikt Szabo", "part_of", "Spool Guild") in got, got
    for person in ("Odalys Verhoeven", "Haruto Sakamoto", "Marisol Quintero", "Dagny Fairweather"):
        assert (person, "part_of", "Quarry Council") in got, got
    assert ("Ilse Marchetti", "part_of", "Foundation Board") in got, got
    assert ("Benedikt Szabo", "part_of", "Quarry Council") not in got, got


def test_a_name_between_a_verb_and_its_preposition_is_used_too(rules):
    """ "copies `X` into Y": the thing uses X and Y. A common noun between the words is what is
    handed on ("hands each spool batch to Y"); a proper name ("sends the XML to Y") still stops
    the trigger: what it is, and who acts, is unclear."""
    got = rules(
        "# Quarry Relay\n\nThe Quarry Relay feeds Spool Store. A **spool batch** is a group of rows.\n\n"
        "Quarry Relay copies `ledger.posted.v1` into Spool Store, where Finance builds its reports.\n\n"
        "It hands each spool batch to the Levy Gateway.\n"
    )
    assert ("Quarry Relay", "uses", "ledger.posted.v1") in got, got
    assert ("Quarry Relay", "uses", "Spool Store") in got, got
    assert not [t for t in got if "spool batch" in (t[0], t[2])], got
    assert ("Quarry Relay", "uses", "Levy Gateway") in got, got
    got = rules(
        "# Register-Spool\n\n## Description\n\nThis cmdlet generates XML that represents a Quarry Services "
        "(WS-Quarry) plug-in\nconfiguration and sends the XML to WS-Quarry, which registers the plug-in.\n"
    )
    assert not [t for t in got if t[0] == "XML"], got  # the parse hangs "sends" on the XML


def test_a_second_verb_shares_the_first_ones_subject_not_its_object(rules):
    """ "It is owned by T and runs in R": the second verb's subject is the first's ("it"), not T,
    the name nearest before; so for a place hung on a noun after it ("with a standby in R2")."""
    got = rules(
        "# Quarry Gate\n\nThe Quarry Gate (qg) handles sign-in for people and services at Levy Labs. "
        "It is owned by Spool Engineering and runs in eu-central-1 with a warm standby in eu-west-1.\n"
    )
    assert not [t for t in got if t[0] == "Spool Engineering" and t[1] == "located_in"], got
    got = rules(
        "# Tally Broker\n\nThe Tally Broker (tb) handles sign-in for people and services at Levy Labs. "
        "It is owned by Spool Engineering and runs in eu-central-1 with a warm standby in eu-west-1.\n"
    )
    assert ("Tally Broker", "located_in", "eu-central-1") in got, got
    assert ("Tally Broker", "located_in", "eu-west-1") in got, got


def test_a_place_name_that_qualifies_a_noun_is_no_place(rules):
    """ "keeps credentials only in Nomad variables": the credentials are in the variables, and
    Nomad is no place; "in the eu-central-1 region" and "in Tallinn" still are."""
    got = rules(
        "# Teams\n\nData Platform and Core Infrastructure are teams. Granary stores release archives.\n\n"
        "It has been rotated, and the Infra WG now keeps break-glass credentials only in Nomad variables.\n\n"
        "Data Platform is led by Priya Raman in Tallinn.\n\n"
        "The Ledger Service runs in the eu-central-1 region.\n"
    )
    assert not [t for t in got if t[2] == "Nomad"], got
    assert ("Data Platform", "located_in", "Tallinn") in got, got
    assert ("Ledger Service", "located_in", "eu-central-1") in got, got


def test_an_owner_key_on_a_line_with_its_own_key_owns_that_line(rules):
    """In a list of action items, "QTR-88: ... Owner: X." is QTR-88's owner, not the page's; a
    line with no key of its own leaves the owner to the page."""
    got = rules(
        "# INC-0042: Quarry outage\n\n## Action items\n\n"
        "- QTR-88: alert 14 days before Spool credentials expire. Owner: Haruto Sakamoto.\n"
        "- QTR-104: add more runners. Owner: Infra Guild.\n"
        "- Ask Spool Cloud for credentials without expiry. Owner: Odalys Verhoeven.\n"
    )
    assert ("QTR-88", "owned_by", "Haruto Sakamoto") in got, got
    assert ("QTR-104", "owned_by", "Infra Guild") in got, got
    assert ("INC-0042", "owned_by", "Odalys Verhoeven") in got, got
    assert ("INC-0042", "owned_by", "Haruto Sakamoto") not in got, got


def test_a_negation_in_any_n_t_form_and_a_passive_relative_clause_state_no_relation(rules):
    """ "isn't part of", even the misspelt "that'sn't a part of", denies; "SpoolSessions that were
    disconnected using X": whoever disconnected them used X, not the sessions."""
    got = rules(
        "# Receive-Spool\n\n"
        "`Receive-Spool` works on **SpoolSessions** that were disconnected intentionally using the "
        "`Disconnect-Spool` cmdlet.\n\n"
        "This example deletes all type data, including type data that was added by a `Types.ps1xml` file "
        "and dynamic type data that was added to the session by using the `Update-Spool` cmdlet.\n\n"
        "The `StringDecorated Substring(int contentLength)` method returns a substring that'sn't a part of "
        "ANSI escape sequences.\n\nThe Ledger Cache isn't part of the Spool Daemon.\n\n"
        "The Quarry Relay uses the Spool Store.\n"
    )
    assert not [t for t in got if t[2] in ("Disconnect-Spool", "Update-Spool", "ANSI", "Spool Daemon")], got
    assert ("Quarry Relay", "uses", "Spool Store") in got, got


def test_an_area_column_is_what_the_rows_person_or_team_owns(rules):
    """A maintainers table's "Area" (of responsibility) is what the row's person owns; the row of a
    place has an area that no one owns, and "Service area" is no such column."""
    got = rules(
        "# Maintainers\n\n"
        "| Name | Area | Role |\n| --- | --- | --- |\n"
        "| Odile Brasseur | Strata Engine, Sifter Daemon | storage lead |\n\n"
        "## Offices\n\n"
        "| Office | Area | Service area |\n| --- | --- | --- |\n"
        "| Porto office | Ledger Store | Payments Team |\n"
    )
    assert ("Strata Engine", "owned_by", "Odile Brasseur") in got, got
    assert ("Sifter Daemon", "owned_by", "Odile Brasseur") in got, got
    assert not [t for t in got if "Porto office" in (t[0], t[2])], got


def test_what_a_relative_clause_says_its_subject_operates_or_governs_is_owned(rules):
    """ "X, our CI system, which the Infra WG operates": the relative pronoun is the verb's object,
    so the noun it stands for (in apposition to X) is what is operated; "governed by" names an
    owner as "run by" does. "Y, which runs many deployments" says Y runs them, and owns no name."""
    got = rules(
        "# Overview\n\n"
        "Continuous integration runs on Anvil Runner, our CI system, which the Infrastructure Working Group "
        "operates on donated runners.\n\n"
        "Strata Engine is the engine that the Storage Team maintains.\n\n"
        "Quarry DB is released under the Apache License 2.0 and governed by the Fernhollow Foundation.\n\n"
        "She works for Ravelin Data, which runs one of the largest Ledger Store deployments.\n"
    )
    assert ("Anvil Runner", "owned_by", "Infrastructure Working Group") in got, got
    assert ("Strata Engine", "owned_by", "Storage Team") in got, got
    assert ("Quarry DB", "owned_by", "Fernhollow Foundation") in got, got
    assert not [t for t in got if t[1] == "owned_by" and "Ravelin Data" in (t[0], t[2])], got


def test_a_person_of_a_team_belongs_to_it(rules):
    """ "Emile Brassard of the Docs WG" is a member's affiliation; a person "of" a place is not."""
    got = rules(
        "# Roadmap\n\nThe rewrite is led by Emile Brassard of the Docs WG.\n\nThe treasurer is Ines Okafor of Lisbon.\n"
    )
    assert ("Emile Brassard", "part_of", "Docs WG") in got, got
    assert not [t for t in got if t[0] == "Ines Okafor" and t[1] == "part_of"], got


def test_a_noun_in_apposition_to_a_name_is_the_name_run_by_its_owner(rules):
    """ "Strongbox, the secrets manager run by Security Engineering": the parse may make the noun the
    participle's subject; the name it stands beside is what is run."""
    got = rules("# Secrets\n\nAll secrets are stored in Strongbox, the secrets manager run by Security Engineering.\n")
    assert ("Strongbox", "owned_by", "Security Engineering") in got, got


def test_what_is_used_by_a_name_is_used_by_it(rules):
    """ "it is also used by the Route Planner": the passive's agent uses the subject; a value "used
    by default" names no user."""
    got = rules(
        "# Notification Hub\n\nThe SMS adapter is Mercury. Mercury is versioned separately because it is "
        "also used by the Route Planner to text drivers.\n\nThe port used by default is 8080.\n"
    )
    assert ("Route Planner", "uses", "Mercury") in got, got
    assert not [t for t in got if t[1] == "uses" and t[0] != "Route Planner"], got


def test_a_setting_injected_from_a_store_is_the_pages_subjects_use(rules):
    """ "`LEDGER_DB_URL` is injected from Strongbox": the setting uses nothing; the page's subject,
    which reads it, uses the store."""
    got = rules(
        "# Ledger Service\n\nThe Ledger Service stores journal entries.\n\n## Configuration\n\n"
        "- `LEDGER_DB_URL` is injected from Strongbox at deploy time.\n"
    )
    assert ("Ledger Service", "uses", "Strongbox") in got, got
    assert not [t for t in got if t[0] == "LEDGER_DB_URL"], got


def test_a_pre_release_precedes_its_release_when_named_together(rules):
    """ "2.2.0-rc.1 is the release candidate for 2.2.0", or the next list item names the release:
    the candidate precedes it. Two releases of other numbers, or the two only in one paragraph's
    different sentences, relate nothing here."""
    got = rules(
        "# Changelog\n\n- 2.2.0-rc.1 is the release candidate for 2.2.0, the first LTS release.\n\n"
        "# Roadmap\n\n- 3.0.0 becomes the next major release.\n- 3.0.0-beta.2 is planned a month before it.\n\n"
        "# Review\n\nWe promoted v4.1.0-rc1 to production as v4.1.0. Sluice ran on kestrel-client 1.4.0-rc1. "
        "Tomasz will tag kestrel-client 1.4.0 soon. We tested 5.1.0-beta.2 against 5.2.0.\n"
    )
    precedes = {(a, b) for a, rel, b in got if rel == "precedes"}
    assert {("2.2.0-rc.1", "2.2.0"), ("3.0.0-beta.2", "3.0.0"), ("v4.1.0-rc1", "v4.1.0")} <= precedes, got
    assert not [p for p in precedes if "1.4.0" in p[0] or "5.1.0" in p[0]], got


def test_things_a_demonstrative_points_back_to_are_not_the_pages_subject(rules):
    got = rules(
        "# Reference Topics\n\n"
        "Describes variables that store state for the Harbor Shell. These variables are created\n"
        "and maintained by the Harbor Engine.\n\n"
        "The topics are owned by the Docs Guild.\n"
    )
    assert ("Reference Topics", "owned_by", "Harbor Engine") not in got, got
    assert ("Reference Topics", "owned_by", "Docs Guild") in got, got  # a noun that may be the subject still is


def test_an_it_spliced_on_a_described_subject_and_a_gerund_subject_name_no_user(rules):
    """ "The fifth command uses X ..., it uses Y ... It then gets Z": "it" goes on about the
    command, not the first name of the sentence; "using Y to run the command started three tasks":
    the using is the sentence's subject, and no one named does it."""
    got = rules(
        "# Get-Task\n\n## Examples\n\n"
        "The `Get-Task` cmdlet gets the tasks of the current session. The fifth, sixth and seventh command uses the\n"
        "`Open-Channel` cmdlet to create a channel that is connected to the S2 computer, it uses\n"
        "`Invoke-Remote` to start a task on the remote computer using the channel and the **Channel**\n"
        "parameter. It then gets the task using the `Fetch-Record` command on the S2 computer.\n\n"
        "## Notes\n\n"
        "Unlike the previous example, using `Invoke-Remote` to run the `Start-Task` command actually started three\n"
        "independent tasks.\n\n"
        "`Get-Task` uses the Strata Index to find rows.\n"
    )
    assert not [t for t in got if t[1] == "uses" and t[2] in ("Invoke-Remote", "Fetch-Record")], got
    assert ("Get-Task", "uses", "Strata Index") in got, got  # the page's subject named as the user still is


def test_a_unit_in_parentheses_after_a_quantity_is_no_place(rules):
    got = rules(
        "# Ledger Store\n\nThe Ledger Store sets a **RetryTimeout** value of 4 minutes (in MS).\n"
        "The Ledger Store runs in Tallinn.\n"
    )
    assert not [t for t in got if t[1] == "located_in" and t[2] == "MS"], got
    assert ("Ledger Store", "located_in", "Tallinn") in got, got


def test_an_it_before_be_an_adjective_and_an_infinitive_stands_for_nothing(rules):
    """ "it's easier to use X than to debug the query": the reader would use X, whatever the adjective."""
    got = rules(
        "# Ledger Query\n\nLedger Query reads rows from the Strata Index.\n\n"
        "Often, if a query doesn't work as expected, it's easier to use the Quarry Console than to debug the query.\n\n"
        "The Ledger Query uses the Token Vault for secrets.\n"
    )
    assert not [t for t in got if t[2] == "Quarry Console"], got
    assert ("Ledger Query", "uses", "Token Vault") in got, got


@pytest.mark.parametrize(
    "sentence",
    [
        "If you enable this setting, the shell records the events in the Tally Broker log in Event Viewer.",
        "To open the profile of the current user in the current PowerShell host application in Notepad, type:",
    ],
)
def test_a_name_that_only_qualifies_the_noun_in_a_place_is_not_in_it(rules, sentence):
    """ "records events in the Tally Broker log in Event Viewer", "the current PowerShell host
    application in Notepad": the log, the application is in it, not the name."""
    got = rules(f"# Audit\n\n{sentence}\n\nThe Tally Broker runs in Porto.\n")
    assert not [t for t in got if t[1] == "located_in" and t[2] in ("Event Viewer", "Notepad")], got
    assert ("Tally Broker", "located_in", "Porto") in got, got


@pytest.mark.parametrize(
    "sentence",
    [
        "`Export-Record` creates UTF-8 files with BOM by default.",
        "Data files should be saved as Unicode or UTF-8.",
        "UTF-16 characters render correctly only in the console.",
        "Beginning in version 7.4, the encoding for requests defaults to UTF-8 instead of ASCII.",
    ],
)
def test_an_id_shaped_name_used_as_an_adjective_or_listed_with_a_name_is_no_record(rules, sentence):
    got = rules(
        f"# Export-Record\n\n## Notes\n\n`Export-Record` exports records. {sentence}\n\n"
        "The retention follows the rules OPS-12 sets.\n"
    )
    assert not [t for t in got if t[2].startswith("UTF-")], got
    assert ("Export-Record", "refers_to", "OPS-12") in got, got  # a ticket the text names still is one


def test_it_after_an_opening_phrase_is_not_the_name_the_phrase_governs(rules):
    """ "In the absence of a Tally Broker, it uses Y": "it" goes on from the sentence before;
    the name inside the opening phrase neither is "it" nor is listed with it."""
    got = rules(
        "# Encoding\n\n## Notes\n\n"
        "The Harbor Shell writes files. In the absence of a Tally Broker, it uses the Strata Index.\n"
    )
    assert ("Tally Broker", "uses", "Strata Index") not in got, got
    assert ("Harbor Shell", "uses", "Strata Index") in got, got


def test_it_after_an_opening_clause_about_a_description_is_that_description(rules):
    """ "When ... the function can't continue, it should call X", "when an application is hosting
    Y, it's directly using Z": "it" is the function, the application; not the page's subject, nor Y."""
    got = rules(
        "# Write-Report\n\n## Notes\n\nThe `Write-Report` cmdlet writes reports.\n\n"
        "When a terminating error occurs and the function cannot continue, it should call the `Stop-Report` method.\n\n"
        "This is by design, but when an application is hosting Harbor Shell, it is directly using the Harbor SDK packages.\n\n"
        "`Write-Report` uses the Strata Index.\n"
    )
    assert not [t for t in got if t[2] in ("Stop-Report", "Harbor SDK")], got
    assert ("Write-Report", "uses", "Strata Index") in got, got


def test_it_after_then_goes_on_from_a_description_that_opened_the_sentence_before(rules):
    """ "The next code block first defines a new class, X, with the Y() method. Then it defines
    Z": "it" is the code block, as it would be with no "Then"; not the last name written."""
    got = rules(
        "# Classes\n\n## Notes\n\n"
        "The next code block first defines a new class, **ReportItem**, with a single property and the "
        "`ToString()` method. Then it defines the **ReportItemList** class.\n\n"
        "The Harbor Shell defines the **ReportTable** class.\n"
    )
    assert not [t for t in got if t[2] == "ReportItemList"], got
    assert ("Harbor Shell", "defines", "ReportTable") in got, got


def test_a_name_after_a_pronoun_subject_is_not_who_acts_however_close_to_the_verb(rules):
    """ "we must specify the destination in the `Move-Record` cmdlet and use `Get-Record`": we
    use it, not the cmdlet written just before "and use"."""
    got = rules(
        "# Records\n\n## Notes\n\n"
        "To fix the command, we must specify the destination in the `Move-Record` cmdlet and use "
        "`Get-Record` to get the path.\n\n"
        "The `Copy-Record` cmdlet uses `Get-Record`.\n"
    )
    assert ("Move-Record", "uses", "Get-Record") not in got, got
    assert ("Copy-Record", "uses", "Get-Record") in got, got


@pytest.mark.parametrize("mark", ["`", ""])
def test_a_participle_the_parser_takes_for_a_verb_of_the_subject_is_not_the_subjects_doing(rules, mark):
    """ "The X cmdlet changes the current location to the location most recently pushed onto the
    stack by using the Y cmdlet": whoever pushed it used Y, not X. spaCy reads "pushed" either as
    a verb joined to "changes" with no "and" (plain text) or as the sentence's verb with "changes"
    for its subject (with the names in code font); neither says X does it."""
    got = rules(
        f"# Pop-Record\n\n## Description\n\nThe {mark}Pop-Record{mark} cmdlet changes the current location to "
        f"the location most recently pushed onto the stack by using the {mark}Push-Record{mark} cmdlet.\n\n"
        f"The {mark}Pop-Record{mark} cmdlet uses the {mark}Get-Record{mark} cmdlet.\n"
    )
    assert ("Pop-Record", "uses", "Push-Record") not in got, got
    assert ("Pop-Record", "uses", "Get-Record") in got, got


def test_a_name_that_only_qualifies_what_is_introduced_is_not_defined(rules):
    """ "Harbor Shell 3.0 introduces a CIM provider model": the model is what is new, not CIM."""
    got = rules(
        "# Harbor Shell\n\n## Notes\n\nHarbor Shell 3.0 introduces a CIM provider model that uses WinRM.\n\n"
        "Harbor Shell 3.1 introduces the Strata Index.\n"
    )
    assert not [t for t in got if t[1] == "defines" and t[2] == "CIM"], got
    assert [t for t in got if t[1] == "defines" and t[2] == "Strata Index"], got


def test_a_name_that_only_qualifies_what_something_is_based_on_is_not_depended_on(rules):
    """ "The Harbor protocol is based on the following standard Web service specifications: ...":
    on the specifications, not on "Web"."""
    got = rules(
        "# Harbor Protocol\n\n## Notes\n\nThe Harbor Protocol is based on the following standard Web service "
        "specifications: HTTPS, SOAP 1.2 and WS-Eventing.\n\nThe Harbor Protocol depends on the Strata Index.\n"
    )
    assert not [t for t in got if t[2] == "Web"], got
    assert ("Harbor Protocol", "depends_on", "Strata Index") in got, got


def test_a_place_listed_with_a_made_thing_is_no_place(rules):
    """ "available only in Windows Vista, Harbor Server 2008, and later versions": spaCy calls
    the first a place; listed with a server, it is a system, and nothing is located in it."""
    got = rules(
        "# Tally Auth\n\n## Notes\n\n"
        "Tally Auth authentication is available only in Windows Vista, Harbor Server 2008, and later "
        "versions of the Harbor operating system.\n\nThe Tally Broker runs in Tallinn, Estonia.\n"
    )
    assert not [t for t in got if t[1] == "located_in" and t[0] == "Tally Auth"], got
    assert ("Tally Broker", "located_in", "Tallinn") in got, got


def test_an_example_variable_or_a_prepositions_object_is_not_who_uses(rules):
    """ "`$Time` uses the X method": the example's variable does, not the page's subject;
    "Convert access rights to a ReportObject by using X" (a heading): nobody named does, not the
    object of "to" written just before; the agent of a passive still acts ("done by X inside Y")."""
    got = rules(
        "# ConvertFrom-Record\n\n## Synopsis\n\nConverts a record string to a **ReportObject**.\n\n"
        "## Examples\n\nThe second command uses the `ConvertFrom-Record` cmdlet to get the text.\n\n"
        "### Example 3: Convert access rights to a ReportObject by using ConvertFrom-Record with and without "
        "the `-Type` parameter\n\nThe `$Time` variable stores the time. `$Time` uses the `ToUniversalTime()` "
        "method to convert it. The `$Data` variable uses the **CounterSamples** property.\n\n## Notes\n\nCompaction is done by the Tally Broker inside the Strata Index.\n"
    )
    assert not [
        t for t in got if t[1] == "uses" and t[2] in ("ToUniversalTime", "ToUniversalTime()", "CounterSamples")
    ], got
    assert ("ReportObject", "uses", "ConvertFrom-Record") not in got, got
    assert ("Tally Broker", "part_of", "Strata Index") in got, got


def test_the_following_as_an_adjective_cites_nothing(rules):
    """ "The Harbor Shell settings are in the following Strata Policy paths:": "following" says
    which paths; "is enforced, following POL-007" still cites it."""
    got = rules(
        "# Harbor Shell Policy\n\n## Notes\n\nThe Harbor Shell Policy settings are in the following Strata Policy "
        "paths:\n\n- one\n- two\n\nThe Harbor Shell Policy is enforced, following POL-007.\n"
    )
    assert not [t for t in got if t[1] == "cites" and t[2] == "Strata Policy"], got
    assert [t for t in got if t[1] == "cites" and t[2] == "POL-007"], got


def test_things_a_name_only_qualifies_and_people_a_they_stands_for_are_not_the_pages_subject(rules):
    """ "The Strata commands can use the default values": the commands do, not Strata; "When users
    create a session ..., they can use the default session configuration": the users do, not the
    page's subject. "The Strata Index uses X" still says Strata Index uses X."""
    got = rules(
        "# Register-Record\n\n## Description\n\n`Register-Record` registers records.\n\n"
        "Because the administrator installed the provider, the Strata commands can use the Tally Broker.\n\n"
        "When users create a session that connects to the computer, they can select a record or use the "
        "**Harbor Index** that is registered by default.\n\nThe Strata Index uses the Harbor Queue.\n"
    )
    assert not [t for t in got if t[1] == "uses" and t[2] in ("Tally Broker", "Harbor Index")], got
    assert ("Strata Index", "uses", "Harbor Queue") in got, got


def test_an_id_shaped_name_the_page_writes_as_a_kind_once_is_that_kind_everywhere_in_it(rules):
    """ "- `rec7`: Encodes in REC-7 format." then "**REC-7*** is no longer recommended to use.": one
    name, one kind of thing in a page; a ticket the page names is still referred to."""
    got = rules(
        "# Export-Record\n\n## Notes\n\n`Export-Record` exports records. The acceptable encodings are:\n\n"
        "- `rec7`: Encodes in REC-7 format.\n- `rec8`: Encodes in REC-8 format.\n\n"
        "> **REC-7*** is no longer recommended to use.\n\nThe retention follows the rules OPS-12 sets.\n"
    )
    assert not [t for t in got if t[2] == "REC-7"], got
    assert ("Export-Record", "refers_to", "OPS-12") in got, got


def test_followed_by_with_no_subject_named_says_nothing_of_the_pages_subject(rules):
    """ "Classic records are read first, followed by the new Strata Index records": a sequence the
    sentence names; "Superseded by ADR-019" and "This later led to ADR-023" on a decision record
    are the record's."""
    got = rules(
        "# Get-Record\n\n## Notes\n\n`Get-Record` reads records. Classic records are read first, followed by "
        "the new **Harbor Index** records.\n"
    )
    assert not [t for t in got if t[1] == "precedes"], got
    got = rules(
        "# ADR-012: Event bus\n\n## Consequences\n\n- Consumers must be idempotent. This later led to ADR-023.\n"
    )
    assert ("ADR-012", "precedes", "ADR-023") in got, got


def test_a_place_a_preposition_opens_the_sentence_with_is_no_subject_of_the_list(rules):
    """ "In Windows, PowerShell remoting uses X": the comma after "In Windows" looks like a list's,
    but Windows is where, not one more user of X; "Kestrel, Strongbox and Toggler use X" is a list."""
    got = rules(
        "# Remote Requirements\n\nIn Windows, PowerShell remoting uses Windows Remote Management (WinRM).\n\n"
        "Kestrel, Strongbox and Toggler use the Lantern Agent.\n"
    )
    assert ("PowerShell", "uses", "Windows Remote Management") in got, got
    assert not [t for t in got if t[0] == "Windows"], got
    assert {("Strongbox", "uses", "Lantern Agent"), ("Toggler", "uses", "Lantern Agent")} <= got, got


def test_this_as_subject_is_what_came_before_not_the_pages_subject(rules):
    """ "This is a fictitious domain used by Contoso": "this" is the domain the sentence before
    named, so Contoso uses no page subject; in a block that opens with a term it is that term."""
    got = rules(
        "# Fetch-Page\n\nThe `Fetch-Page` cmdlet sends requests.\n\n"
        "> The examples reference hosts in the `example.org` domain. This is a fictitious domain used by "
        "Microsoft for examples.\n\n"
        "## Plans\n\n- **ARM benchmarks**: Tachometer will run on the pool. This depends on INFRA-104 being closed.\n"
    )
    assert not [t for t in got if t[1] == "uses"], got
    assert ("ARM benchmarks", "depends_on", "INFRA-104") in got, got


def test_a_negated_verb_negates_the_trigger_that_completes_it(rules):
    """ "Spool does not change its behaviour based on the Edition field": two words between "not"
    and "based on" still negate it, and "not need to use"; the page's other sentences still say what they say."""
    got = rules(
        "# Spool Daemon\n\nThe Spool Daemon does not change its behaviour based on the `Edition` field.\n\n"
        "The Spool Daemon does not need to use the Harbor Index.\n\n"
        "The Spool Daemon reads its jobs based on the Kestrel Bus.\n"
    )
    assert not [t for t in got if t[2] in ("Edition", "Harbor Index")], got
    assert ("Spool Daemon", "depends_on", "Kestrel Bus") in got, got


def test_a_variable_the_parse_gives_as_subject_uses_nothing(rules):
    """ "`$DST` uses the **IsSummerTime** method", "The `$B` variable uses the `Get-Listing`
    cmdlet": a variable of the example holds a value; no entity uses anything."""
    got = rules(
        "# Get-Stamp\n\n## Examples\n\nA variable, `$DST` stores the result of `Get-Stamp`. `$DST` uses the "
        "**IsSummerTime** method to test the date.\n\nThe `$B` variable uses the same `Get-Listing` cmdlet.\n\n"
        "A variable, `$Sum` stores the result of `Get-Stamp`. `$Sum` uses the **IsLeapYear** method to test the date.\n"
    )
    # nor the page's subject, where the variable is no name at all ("$" hung on the verb by the parser)
    assert not [t for t in got if t[1] == "uses"], got


def test_what_a_verb_acts_on_does_not_use_the_means(rules):
    """ "Example 5 - Get an ACL using **InputObject**": the ACL is got, whoever gets it uses
    InputObject; "The Audit Daemon exports the ACL using the Harbor Index": the daemon does."""
    got = rules(
        "# Get-Acl\n\n## Examples\n\n### Example 5 - Get an ACL using **InputObject**\n\nThis example gets the ACL.\n\n"
        "## Notes\n\nThe Audit Daemon exports the ACL using the Harbor Index.\n"
    )
    assert not [t for t in got if t[0] == "ACL"], got
    assert ("Audit Daemon", "uses", "Harbor Index") in got, got


def test_we_going_through_an_example_is_not_the_pages_subject_using_something(rules):
    """ "First we use `Get-Spool` to get an object ...": the writers walk through an example; the
    page's subject does not use it."""
    got = rules(
        "# Start-Spool\n\n## Examples\n\n### Example 5\n\nFirst we use `Get-Spool` to get an object that "
        "represent the WMI service and store it in the `$s` variable.\n"
    )
    assert not [t for t in got if t[1] == "uses"], got


def test_in_a_place_after_a_negated_verb_a_release_verb_or_a_pronoun_locates_nothing(rules):
    """ "aren't supported in Lisbon", "was introduced in Porto", "return it in Berlin", "work fine in
    the Spool Daemon, but may break in Tallinn": nothing named is said to be there; "runs in
    Madrid", "at the Harbor Index in Oslo" still are."""
    got = rules(
        "# Tally Broker\n\nThe Tally Broker and the Audit Daemon aren't supported in Lisbon.\n\n"
        "The `Quota` check of the Audit Daemon was introduced in Porto.\n\n"
        "For the Harbor Index, the class should return it in Berlin.\n\n"
        "These reports work fine in the Spool Daemon, but may break in Tallinn.\n\n"
        "The Kestrel Bus runs in Madrid. The reports were shown at the Harbor Index in Oslo.\n"
    )
    placed = {t for t in got if t[1] == "located_in"}
    assert not [t for t in placed if t[2] in ("Lisbon", "Porto", "Berlin", "Tallinn")], got
    assert ("Kestrel Bus", "located_in", "Madrid") in got, got
    assert ("Harbor Index", "located_in", "Oslo") in got, got


def test_a_part_acted_on_or_a_noun_described_by_inside_is_no_part_of_the_subject(rules):
    """ "should return a member of the **Quota** enum": what is returned is the member; "The code
    inside the `Tally-Loop` loop displays ...": the code is inside it, not the page's subject.
    "forms part of" and "is a member of" still say it of their subject."""
    got = rules(
        "# Spool Daemon\n\nThe **Spool Daemon** should return a member of the **Quota** enum.\n\n"
        "The code inside the `Tally-Loop` loop displays the file path.\n\n"
        "The Audit Daemon forms part of the Harbor Index. The Kestrel Bus is a member of the Harbor Index.\n"
    )
    parts = {t for t in got if t[1] == "part_of"}
    assert not [t for t in parts if t[2] in ("Quota", "Tally-Loop")], got
    assert ("Audit Daemon", "part_of", "Harbor Index") in got, got
    assert ("Kestrel Bus", "part_of", "Harbor Index") in got, got


def test_a_document_defines_no_team_person_or_place(rules):
    """ "The Harbor Roads Team allows at most 20 requests per hour, as specified in the ITS-4
    agreement": the agreement sets the limit; it does not define the team that acts. A term is
    still defined ("The **Quiet window** is defined in POL-007", "defines the **Size** property")."""
    got = rules(
        "# Signal Relay\n\nThe Harbor Roads Team allows at most 20 requests per hour, as specified in the "
        "ITS-4 agreement.\n\nThe **Quiet window** is defined in POL-007.\n\n"
        "The **Ledger** class defines the **Size** property as an integer.\n"
    )
    assert not [t for t in got if t[1] == "defines" and t[2] == "Harbor Roads Team"], got
    assert ("POL-007", "defines", "Quiet window") in got, got
    # a term set off in bold is defined whatever NER calls it (spaCy reads "Size" here as a person)
    assert ("Ledger", "defines", "Size") in got, got


def test_an_instruction_after_its_purpose_is_the_readers_however_its_verb_is_tagged(rules):
    """ "To cancel ..., delete the subscriber by using X": the parser reads "delete" as a past
    tense with no subject; the sentence instructs the reader, the page's subject uses nothing."""
    got = rules(
        "# Get-Zorb\n\nThe `Get-Zorb` cmdlet gets the zorb subscribers of the session.\n\n"
        "To cancel a zorb subscription, delete the zorb subscriber by using the `Unregister-Zorb` cmdlet.\n"
    )
    assert not [t for t in got if t[2] == "Unregister-Zorb"], got


def test_the_subject_of_the_next_clause_is_not_what_a_trigger_acts_on(rules):
    got = rules(
        "# Quibble Loops\n\nQuibble runs loops.\n\n"
        "If the spool is full, Marta Fellgate runs, and Quibble exits the loop.\n"
    )
    assert not [t for t in got if t[1] == "owned_by" and t[0] == "Quibble"], got


def test_a_participle_on_what_a_preposition_or_the_reader_acts_on_is_not_the_subjects_use(rules):
    """ "for sessions using this configuration": the sessions use it; "When you disconnect a
    Spool using the X parameter": the reader does. Neither is the page's subject, nor the Spool."""
    got = rules(
        "# New-ZorbFile\n\nThe `New-ZorbFile` cmdlet creates a zorb file.\n\n## Parameters\n\n### -SpoolDirectory\n\n"
        "Specifies the directory to place zorb transcripts for sessions using this **zorb configuration**.\n\n"
        "When you disconnect a Spool using the **Harrowdale** parameter, the session is kept.\n"
    )
    assert not [t for t in got if {t[0], t[2]} & {"zorb configuration", "Harrowdale"}], got
    # however far up the parse hangs the sentence's verb ("place spool transcripts for sessions using X")
    got = rules(
        "# New-ZorbFile\n\nThe `New-ZorbFile` cmdlet creates a zorb file.\n\n## Parameters\n\n### -SpoolDirectory\n\n"
        "Specifies the directory to place spool transcripts for sessions using this **spool configuration**.\n"
    )
    assert not [t for t in got if t[2] == "spool configuration"], got
    # a past participle the parse hangs on a preposition's object describes the name the line opens with
    got = rules(
        "# System overview\n\n## Platform services\n\n"
        "Quarry Engine (QE). Nightly payouts to distributors, built on top of the Fellgate Service.\n"
    )
    assert ("Quarry Engine", "depends_on", "Fellgate Service") in got, got
    # on one thing a preposition governs, a present participle may say how the subject acts
    got = rules("# Tee-Zorb\n\n`Tee-Zorb` prints the piped results to the console using the **FileName** parameter.\n")
    assert ("FileName", "part_of", "Tee-Zorb") in got, got


def test_a_name_qualifying_one_of_a_kind_does_not_act(rules):
    """ "an IIS application that allows ... can require X": some application the name qualifies
    requires X, not the name; a name that holds its head noun still acts."""
    got = rules(
        "# New-ZorbOption\n\nThe `New-ZorbOption` cmdlet creates a zorb option.\n\n"
        "For example, an Oakfield application that allows for Kerberos authentication can require the "
        "default **Zorb** key to be registered to a user account.\n\n"
        "An Oakfield client requires the **Harrowdale** key.\n"
    )
    assert not [t for t in got if t[2] == "Zorb"], got
    assert ("Oakfield client", "depends_on", "Harrowdale") in got, got


def test_a_full_stop_without_its_space_still_ends_the_sentence(extractor):
    """ "... from the spool.The Quarry Index uses X": the evidence is the second sentence alone;
    a dotted name ("System.Management.Automation") is not cut."""
    text = (
        "# Split-Spool\n\nThe first command detaches the spool.The Quarry Index uses the Ferry Relay. "
        "Use System.Management.Automation here.\n"
    )
    doc = parse_document(text, path="t.md")
    para = doc.blocks[1]
    assert [para.raw[s:e].strip() for s, e in para.sentences()] == [
        "The first command detaches the spool.",
        "The Quarry Index uses the Ferry Relay.",
        "Use System.Management.Automation here.",
    ]
    got = {
        (r["src"], r["rel"], r["dst"]): r["evidence"]["sentence"]
        for r in extract_relations(doc, extractor.mentions(doc))
    }
    assert got.get(("Quarry Index", "uses", "Ferry Relay")) == "The Quarry Index uses the Ferry Relay.", got


def test_an_id_a_named_subject_acts_on_is_referred_to_by_that_subject(rules):
    """An id that is an argument of a clause with a named subject ("Mira Tovan keeps the list in
    BRK-31", "Pellet will keep its format; see BRK-40") is referred to by that subject, not by
    the page. One in parentheses after a statement, or in a clause of its own ("as defined in
    X"), stays with the page; so does one whose clause has no named subject. An id labelling a
    line refers to what the line's statement is about, and an id that is a clause's subject to
    the names in its objects."""
    got = rules(
        "# Dovetail Gateway\n\nThe Dovetail Gateway batches frobs.\n\n"
        "Mira Tovan keeps the list of slow readers in BRK-31.\n\n"
        "Pellet will keep its current format; see BRK-40 for the discussion.\n\n"
        "The cache is flushed every night (BRK-52).\n\n"
        "Old rows are kept for a year, as defined in BRK-60.\n\n"
        "The decision to build Pellet is recorded in BRK-71.\n\n"
        "- BRK-80: Pellet dropped rows in the nightly export.\n\n"
        "BRK-90 proposes moving the Quarry plugin, which offloads old rows to cold storage, into Pellet.\n"
    )
    assert ("Mira Tovan", "refers_to", "BRK-31") in got, got
    assert ("Dovetail Gateway", "refers_to", "BRK-31") not in got, got
    assert ("Pellet", "refers_to", "BRK-40") in got, got
    for page_refers in ("BRK-52", "BRK-60", "BRK-71"):
        assert ("Dovetail Gateway", "refers_to", page_refers) in got, got
    assert ("BRK-80", "refers_to", "Pellet") in got, got
    assert ("Dovetail Gateway", "refers_to", "BRK-80") not in got, got
    # a record that does something to things is about them
    assert {("BRK-90", "refers_to", "Quarry plugin"), ("BRK-90", "refers_to", "Pellet")} <= got, got
    assert ("Dovetail Gateway", "refers_to", "BRK-90") not in got, got


def test_replacing_one_thing_with_another_is_no_succession(rules):
    """ "X replaces Y" says X succeeds Y; "X replaces Y with Z" says X puts Z in Y's place."""
    got = rules(
        "# Sluicegate\n\nBefore loading, Sluicegate replaces every Quarry field with a keyed hash.\n\n"
        "The Tern Engine replaces the Borealis Engine.\n"
    )
    precedes = {(a, b) for a, rel, b in got if rel == "precedes"}
    assert ("Quarry", "Sluicegate") not in precedes, got
    assert ("Borealis Engine", "Tern Engine") in precedes, got


def test_the_subject_of_another_sentence_the_parse_ran_in_does_not_act(rules):
    """ "... so he can investigate.The second command uses X" (a full stop without its space):
    the parse runs the two sentences into one and calls "he" the subject of "uses"; no name of
    this sentence acts, so neither the section's subject nor the page's uses X."""
    got = rules(
        "# Disconnect-TernSession\n\n## EXAMPLES\n\n### Example 3 - Using multiple TernSessions on multiple computers\n\n"
        "The manager directs the technician to disconnect from the session so he can investigate.The second command "
        "uses the `Get-TernSession` cmdlet to get the `ITTask` session on the Srv1 computer and the "
        "`Disconnect-TernSession` cmdlet to disconnect it.\n"
    )
    assert not [t for t in got if t[2] == "Get-TernSession"], got


def test_a_relative_clause_on_what_a_copula_says_the_subject_is_is_the_subjects(rules):
    """ "The Fare Engine is the only Quarry Labs service that talks to Paylink": the clause describes
    the service the Fare Engine is; "Quarry Labs" only qualifies that noun and talks to nothing."""
    got = rules(
        "# Fare Engine\n\nThe Fare Engine, FE for short, is the only Quarry Labs service that talks to "
        "Paylink, our payment processor.\n"
    )
    assert ("Fare Engine", "uses", "Paylink") in got, got
    assert not [t for t in got if t[0] == "Quarry Labs"], got


def test_a_heading_that_writes_a_name_with_its_version_is_about_that_release():
    """ "## 1. ledger-svc v3.2.1 rollout" in meeting notes is about the release v3.2.1: what the
    section refers to ("The fix for the stall (OPS-781) ...") is the release's, not the service's
    (golden's graph joined the Ledger Service page to every question about v3.2.1 that way)."""
    from kgr.stages.extract import Span
    from kgr.stages.relations import extract_relations

    text = (
        "# Payments sync\n\n## 1. fare-svc v3.2.1 rollout\n\n"
        "The fix for the relay stall (OPS-781) has been in staging for a week.\n\n"
        "## 2. fare-svc capacity\n\nThe cache misses were traced to a bug (OPS-790).\n"
    )
    doc = parse_document(text, path="t.md")

    def span(surface, typ, nth=0, pattern=None):
        at = -1
        for _ in range(nth + 1):
            at = text.index(surface, at + 1)
        return Span(at, at + len(surface), surface, typ, "regex", 0.9, {"pattern": pattern} if pattern else {})

    spans = [
        span("fare-svc", "SERVICE"),
        span("v3.2.1", "VERSION", pattern="version"),
        span("OPS-781", "CONCEPT", pattern="ticket"),
        span("fare-svc", "SERVICE", nth=1),
        span("OPS-790", "CONCEPT", pattern="ticket"),
    ]
    doc.set_subject(spans)
    got = {(r["src"], r["rel"], r["dst"]) for r in extract_relations(doc, spans)}
    assert ("v3.2.1", "refers_to", "OPS-781") in got, got
    assert ("fare-svc", "refers_to", "OPS-781") not in got, got
    # a heading with no version keeps its name as the subject
    assert ("fare-svc", "refers_to", "OPS-790") in got, got
