"""Relation extraction: sentence patterns and structural rules over mentions.

Relations use kgr's small vocabulary (defines, refers_to, part_of, uses,
depends_on, precedes, owned_by, located_in, cites, same_as). Each relation record
carries the surfaces of its two ends (the linker turns them into entity keys), the
pattern that produced it, a confidence (pattern weight x proximity x mention
score) and its evidence: document offsets and the sentence.

Patterns are English wording, not names: "X is built on Y", "Y owns X, Z and W",
a "Dependencies" section under a service page, "Owner: T", consecutive numbered
steps, "See also" links, table columns named Owner or Region.
"""

from __future__ import annotations

import bisect
import contextvars
import functools
import re
from dataclasses import dataclass

from kgr import records
from kgr.stages.textmodel import LEADING_CLAUSE, Block, Document, lemma, token_covering, tokens_starting_in

VOCABULARY = (
    "defines",
    "refers_to",
    "part_of",
    "uses",
    "depends_on",
    "precedes",
    "owned_by",
    "located_in",
    "cites",
    "same_as",
)
# Relations only the text's own words make (a rename, an alias: "was called", "formerly"): the
# learned model keeps or drops what the rules say of them but never adds one alone. Two names in one
# sentence are two things far more often than one; the model's own same_as held on 1 of 7 pairs of a
# corpus left out of training, and on none of those read on a corpus it never saw.
STATED_ONLY = frozenset({"same_as"})


@dataclass(frozen=True)
class Trigger:
    rel: str
    regex: re.Pattern
    inverse: bool  # True: the object is the source (e.g. "T owns X" -> X owned_by T)
    weight: float
    name: str


def _t(rel: str, pattern: str, inverse: bool = False, weight: float = 0.8, name: str | None = None) -> Trigger:
    return Trigger(
        rel, re.compile(rf"(?<![\w-])(?:{pattern})(?![\w-])", re.I), inverse, weight, name or pattern.split("|")[0]
    )


AUX = r"(?:(?:is|are|was|were|has been|have been|will be|must be|can be|gets?)\s+)?(?:also\s+|now\s+|still\s+|only\s+)?"

TRIGGERS: list[Trigger] = [
    # same_as: "A was called B until ...", "A (formerly B)"
    _t(
        "same_as",
        r"(?:was|were)\s+(?:called|named|known\s+as|sold\s+as|branded)",
        inverse=True,
        weight=0.95,
        name="was called",
    ),
    _t(
        "same_as",
        r"formerly(?:\s+(?:called|known\s+as))?|previously\s+(?:called|known\s+as)|renamed\s+from",
        inverse=True,
        weight=0.9,
        name="formerly",
    ),
    # "A was renamed to B": the former name first. Not "A is now B": "X is now GA" says how X is
    _t(
        "same_as",
        r"(?:was|were|has\s+been|have\s+been|got)\s+renamed(?:\s+(?:to|as))?",
        weight=0.9,
        name="renamed to",
    ),
    # "A: The name of B before 2.0.0", "A, the former name of B"
    _t(
        "same_as",
        r"(?:the\s+)?(?:former|old|previous|original)\s+name\s+of|(?:the\s+)?name\s+of(?=\s[^.;:]{1,60}?\s(?:before|until|prior\s+to)\b)",
        weight=0.9,
        name="name of",
    ),
    # owned_by
    _t(
        "owned_by",
        rf"{AUX}(?:owned|maintained|run|operated|managed|administered|governed|built\s+and\s+run)\s+by",
        weight=0.9,
        name="owned by",
    ),
    _t(
        "owned_by",
        r"owns|maintains|operates|runs(?!\s+(?:in|on|at|every|once|nightly|daily|inside|from))|is\s+responsible\s+for|looks\s+after|manages|(?:also\s+)?takes\s+care\s+of",
        inverse=True,
        weight=0.8,
        name="owns",
    ),
    # part_of: people in teams
    _t("part_of", rf"{AUX}(?:led|headed|managed)\s+by", inverse=True, weight=0.85, name="led by"),
    _t(
        "part_of",
        r"leads|heads|chairs|co-chairs|(?:is|as)\s+(?:the\s+|a\s+|an\s+)?(?:\w+\s+)?(?:lead|head|manager|director|chair|chairperson|treasurer|secretary|president)\s+of",
        weight=0.85,
        name="leads",
    ),
    _t("part_of", r"reports\s+to", inverse=True, weight=0.6, name="reports to"),
    _t(
        "part_of",
        rf"{AUX}(?:a\s+|an\s+|one\s+)?(?<!\bor\s)(?:part|component|member|module|subsystem|sub-resource)\s+of|belongs\s+to|{AUX}(?:served|exposed|provided|implemented)\s+by|{AUX}inside",
        weight=0.85,
        name="part of",
    ),
    _t(
        "part_of",
        r"(?:is|are)\s+(?:the|an?|one\s+of\s+the)\s+(?:\w+\s+)?(?:entry\s+points?|front\s+ends?|sidecars?|adapters?|plugins?|modules?|components?|subsystems?|parts?|layers?|renderers?|workers?)\s+(?:of|in|inside|for)",
        weight=0.8,
        name="is the part of",
    ),
    _t(
        "part_of",
        r"together\s+with\s+(?:its|their)\s+(?:\w+\s+)?(?:components?|parts?|adapters?|modules?)",
        inverse=True,
        weight=0.8,
        name="with its components",
    ),
    # depends_on
    _t(
        "depends_on",
        rf"{AUX}(?:built|running|runs|based)\s+(?:on\s+top\s+of|on)|depends\s+(?:\w+ly\s+)?on|depend\s+(?:\w+ly\s+)?on|requires|require|needs|{AUX}a\s+hard\s+dependency\s+(?:on|of)|cannot\s+(?:work|run|start)\s+without|relies\s+on",
        weight=0.85,
        name="depends on",
    ),
    # located_in
    _t(
        "located_in",
        rf"{AUX}(?:located|based|hosted|deployed|housed|situated)\s+in|runs\s+in|run\s+in|sits\s+in|works\s+(?:from|in|out\s+of)|lives\s+in|(?:is\s+)?in\s+the\s+(?=\w+\s+(?:office|region)\b)",
        weight=0.85,
        name="located in",
    ),
    # defines / cites
    _t(
        "defines",
        # "specified by" and "set by" are said of a value a parameter or a policy setting sets
        # ("the directory specified by the Path parameter"), not of a definition; "introduced in"
        # and "established in" say when ("introduced in version 3.0", "established in 1998"):
        # "introduced by" says who
        rf"{AUX}(?:defined|specified|described)\s+in|{AUX}(?:defined|introduced|established)\s+by|as\s+(?:specified|defined|described)\s+in",
        inverse=True,
        weight=0.85,
        name="defined in",
    ),
    # not "specifies": "The X parameter specifies the string Y" gives a value, it defines nothing
    _t("defines", r"defines|introduces|establishes", weight=0.8, name="defines"),
    _t(
        "cites",
        r"cites|in\s+accordance\s+with|complies\s+with|compliant\s+with|following|under\s+the",
        weight=0.6,
        name="cites",
    ),
    # precedes
    _t(
        "precedes",
        r"supersedes|replaces|(?:is\s+)?(?:a\s+)?drop-in\s+replacement\s+for|builds\s+on",
        inverse=True,
        weight=0.8,
        name="supersedes",
    ),
    _t(
        "precedes",
        rf"{AUX}(?:superseded|replaced)\s+by|(?:is\s+)?followed\s+by|(?:later\s+)?led\s+to",
        weight=0.7,
        name="superseded by",
    ),
    # "Mercury is also used by the Route Planner": the agent uses the subject
    _t("uses", rf"{AUX}(?:used|called|consumed)\s+by", inverse=True, weight=0.7, name="used by"),
    # uses (broadest, last)
    _t(
        "depends_on",
        r"(?:collects|reads)(?:\s+[\w'’]+){0,6}\s+from|fetches(?:\s+\w+){0,4}\s+from|pulls(?:\s+\w+){0,4}\s+from|receives(?:\s+\w+){0,4}\s+from",
        weight=0.6,
        name="collects from",
    ),
    _t(
        "uses",
        r"uses|use|using|integrates\s+with|integrate\s+with|calls|call|consumes(?:\s+\w+)?\s+from|consumes|publishes(?:\s+\w+){0,3}\s+(?:to|on)|sends(?:\s+\w+){0,4}\s+(?:through|via|to)|talks\s+to|writes(?:\s+\w+){0,3}\s+(?:to|into)|(?:is\s+)?(?:configured|injected)\s+(?:from|via|through)|implements|relies\s+on|(?:is\s+)?powered\s+by|hands(?:\s+\w+){0,3}\s+to|exports(?:\s+[\w'’]+){0,9}\s+to|submits(?:\s+\w+){0,3}\s+to|stores(?:\s+\w+){0,3}\s+in|(?:copies|loads|writes)(?:\s+[\w'’`.]+){0,5}\s+into|(?:is|are)\s+kept\s+in|goes\s+through|(?:sends|routes|talks)(?:\s+\w+){0,4}\s+(?:through|via)",
        weight=0.7,
        name="uses",
    ),
]

# Sections whose list items name what the page's subject needs.
DEPENDENCY_HEADINGS = re.compile(r"\b(?:dependenc|requirement|prerequisite|upstream|integrations?\b|relies)", re.I)
ITEM_LEAD = re.compile(
    r"\s*(?:[-*+]|\d+[.)])?\s*(?:(?:requires?|needs?|uses?|integrates\s+with|depends\s+on|calls|reads\s+from|writes\s+to)\s+)?(?:the\s+|an?\s+|our\s+)?",
    re.I,
)
SEE_ALSO_HEADINGS = re.compile(r"^(?:see\s+also|related(?:\s+\w+)?|further\s+reading|links)$", re.I)
REFERENCE_HEADINGS = re.compile(r"^(?:references?|sources|citations|normative\s+references|bibliography)$", re.I)
KEY_VALUE = re.compile(
    r"(?:^|[·|;]\s*|\n|(?<=[.!?])\s+)\s*(?P<key>owner|owners|owning\s+team|owned\s+by|maintainers?|maintained\s+by|team|region|location|"
    r"depends\s+on|dependencies|supersedes|superseded\s+by|related|replaces)\s*:\s*",
    re.I,
)
KEY_RELATIONS = {
    "owner": ("owned_by", False),
    "owners": ("owned_by", False),
    "owning team": ("owned_by", False),
    "owned by": ("owned_by", False),
    "maintainer": ("owned_by", False),
    "maintainers": ("owned_by", False),
    "maintained by": ("owned_by", False),
    "team": ("owned_by", False),
    "region": ("located_in", False),
    "location": ("located_in", False),
    "depends on": ("depends_on", False),
    "dependencies": ("depends_on", False),
    "supersedes": ("precedes", True),
    "replaces": ("precedes", True),
    "superseded by": ("precedes", False),
    "related": ("refers_to", False),
}
REQUIRED_WORDS = re.compile(
    r"\b(?:required|requires?|depends?|hard\s+dependency|cannot|must|mandatory|blocking|needs?|built\s+on)\b", re.I
)
NEGATION = re.compile(
    # "doesn't", "isn't", "can't" and any other "n't" (even a misspelt "that'sn't")
    r"(?:\b(?:never|not|no\s+longer|cannot|without|instead\s+of|rather\s+than|alternative\s+to"
    r"|as\s+opposed\s+to)|n['’]t)\s+(?:\w+\s+)?$",
    re.I,
)
# "prevents users from using X", "blocks the job from calling X": the verb says the use does not happen
PREVENTED = re.compile(
    r"\b(?:prevent|prevents|prevented|preventing|stop|stops|stopped|block|blocks|blocked|prohibit|prohibits"
    r"|prohibited|keep|keeps|kept|bar|bars|barred|disallow|disallows|disallowed)\s+(?:[\w'’-]+\s+){0,3}from\s+$",
    re.I,
)
# "without encountering an error or using CredSSP": a gerund coordinated under "without" is denied too
NEGATED_GERUND = re.compile(r"\bwithout\s+\w+ing\b[^,;:.()]{0,80}\b(?:or|nor|and)\s+$", re.I)
LIST_GAP = re.compile(r"^\s*(?:,|and|or|&|,\s*and|,\s*or|as\s+well\s+as|plus)?\s*(?:the|a|an|its|their|our)?\s*$", re.I)
OBJECT_GAP = re.compile(
    r"^[,:]?\s*(?:(?!(?:with|of|for|in|on|at|from|to|by|about|into|than)\b)[\w'’/-]+\s+){0,3}$", re.I
)
OPENING_MARKUP = "`*_[(\"'\u201c\u2018"
TRAILING_OPENER = re.compile(rf"(?<=[.!?:;])\s+[{re.escape(OPENING_MARKUP)}]+$")  # the next sentence's
SUBJECT_GAP = re.compile(r"^\s*(?:\([^()]{0,40}\)\s*)?(?:,[^,;:]{0,60},\s*)?(?:\w+\s+){0,2}$")
DATE = "DATE"
TYPE_OK = {
    "owned_by": (None, {"TEAM", "ORG", "PERSON"}),
    "located_in": (None, {"LOCATION"}),
    "part_of": (None, None),
}


def extract_relations(doc: Document, spans: list, nlp_docs=None) -> list[dict]:
    """The rules' relations. Each record carries the two mentions under ``_spans``, which the
    learned model reads (:mod:`kgr.stages.relmodel`) and which is dropped before output."""
    found: dict[tuple[str, str, str], dict] = {}

    def add(src, dst, rel: str, weight: float, pattern: str, block: Block, s: int, e: int, proximity: float = 1.0):
        if src is None or dst is None:
            return
        a, b = _name(src), _name(dst)
        if not a or not b or a.lower() == b.lower() and rel != "same_as":
            return
        if DATE in (src.type, dst.type):
            return  # no relation type joins a date ("Date: 11 June 2024 · Location: Porto office")
        if _same(src, dst):
            return
        confidence = round(weight * proximity * min(1.0, 0.5 + 0.5 * min(src.score, dst.score) / 0.9), 4)
        key = (a, rel, b)
        prev = found.get(key)
        if prev is not None and prev["confidence"] >= confidence:
            return
        found[key] = {
            "kind": records.RELATION,
            "src": a,
            "dst": b,
            "rel": rel,
            "confidence": confidence,
            "pattern": pattern,
            "src_type": src.type,
            "dst_type": dst.type,
            "evidence": evidence(doc.text, s, e),
            "_spans": (src, dst),  # for the learned model (kgr.stages.relmodel); not part of the record
        }

    by_block = _spans_by_block(doc, spans)
    doc._spans_cache = by_block
    doc._kinds_cache = None
    PLACE_VOTES.set(_place_votes(spans))
    for block in doc.blocks:
        if block.kind == "code":
            continue
        bspans = by_block.get(id(block), [])
        ordered = sorted(bspans, key=lambda sp: sp.start)
        starts = [sp.start for sp in ordered]
        for s0, e0 in block.sentences():
            s, e = block.start + s0, block.start + e0
            sent_spans = [
                sp for sp in ordered[bisect.bisect_left(starts, s) : bisect.bisect_left(starts, e)] if sp.end <= e
            ]
            _sentence_patterns(doc, block, s, e, sent_spans, add)
        _structural(doc, block, bspans, add)
        _appositions(doc, block, bspans, add)
        _now_named(doc, block, bspans, add)
        _members(doc, block, bspans, add)
        _interfaces(doc, block, bspans, add)
        _locations(doc, block, bspans, add)
        _definition(doc, block, bspans, add)
        _as_required(doc, block, bspans, add)
        _defined_terms(doc, block, bspans, add)
        _release_additions(doc, block, bspans, add)
    _steps(doc, by_block, add)
    _tables(doc, by_block, add)
    _sequences(doc, by_block, add)
    _prereleases(doc, by_block, add)
    # a pair related in a specific way ("Supersedes: ADR-004", "following ADR-023") needs no
    # generic "refers to" besides
    specific = {(r["src"], r["dst"]) for r in found.values() if r["rel"] not in ("refers_to", "same_as")}
    return [r for r in found.values() if not (r["rel"] == "refers_to" and (r["src"], r["dst"]) in specific)]


def evidence(text: str, s: int, e: int) -> dict:
    """A relation's evidence: the sentence ``text[s:e]`` with the markup that opens it (the
    sentence splitter leaves the "`" or "**" of "`Restart-Computer` uses ..." to the sentence
    before) and without the next sentence's opening markup at its end."""
    j = s
    while j > 0 and text[j - 1] in OPENING_MARKUP:
        j -= 1
    if j < s and (j == 0 or text[j - 1].isspace()):
        s = j
    tail = TRAILING_OPENER.search(text, s, e)
    if tail is not None:
        e = tail.start()
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return {"start": s, "end": e, "sentence": text[s:e]}


def _name(sp) -> str:
    return (sp.refers or sp.surface).strip()


def _same(a, b) -> bool:
    return (a.ref_start if a.refers else a.start) == (b.ref_start if b.refers else b.start) and _name(a) == _name(b)


def _spans_by_block(doc: Document, spans: list) -> dict[int, list]:
    out: dict[int, list] = {}
    for block, sp in doc.blocks_of(spans):
        out.setdefault(id(block), []).append(sp)
    return out


def _relevant(sp) -> bool:
    return sp.type not in ("DATE", "VERSION")


def _sentence_patterns(doc: Document, block: Block, s: int, e: int, sent_spans: list, add) -> None:
    masked_sentence = block.masked[s - block.start : e - block.start]
    taken: list[tuple[int, int]] = []
    for trig in TRIGGERS:
        for m in trig.regex.finditer(masked_sentence):
            ts, te = s + m.start(), s + m.end()
            if any(ts < b and a < te for a, b in taken):
                continue
            # "copies `journal.posted.v1` into Basalt": an identifier between the trigger's first and
            # last words is what the verb acts on, for "uses" one of its objects too
            verb_end = ts + len(m.group().split()[0])
            last = ts + m.group().rstrip().rfind(m.group().split()[-1])
            inner = [sp for sp in sent_spans if verb_end < sp.start and sp.end <= last and sp.source != "coref"]
            if any(sp.start < te and ts < sp.end and sp.source != "coref" and sp not in inner for sp in sent_spans) or (
                inner and (trig.rel != "uses" or not all(_as_code(doc, sp) or sp.surface.islower() for sp in inner))
            ):
                # the trigger word is inside a name, or a proper name stands between its words
                # ("sends the XML to X": what XML is, and who sends it, is unclear). An identifier
                # written as code is used too; a common noun ("exports a summary of the settlement
                # batches to X") is what is handed on
                continue
            inner = [sp for sp in inner if _as_code(doc, sp)]
            if _in_code(doc.text, ts):
                continue  # "`using namespace System.Text`": a keyword of the code shown, not a word of the sentence
            if trig.rel == "uses" and masked_sentence[m.start()].isupper():
                continue  # "ADR-012: Use Kestrel for ...": an imperative or a decision's title, no fact yet
            if trig.rel == "uses" and _use_as_noun(doc, block, ts):
                continue  # "while X is in use", "the use of X": no one is said to use anything
            if trig.name == "supersedes" and _substitutes(doc, block, ts):
                continue  # "Sluice replaces every PII field with a hash": the subject acts, succeeds nothing
            if trig.rel == "cites" and _modifier(doc, block, ts):
                continue  # "are in the following Group Policy paths": "following" says which, cites nothing
            if NEGATION.search(masked_sentence[max(0, m.start() - 24) : m.start()]) or _negated(doc, block, ts):
                continue  # "SETL never calls the Charges API"
            if m.group().lower().endswith("ing") and NEGATED_GERUND.search(masked_sentence[: m.start()]):
                continue  # "... without encountering an error or using CredSSP"
            if PREVENTED.search(masked_sentence[max(0, m.start() - 60) : m.start()]):
                continue  # "This setting prevents users from using X": no one uses X
            ok = (lambda sp: sp.type != "DATE") if trig.rel == "precedes" else _relevant
            if trig.inverse and trig.rel == "owned_by":
                pair = _relative_owner(doc, block, ts, sent_spans)
                if pair is not None:  # "Anvil, our CI system, which the Infra WG operates"
                    owner, thing = pair
                    if types_ok("owned_by", thing, owner):
                        add(thing, owner, "owned_by", trig.weight, trig.name, block, s, e)
                    taken.append((ts, te))
                    continue
            left = [sp for sp in sent_spans if sp.end <= ts and ok(sp)]
            # "using its algorithm": a possessive stands for the owner of what follows, not the object
            right = [sp for sp in sent_spans if sp.start >= te and ok(sp) and not _possessive(sp)]
            if not right:
                continue
            objects = _objects(doc, te, right, block)
            if not objects or ((subj := _subject_in(doc, block, objects[0])) is not None and subj.head.dep_ == "conj"):
                # "<statement list> runs, and X exits the statement": the name after the trigger is
                # the subject of the next clause, not what the trigger acts on
                continue
            objects = [sp for sp in inner if _relevant(sp)] + objects
            if trig.rel == "located_in":
                objects = [o for o in objects if not _modifies_noun(doc, block, o)]  # "lives in Nomad variables"
                if not objects:
                    continue
            if trig.rel in ("defines", "depends_on"):
                objects = [o for o in objects if not _qualifies_a_new_thing(doc, block, o)]
                if not objects:
                    continue
            if trig.rel in ("uses", "depends_on") and _how_to(doc, block, ts):
                continue  # "It explains how to use X": the reader uses X
            if conditional(doc, block, ts):
                continue  # "If X is specified in Y, ...": a supposition, not a fact
            if trig.rel == "part_of" and _part_acted_on(doc, block, ts):
                continue  # "X should return a member of the Y enum": what is returned is the member, not X
            if _comparison(doc, block, ts):
                continue  # "X is similar to using Y", "as you would use Y": a likeness, not a use
            subject = _dep_subject(doc, block, ts, sent_spans)
            if (
                subject is not None
                and trig.rel in ("uses", "depends_on")
                and doc.text[subject.start - 1 : subject.start] == "$"
            ):
                continue  # "`$DST` uses the X method": a variable of the example, as in _someone_else
            if trig.name == "with its components":  # "owns NHub together with its components": NHub's
                named = [sp for sp in left if sp.source != "coref"]
                subject = named[-1] if named else None
            if (subject is None or subject.start >= ts) and not trig.inverse and left and _apposed(doc, left[-1], ts):
                subject = left[-1]  # "Strongbox, the secrets manager run by X" (the parse may miss the apposition)
            if subject is None or subject.start >= ts:
                if trig.rel in ("uses", "depends_on") and _someone_else(doc, block, ts):
                    continue  # "To list files, use X"; "you can use X"; "authors ... by using X": no name acts
                if _reader_acts(doc, block, ts):
                    continue  # "you must be a member of X": the reader is, not the page's subject
                if trig.rel not in ("cites", "refers_to") and _some_one_acts(doc, block, ts):
                    # "A trace source is the part of each X component ...": some source, not the page's
                    # subject; a page cites what its sentences invoke, whoever acts in them
                    continue
                if _unnamed_it(doc, block, ts, sent_spans):
                    continue  # "It uses X" after an example's code: "it" is the command shown, not the page's subject
                if trig.rel not in ("uses", "depends_on") and _describes_a_noun(doc, block, ts):
                    continue  # "the method implemented by X": the method is, not the page's subject
                borrowed = _borrowed_subject(doc, block, ts, left) if trig.rel == "uses" else None
                if borrowed is False:
                    continue  # "jobs started by using X", "when using X, Y is ...": the name before does not use X
                subject = borrowed or _subject(doc, block, ts, left, s)
                if subject is False:
                    continue
            proximity = 1.0
            if (
                subject is None
                and trig.rel == "part_of"
                and not trig.inverse
                and PLURAL_INTERFACES.match(masked_sentence)
            ):
                # "These endpoints are served by OIS": every endpoint the page documents
                for api in _documented_apis(doc):
                    for obj in objects:
                        add(api, obj, "part_of", trig.weight, trig.name, block, s, e, 0.9)
                taken.append((ts, te))
                continue
            if subject is None and PLURAL_PRONOUN.match(masked_sentence):
                both = _previous_subjects(doc, block, s)
                if len(both) > 1:  # "Basalt and Sluice ... . Both are run by Data Platform."
                    taken.append((ts, te))
                    for subj in both:
                        for obj in objects:
                            src, dst = (obj, subj) if trig.inverse else (subj, obj)
                            if types_ok(trig.rel, src, dst, doc):
                                add(src, dst, trig.rel, trig.weight, trig.name, block, s, e, 0.9)
                continue  # "They ...": never the page's single subject
            if subject is None:
                if trig.rel == "defines":
                    continue  # "How long they are kept is defined in POL-007": what is defined is not named
                if trig.rel == "precedes" and m.group().lower().startswith(("followed", "is followed")):
                    # "Classic logs are retrieved first, followed by the new X logs", "Delete followed
                    # by Insert": a sequence of steps or things the sentence names, not the page's
                    # subject ("Superseded by ADR-019", "This later led to ADR-023" under a decision
                    # record are)
                    continue
                if trig.rel == "uses" and not masked_sentence[: m.start()].strip():
                    continue  # an imperative ("Use Kestrel for ...") states no fact about the page's subject
                if (
                    trig.inverse
                    and trig.rel in ("owned_by", "part_of")
                    and not left
                    and masked_sentence[: m.start()].strip()
                ):
                    continue  # "Production runs X 1.9": who owns X is not said
                if _those_named_before(doc, block, ts):
                    continue  # "These variables are maintained by X": the things just named, not the page's subject
                subject = _topic(doc, block) or doc.subject_at(ts)
                proximity = 0.6
            if subject is None:
                continue
            if trig.rel == "cites" and not _doclike(subject):
                subject = doc.subject_at(ts)  # "X is enforced, following ADR-023": the release or policy cites
                if subject is None or not _doclike(subject):
                    continue
            if trig.rel == "uses" and INJECTED.match(m.group()) and _as_code(doc, subject):
                # "`LEDGER_DB_URL` is injected from Strongbox": a setting uses nothing, the page's
                # subject that reads it does
                subject = doc.subject_at(ts)
                if subject is None or _as_code(doc, subject):
                    continue
            taken.append((ts, te))
            subjects = _coordinated(doc, block, subject, sent_spans) if subject in sent_spans else [subject]
            # "X uses the **A** and **B** parameters": A and B are X's own interface elements
            element = trig.rel == "uses" and not trig.inverse and _interface_element(doc, objects[-1])
            for subj in subjects:
                owner = subj
                if element and is_element(doc, subj):
                    # a parameter is no part of another: under a parameter's own section, what "use the
                    # **A** parameter" names is the page subject's; a parameter that "uses" another
                    # (the **ScriptBlock** parameter runs a command that uses **B**) says not whose B is
                    page = doc.subject
                    if subj in sent_spans or page is None or is_element(doc, page):
                        continue
                    owner = page
                for k, obj in enumerate(objects):
                    # same_as: from the former name; "inverse" when the former is said second
                    src, dst = (obj, subj) if trig.inverse else (subj, obj)
                    if element:
                        add(obj, owner, "part_of", trig.weight, "uses its", block, s, e, proximity * (0.95**k))
                        continue
                    if not types_ok(trig.rel, src, dst, doc):
                        continue
                    if (
                        trig.name == "owns"
                        and m.group(0).lower().startswith("run")
                        and dst.type not in TYPE_OK["owned_by"][1]
                    ):
                        continue  # "the Credential parameter runs the command": a thing that runs another executes it
                    rel = trig.rel
                    if rel == "precedes" and m.group(0).lower().startswith("build") and not _release(src, dst):
                        # a release builds on the one before it; "The BookList class builds on the
                        # Book class" extends it: it needs it, as what is built on something does
                        rel, src, dst = "depends_on", dst, src
                    add(src, dst, rel, trig.weight, trig.name, block, s, e, proximity * (0.95**k))


INJECTED = re.compile(r"(?:is\s+)?(?:configured|injected)\s", re.I)


# the word after a name that makes it an element of a command's or an API's interface, when
# nothing says whose ("the **Path** parameter", not "the Path parameter of Get-Item")
INTERFACE_ELEMENT = re.compile(
    r"^\s*(?:parameters?|flags?|options?|switch(?:es)?|arguments?)\b(?!\s+(?:of|from|in|on|for)\b)", re.I
)


def _as_code(doc: Document, sp) -> bool:
    """Is the name an identifier written as code ("`journal.posted.v1`")?"""
    return bool(sp.features.get("code_font")) or doc.text[sp.start - 1 : sp.start] == "`"


def _interface_element(doc: Document, obj) -> bool:
    """Is the object of "uses" one of the subject's own parameters, flags or options? The
    annotation guideline makes a flag or parameter part of what it belongs to."""
    return bool(INTERFACE_ELEMENT.match(_unmark(doc.text[obj.end : obj.end + 40])))


def is_element(doc: Document, sp) -> bool:
    """Does the document write this name as a parameter, flag or option anywhere ("the **Path**
    parameter"), or head a section with it as a command-line flag ("### -Path", "## --verbose")?"""
    # singular, and no name after it: "the `Get-Item` parameters", "the `Sort-Object` parameter **Bottom**"
    # are a command's own. Read once per name and document: a reference page asks it of every
    # "uses the **X** parameter" sentence
    known = doc.__dict__.setdefault("_elements", {})
    if sp.surface not in known:
        name = re.escape(sp.surface)
        known[sp.surface] = (
            re.search(
                rf"(?<![\w-]){name}[*`_]*\s+(?:parameter|flag|option|switch|argument)\b(?!\s+[*`_])", doc.text, re.I
            )
            is not None
            or re.search(rf"(?m)^#{{1,6}}[ \t]+[*`_]*--?{name}[*`_]*[ \t]*$", doc.text) is not None
        )
    return known[sp.surface]


PLURAL_INTERFACES = re.compile(
    r"\s*(?:these|the|all|its|their|our)\s+(?:\w+\s+)?(?:endpoints|methods|calls|operations|apis|rpcs|routes|commands|subcommands)\b",
    re.I,
)
INTERFACE_LABEL = re.compile(
    r"\s*(?:[-*+]\s+)?(?:\*\*)?(?:gRPC|REST|HTTP|RPCs?|APIs?|endpoints|methods|operations|interfaces?|commands|subcommands)(?:\*\*)?\s*:(?:\*\*)?",
    re.I,
)


def _documented_apis(doc: Document) -> list:
    """The interfaces a reference page documents: the API names its section headings give."""
    seen, out = set(), []
    for sp in doc.section_subjects.values():
        if sp.type == "API" and sp.surface not in seen:
            seen.add(sp.surface)
            out.append(sp)
    return out


def _interfaces(doc: Document, block: Block, bspans: list, add) -> None:
    """ "- gRPC: `PostJournalEntry`, `GetAccountBalance`" on a service's page: its interface."""
    m = INTERFACE_LABEL.match(block.raw)
    subj = doc.subject_at(block.start)
    if m is None or subj is None or subj.type not in ("SERVICE", "COMPONENT", "PRODUCT"):
        return
    s0, e0 = _sentence_of(block, block.start + m.end())
    for sp in bspans:
        if block.start + m.end() <= sp.start < block.start + e0 and sp.type == "API" and sp.source != "coref":
            add(sp, subj, "part_of", 0.8, "interface list", block, block.start + s0, block.start + e0)


def _topic(doc: Document, block: Block):
    """A block that starts with a term is about it: "**Idempotency key**: ...",
    "Kestrel: event bus on ...", "Settlement Engine (SETL). Nightly payouts ..."."""
    spans = getattr(doc, "_spans_cache", {}).get(id(block), [])
    m = re.match(r"\s*(?:[-*+]\s+|\d+[.)]\s+)?\*\*([^*]+)\*\*", block.raw)
    if m:
        pos = block.start + m.start(1)
        return next((sp for sp in spans if sp.start <= pos < sp.end or sp.start == pos), None)
    lead = len(block.masked) - len(block.masked.lstrip())
    first = spans[0] if spans else None
    if first is not None and first.start == block.start + lead and first.source != "coref":
        if re.match(r"\s*(?:\([^()]{1,40}\))?\s*[.:]\s", doc.text[first.end : first.end + 48]):
            return first
    return None


# decision records, requests for comments and enhancement proposals, however a project prefixes
# them (PEP, KEP and JEP are Python's, Kubernetes' and the JDK's enhancement proposals)
DECISION_RECORD = re.compile(r"^(?:[A-Z]{0,3}(?:ADR|RFC)|[A-Z]EP)[- ]?\d+$", re.I)


def _doclike(sp) -> bool:
    """Things that can cite: policies, standards, releases, decision records."""
    return sp.type in ("POLICY", "STANDARD", "VERSION") or bool(DECISION_RECORD.match(sp.surface))


def _citable(sp) -> bool:
    """What a document formally cites: standards, specifications and decision records."""
    return sp.type == "STANDARD" or sp.features.get("pattern") == "standard" or bool(DECISION_RECORD.match(sp.surface))


def _in_code(text: str, pos: int) -> bool:
    """Is ``pos`` inside inline code (an odd number of backticks before it on its line)?"""
    return text.count("`", text.rfind("\n", 0, pos) + 1, pos) % 2 == 1


def _release(*spans) -> bool:
    """Does one of these mentions name a release (a version, or a name with its number)?"""
    return any(sp.type == "VERSION" or any(c.isdigit() for c in sp.surface) for sp in spans)


def types_ok(rel: str, src, dst, doc: Document | None = None) -> bool:
    """Can a relation of this type join mentions of these types? (a place to be located in, an owner, ...)
    None joins a date: each relation type relates things (a place, an owner, a whole, a release)."""
    if DATE in (src.type, dst.type):
        return False
    if rel == "cites":  # one cites standards and documents, not commands ("includes the following aliases")
        return dst.type in ("STANDARD", "POLICY") or dst.features.get("pattern") in ("ticket", "standard")
    if rel == "owned_by":  # an owner is no date, standard or region, nor a name written as code
        return (
            dst.type not in ("DATE", "VERSION", "STANDARD")
            and dst.features.get("pattern") != "region"
            and not dst.features.get("code_font")
        )
    if rel == "located_in":  # a nationality names its country too ("a Canadian province")
        if re.search(r"\d\.\d", dst.surface):
            return False  # "Windows 3.1", "Spooler 2.0": a release, whatever the tagger calls it
        if dst.features.get("pattern") != "region" and _as_term(dst):
            return False  # a name the corpus writes as a term (**Windows PowerShell**, `Windows`) is a thing
        return (
            dst.type == "LOCATION"
            or dst.features.get("ner_label") in ("GPE", "LOC", "FAC", "NORP")
            or bool(re.search(r"\b[a-z]{2}-[a-z]+-\d\b", dst.surface))
        )
    if rel == "part_of" and src.type == "PERSON":
        return dst.type not in ("PERSON", "DATE", "VERSION")
    if rel == "defines":  # a document defines terms, settings and codes; not who acts, nor where
        # a name the corpus sets off as a term is one, whatever NER calls it ("defines the **Size** property")
        return dst.type not in NOT_DEFINED or _as_term(dst, doc)
    return True


# what no policy, release or term defines: a person, a team, a place (not ORG: the extractor's guess
# for a name it knows nothing of, "Tiered compaction")
NOT_DEFINED = frozenset(("PERSON", "TEAM", "LOCATION"))


def _as_term(sp, doc: Document | None = None) -> bool:
    """Is the name written as a term of the corpus: in code font, found from bold or code, or (with
    the document at hand) set off in bold or code here ("the **Size** property")?"""
    if sp.features.get("gaz_source") in ("bold", "code", "codename"):
        return True
    if doc is None:
        return bool(sp.features.get("code_font"))
    return _as_code(doc, sp) or doc.text[max(0, sp.start - 2) : sp.start] in ("**", "__")


def _objects(doc: Document, after: int, right: list, block: Block) -> list:
    first = right[0]
    gap = doc.text[after : first.start]
    if not OBJECT_GAP.match(_unmark(gap)):
        return []
    return [_versioned(doc, o, block) for o in _listed(doc, right)]


def _listed(doc: Document, spans: list) -> list:
    """The first span and those that follow it as a list ("A, B and C")."""
    out = spans[:1]
    for nxt in spans[1:]:
        if not LIST_GAP.match(_unmark(doc.text[out[-1].end : nxt.start])):
            break
        out.append(nxt)
    return out


def _versioned(doc: Document, sp, block: Block):
    """ "uses kestrel-client 1.4.0": the object is that version of the thing."""
    spans = getattr(doc, "_spans_cache", {}).get(id(block), [])
    for nxt in spans:
        if nxt.start >= sp.end:
            if nxt.type == "VERSION" and doc.text[sp.end : nxt.start] in (" ", " v"):
                return nxt
            break
    return sp


PLURAL_PRONOUN = re.compile(r"\s*(?:both(?:\s+of\s+them)?|they|the\s+two|all\s+three)\b(?!-)", re.I)


def _previous_subjects(doc: Document, block: Block, sentence_start: int) -> list:
    """The coordinated names that open the sentence before ``sentence_start`` in the block."""
    starts = [block.start + s0 for s0, _ in block.sentences()]
    prev = [st for st in starts if st < sentence_start]
    if not prev:
        return []
    spans = [
        sp
        for sp in getattr(doc, "_spans_cache", {}).get(id(block), [])
        if prev[-1] <= sp.start < sentence_start and _relevant(sp)
    ]
    if not spans:
        return []
    out = _listed(doc, spans)
    if len(out) == 1:  # "A is the warehouse, and B is the pipeline that fills it": the clauses' subjects
        out = [sp for sp in spans if sp.source != "coref" and _subject_in(doc, block, sp) is not None]
    return out


def _coordinated(doc: Document, block: Block, subject, sent_spans: list) -> list:
    """ "The Ledger Service and OIS both use it": every subject of a coordinated list. A name
    before a comma that a preposition governs opens the sentence ("In Windows, PowerShell
    remoting uses X"): it is where, not one more subject."""
    out = [subject]
    if subject.source == "coref" and " " not in subject.surface:
        return out  # "In the absence of X, it uses Y": a pronoun is not the last of a list
    earlier = [sp for sp in sent_spans if sp.end <= subject.start]
    while earlier:
        prev = earlier.pop()
        if (
            LIST_GAP.match(_unmark(doc.text[prev.end : out[-1].start]))
            and _relevant(prev)
            and not _preposition_object(doc, block, prev)
        ):
            out.append(prev)
        else:
            break
    return out


def _parse_of(doc: Document, block: Block):
    """spaCy's parse of a block (kept by the extractor), or None."""
    sdocs = getattr(doc, "nlp_docs", None)
    if not sdocs:
        return None
    # by identity, from a map made once: list.index compares blocks field by field, for each
    # call, and a long text has tens of thousands of blocks
    where = doc.__dict__.get("_block_at")
    if where is None:
        where = doc.__dict__["_block_at"] = {id(b): i for i, b in enumerate(doc.blocks)}
    i = where.get(id(block))
    return sdocs[i] if i is not None and i < len(sdocs) else None


def _token_at(doc: Document, block: Block, pos: int):
    """The token of the block's parse at document offset ``pos``, or None (no parse)."""
    sdoc = _parse_of(doc, block)
    return token_covering(sdoc, pos - block.start) if sdoc is not None else None


def _dep_subject(doc: Document, block: Block, trigger_start: int, sent_spans: list):
    """The grammatical subject of the trigger's verb, from spaCy's parse, as one of our spans."""
    sdoc = _parse_of(doc, block)
    if sdoc is None:
        return None
    rel = trigger_start - block.start
    tok = trigger = token_covering(sdoc, rel)
    if _object_acts(trigger) is not None:
        return None  # "X allows users to use Y": the users use Y, not X
    for step in range(5):
        if tok is None:
            return None
        if step and _stray_conj(tok):
            return None  # "... to the location most recently pushed onto the stack by using Y": unsaid
        if tok.dep_ == "acl" and tok.tag_ in ("VBN", "VBG"):
            # "X cannot delete events created by using Y", "use the method implemented by Y": the
            # trigger is in (or is) a clause that describes a noun; that noun acts, when it is a
            # name, not the sentence's subject;
            # a name that only qualifies it ("a PowerShell session, such as one started by using
            # Y") does not
            hit = _span_at(block, tok.head, sent_spans)
            if hit is None or not _covers(block, hit, tok.head):
                # a passive participle ("run by Y") on a noun that describes a name: that name
                return _described_name(doc, block, tok.head, sent_spans) if tok.tag_ == "VBN" else None
            if tok.tag_ == "VBG" and _readers_object(tok.head):
                return None  # "When you disconnect a PSSession using X": the reader uses X
            return hit
        subj = next((c for c in tok.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if subj is not None and _finite_verb(subj):
            return None  # a misparse: what acts is not known
        if subj is not None:
            passive = _passive(tok, subj)
            described = subj.tag_ in ("WDT", "WP") and tok.dep_ == "relcl"
            if described:
                subj = tok.head
                named = _copula_subject(block, subj, sent_spans)
                if named is not None:
                    return named
            hit = _span_at(block, subj, sent_spans)
            if (
                described
                and hit is not None
                and subj.pos_ == "NOUN"
                and not _covers(block, hit, subj)
                and not hit.features.get("code_font")
            ):
                # "Spool sessions that use X": the sessions the clause describes use X; the name only
                # qualifies them. A name written as code names the thing ("a `Get-Item` command that
                # uses X", "the `mkdir` function that calls X")
                return None
            if step and passive and _gerund(trigger):
                # "X and Y commands are submitted ... by using Z", "PSSessions that were disconnected
                # using Z": the means of a passive verb is its unnamed agent's; what is acted on (X)
                # does not use Z
                return None
            if (
                hit is not None
                and subj.pos_ == "NOUN"
                and (
                    subj.dep_ == "nsubjpass"
                    or subj.tag_ == "NNS"
                    or (_indefinite(subj) and not hit.features.get("code_font"))
                )
            ):
                # "PowerShell logs can be viewed using X": what is acted on is the logs, and the
                # name only qualifies them; whoever views them is not said. "The CIM commands can
                # use X": several things the name only qualifies act, not the name; "an IIS
                # application ... can require X": one of a kind the name qualifies (a name written
                # as code names the thing: "a recursive `Get-ChildItem` command that uses X")
                if not _covers(block, hit, subj):
                    return None
            return hit
        if tok.dep_ == "relcl":
            head = tok.head
            hit = _span_at(block, head, sent_spans)
            if hit is None and head.dep_ == "appos":
                hit = _span_at(block, head.head, sent_spans)
            return hit
        if tok.dep_ in ("ROOT",):
            return None
        tok = tok.head
    return None


# what may come before a line's first word: a list marker, markup
ITEM_MARK = re.compile(r"\s*(?:[-*+]\s+|\d+[.)]\s+)?[*_`]*")


def _described_name(doc: Document, block: Block, noun, spans: list):
    """The name a common noun's phrase describes, or None: the name it stands in apposition to
    ("Kestrel: event bus on Apache Kafka, run by Y"; "Identity Broker: sign-on for people and
    tokens for services, run by Y", where the parse hangs the participle on a noun inside the
    description, or the description its root and the name a word before it), or the name it is
    called ("an event bus, named Kestrel, operated by Y")."""
    for child in noun.children:
        if child.dep_ == "acl" and child.lower_ in ("named", "called"):
            called = next((c for c in child.children if c.dep_ in ("oprd", "attr", "dobj")), None)
            hit = _span_at(block, called, spans) if called is not None else None
            if hit is not None and _covers(block, hit, called):
                return hit
    tok = noun
    for _ in range(6):
        if tok.dep_ == "appos":
            hit = _span_at(block, tok.head, spans)
            return hit if hit is not None and _covers(block, hit, tok.head) else None
        if tok.dep_ == "ROOT" and tok.pos_ not in ("VERB", "AUX"):
            # "Term: description": the parse may make the description the root, the term a "dep"
            start = block.start + tok.sent.start_char
            term = next((sp for sp in spans if sp.start >= start), None)
            lead = term is not None and ITEM_MARK.fullmatch(doc.text[start : term.start]) is not None
            colon = lead and _unmark(doc.text[term.end : term.end + 4]).lstrip().startswith(":")
            return term if colon and block.start + tok.idx > term.end else None
        if tok.dep_ not in ("pobj", "prep", "conj"):
            return None
        tok = tok.head
    return None


# ", the secrets manager " between a name and a passive trigger: a noun phrase in apposition to the name
APPOSED = re.compile(r"\s*,\s+(?:the|an?|our|its|their)\s+(?:[a-z][\w-]*\s+){0,3}", re.I)
# a relative clause or a verb of its own in that gap: "Vaultine, the store that is owned by X"
RELATIVE_WORDS = re.compile(r"\b(?:that|which|who|whose|is|are|was|were|has|have)\b", re.I)
PASSIVE_TRIGGER = re.compile(r"(?:[a-z]+ed|run|built|written|held|kept)\s+by\b", re.I)


def _apposed(doc: Document, name, trigger_start: int) -> bool:
    """Is a passive trigger ("run by", "owned by") the participle of a noun phrase in apposition to
    the name right before it ("Strongbox, the secrets manager run by Security Engineering")?"""
    gap = _unmark(doc.text[name.end : trigger_start])
    if APPOSED.fullmatch(gap) is None or RELATIVE_WORDS.search(gap):
        return False
    return PASSIVE_TRIGGER.match(doc.text, trigger_start) is not None


def _relative_owner(doc: Document, block: Block, trigger_start: int, spans: list):
    """(owner, thing) when the trigger verb is a relative clause whose object is the relative
    pronoun: "Anvil, our CI system, which the Infra WG operates" (the clause describes a noun in
    apposition to the name), "Strata is the engine that the Storage WG maintains" (a noun the
    copula says the name is); None otherwise, and when either is not one of our names."""
    tok = _token_at(doc, block, trigger_start)
    if tok is None or tok.dep_ != "relcl":
        return None
    if not any(c.dep_ == "dobj" and c.lower_ in ("which", "that", "whom") for c in tok.children):
        return None
    agent = next((c for c in tok.children if c.dep_ == "nsubj"), None)
    owner = _span_at(block, agent, spans) if agent is not None else None
    if owner is None or not _covers(block, owner, agent):
        return None
    head = tok.head
    thing = _span_at(block, head, spans)
    if thing is None or not _covers(block, thing, head):
        subject = next((c for c in head.head.children if c.dep_ == "nsubj"), None) if head.dep_ == "attr" else None
        if subject is not None:
            thing = _span_at(block, subject, spans)
            thing = thing if thing is not None and _covers(block, thing, subject) else None
        else:
            thing = _described_name(doc, block, head, spans)
    return (owner, thing) if thing is not None and thing is not owner else None


def _covers(block: Block, sp, tok) -> bool:
    """Is the token inside the span (the name is the noun itself, not a word qualifying it)?"""
    return sp.start <= block.start + tok.idx < sp.end


def _object_acts(tok):
    """The object that does what an infinitive says ("allows users to use X", "requires the
    caller to use X"): the governing verb's direct object before it, or None."""
    if tok is None or tok.dep_ != "xcomp" or tok.tag_ != "VB":
        return None
    return next((c for c in tok.head.children if c.dep_ == "dobj" and c.i < tok.i), None)


def _negated(doc: Document, block: Block, trigger_start: int) -> bool:
    """Does the parse negate the trigger, or the verb it completes, however many words stand between
    ("PowerShell does not change behavior based on X", "X does not need to use Y")? A clause that
    only modifies a negated verb ("cannot start unless it uses Y") is not negated."""
    tok = _token_at(doc, block, trigger_start)
    if tok is None:
        return False
    if any(c.dep_ == "neg" for c in tok.children):
        return True
    head = tok.head
    return (
        tok.dep_ in ("prep", "xcomp") and head.pos_ in ("VERB", "AUX") and any(c.dep_ == "neg" for c in head.children)
    )


def _substitutes(doc: Document, block: Block, trigger_start: int) -> bool:
    """Is the trigger a "replaces X with Y" ("Sluice replaces every PII field with a keyed hash")?
    Its subject puts Y in X's place: it is no successor of X."""
    tok = _token_at(doc, block, trigger_start)
    return tok is not None and any(c.dep_ == "prep" and c.lower_ == "with" for c in tok.children)


def _gerund(tok) -> bool:
    """Is the trigger a gerund of means ("using X", "by using X": the trigger may start at "by")?"""
    return tok.tag_ == "VBG" or any(c.dep_ == "pcomp" and c.tag_ == "VBG" for c in tok.children)


def _who_acts(doc: Document, block: Block, trigger_start: int, described=("relcl",)):
    """What says who acts in the trigger's clause, walking up from the trigger: ("relcl", the
    noun a clause of the ``described`` kinds describes), ("subject", the clause's subject), ("root", the
    sentence's verb with no subject), or None."""
    tok = _token_at(doc, block, trigger_start)
    for _ in range(5):
        if tok is None:
            return None
        if tok.dep_ in described:
            return ("relcl", tok.head)
        if "relcl" in described and (noun := _such_as(tok)) is not None:
            return ("relcl", noun)
        if "relcl" in described and (topic := _topic_of(tok)) is not None:
            return ("relcl", topic)
        subj = next((c for c in tok.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if subj is not None:
            return ("subject", subj)
        if tok.dep_ == "ROOT":
            return ("root", tok)
        tok = tok.head
    return None


def _such_as(tok):
    """The noun an example phrase hangs on ("sessions that are disconnected, such as by using
    X"), when ``tok`` is its "as"; else None. The example says how that thing came to be, not
    what the sentence's subject does."""
    if tok.dep_ != "prep" or tok.lower_ != "as" or not any(c.lower_ == "such" for c in tok.children):
        return None
    if tok.head.pos_ == "NOUN":
        return tok.head
    # the parser may hang it on the sentence's verb past a clause between them ("Runs scripts ...,
    # if the scripts are unblocked, such as by using X"): the example says how that clause's
    # subject came to be so
    between = (c for c in tok.head.children if c.dep_ == "advcl" and tok.head.i < c.i < tok.i)
    clause = max(between, key=lambda c: c.i, default=None)
    if clause is None:
        return None
    return next((c for c in clause.children if c.dep_ in ("nsubj", "nsubjpass") and c.pos_ == "NOUN"), None)


def _possessive(sp) -> bool:
    """A pronoun that only qualifies the noun after it ("its", "his", "their")."""
    return sp.source == "coref" and sp.surface.lower() in ("its", "his", "their")


def _unnamed_it(doc: Document, block: Block, trigger_start: int, sent_spans: list) -> bool:
    """Is the trigger's subject an "it" that coreference left for no name? It then stands for
    something no name covers (the command of the example just shown, "This command ..." of the
    sentence before: :func:`kgr.stages.extract._continues_description`), so the page's subject
    is not the one that acts."""
    found = _who_acts(doc, block, trigger_start, described=())
    if found is None or found[0] != "subject" or found[1].lower_ != "it":
        return False
    at = block.start + found[1].idx
    return not any(sp.start <= at < sp.end for sp in sent_spans)


def _topic_of(tok):
    """The common noun a gerund is the topic of ("information about using X", "the cost of
    running X"), or None. Not a noun that describes the sentence's subject ("X is a framework
    for using Y")."""
    if tok.dep_ != "pcomp" or tok.tag_ != "VBG" or tok.head.dep_ != "prep":
        return None
    noun = tok.head.head
    return noun if noun.pos_ == "NOUN" and noun.dep_ not in ("ROOT", "attr", "appos") else None


def _part_acted_on(doc: Document, block: Block, trigger_start: int) -> bool:
    """Is the trigger's "part", "member" or "component" what a verb acts on ("should return a member
    of the X enum", "adds a component of Y")? The part is then the thing returned or added, not
    the clause's subject; "X is a member of Y", "X, a part of Y" and "X forms part of Y" say it of X."""
    tok = _token_at(doc, block, trigger_start)
    for _ in range(3):  # from "a" or an auxiliary to the noun
        if tok is None or tok.pos_ == "NOUN":
            break
        tok = tok.head if tok.dep_ in ("det", "aux", "auxpass") else None
    return (
        tok is not None
        and tok.pos_ == "NOUN"
        and tok.dep_ == "dobj"
        and lemma(tok.head).lower() not in ("form", "make", "become", "constitute", "remain")
    )


def _describes_a_noun(doc: Document, block: Block, trigger_start: int) -> bool:
    """Is the trigger's clause one that describes a common noun other than the page's subject
    ("use the authentication method implemented by X")? Not a noun that itself describes the
    subject ("**Term**: The strategy of X, specified in Y"; "X is the service owned by Y").
    So is a trigger that is a preposition of such a noun ("the code inside the X loop")."""
    tok = _token_at(doc, block, trigger_start)
    if tok is not None and tok.dep_ == "prep" and _described(doc, block, tok.head):
        return True
    found = _who_acts(doc, block, trigger_start, ("relcl", "acl"))
    return found is not None and found[0] == "relcl" and _described(doc, block, found[1])


def _described(doc: Document, block: Block, noun) -> bool:
    """Is ``noun`` a common noun other than the page's subject, which a clause or a phrase describes?
    Not one that says what something is ("X is the service owned by Y"), nor one a sentence opens
    with after a term ("**Term**: The strategy of X"); one a fragment opens with is ("Drives exposed
    by X providers", "The code inside the X loop ..." that the parser leaves without a verb)."""
    if noun.pos_ != "NOUN" or noun.dep_ in ("attr", "appos"):
        return False
    if noun.dep_ == "ROOT" and any(
        t.pos_ not in ("DET", "PUNCT", "SPACE", "ADJ") for t in noun.sent[: noun.i - noun.sent.start]
    ):
        return False
    return _other_than_subject(doc, block, noun)


def _some_one_acts(doc: Document, block: Block, trigger_start: int) -> bool:
    """Is the trigger's clause about one of a kind the sentence introduces ("A trace source is the part
    of ...", "Each job uses ...")? Not the page's subject, whatever the relation. (Asking the same of
    any noun other than the subject's, as :func:`_someone_else` does for "uses", costs both golden
    corpora true relations: "alerts", "the team" often stand for the subject's own.)"""
    found = _who_acts(doc, block, trigger_start)
    if found is None or found[0] != "subject":
        return False
    noun = found[1]
    return noun.pos_ == "NOUN" and _indefinite(noun)


def _those_named_before(doc: Document, block: Block, trigger_start: int) -> bool:
    """Is the trigger's clause about several things a demonstrative points back to ("These
    variables are created and maintained by X", "Those files use Y")? They are what the text
    before named, never the page's one subject."""
    found = _who_acts(doc, block, trigger_start)
    if found is None or found[0] != "subject":
        return False
    noun = found[1]
    return noun.tag_ == "NNS" and any(c.dep_ == "det" and c.lower_ in ("these", "those") for c in noun.children)


def _reader_acts(doc: Document, block: Block, trigger_start: int) -> bool:
    """Is the trigger's clause about the reader ("you must be a member of X", "the user does
    not need to be a member of X")?"""
    found = _who_acts(doc, block, trigger_start)
    return found is not None and found[0] == "subject" and found[1].lower_ in ("you", "user", "users")


def _someone_else(doc: Document, block: Block, trigger_start: int) -> bool:
    """Does the trigger's clause say who acts, and it is not the page's subject? An imperative
    ("To get only files, use X"), the reader ("you can use X"), a subject named by a bare common
    noun ("Module authors can ... by using X") or by a description of something else ("This
    command uses X" on a command's page), the writers ("we"): the page's subject is not the one that uses X. A
    pronoun or a description that may stand for the subject ("it", "the service") is not."""
    doer = _object_acts(_token_at(doc, block, trigger_start))
    if doer is not None:
        # "Allows users to use X": the object acts; the reader, or a noun other than the page's subject
        return doer.lower_ == "you" or (doer.pos_ == "NOUN" and _other_than_subject(doc, block, doer))
    trigger = _token_at(doc, block, trigger_start)
    if trigger is not None and trigger.dep_ in ("csubj", "csubjpass"):
        # "Using X to run the command started three jobs": the using is what the sentence is
        # about; no one named does it
        return True
    found = _who_acts(doc, block, trigger_start)
    if found is not None and found[0] == "relcl":
        # "sessions that use the configuration": the noun the clause describes uses it
        return found[1].pos_ == "NOUN" and _other_than_subject(doc, block, found[1])
    # "a cmdlet run using a session runs ...": a participle on the sentence's subject (or on its
    # head noun) describes that noun; on an object it may say how ("Detect requests using the vault")
    participle = _who_acts(doc, block, trigger_start, described=("acl",))
    if participle is not None and participle[0] == "relcl":
        noun = participle[1]
        # so does a present participle on things a preposition governs ("the directory for sessions
        # using X"); on one thing there it may say how ("prints the results to the console using
        # X", "in a friendly way using X"), and a past one may be the parse's hanging of a
        # description of the subject ("Settlement Engine. Nightly payouts to distributors, built
        # on top of X")
        on_pobj = noun.dep_ == "pobj" and noun.tag_ == "NNS" and _token_at(doc, block, trigger_start).tag_ == "VBG"
        if (
            (noun.dep_ in ("nsubj", "nsubjpass", "ROOT") or on_pobj)
            and noun.pos_ == "NOUN"
            and _other_than_subject(doc, block, noun)
        ):
            return True
    if found is None:  # the walk up gave out: nothing says who acts
        return False
    kind, tok = found
    if kind == "subject" and block.sentence_index(tok.idx) != block.sentence_index(trigger_start - block.start):
        # "... so he can investigate.The second command uses X": the parse ran two sentences into
        # one, and what it calls the subject is another sentence's; no name of this one acts
        return True
    trigger = token_covering(tok.doc, trigger_start - block.start)
    if kind == "subject":
        if _variable(tok):
            return True  # "`$Time` uses the X method": a variable of the example, which names no entity
        if tok.lower_ in ("this", "that") and tok.tag_ == "DT":
            # "This is a fictitious domain used by X": what the sentence before wrote, not the page's
            # subject; in a block that opens with a term ("**ARM benchmarks**: ... This depends on
            # X"), that term
            return _topic(doc, block) is None
        if tok.pos_ == "PRON":
            if tok.lower_ == "it" and _infinitive(trigger) and _expletive_it(tok):
                return True  # "it is best to use X", "it is more important to use X": the reader
            if tok.lower_ == "they":
                # "PowerShell modules can declare what they are compatible with using X": "they"
                # are the sentence's subject, a kind of thing the name only qualifies
                main = next((c for c in tok.sent.root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
                if main is not None and main.i < tok.i and main.pos_ == "NOUN":
                    return _other_than_subject(doc, block, main)
                # "When users create a session ..., they can use X": the plural noun of the clause
                # that opens the sentence
                lead = next((c for c in tok.sent if c.i < tok.i and c.dep_ == "nsubj" and c.tag_ == "NNS"), None)
                if lead is not None:
                    return _other_than_subject(doc, block, lead)
            # the reader; and "we", who in a page's prose is its writers going through an example ("First
            # we use X to get ...", "Then we use X to save it"), not the page's subject
            return tok.lower_ in ("you", "we")
        return tok.pos_ == "NOUN" and _other_than_subject(doc, block, tok)
    if _infinitive(tok):
        # "To enable X to stop the job, import the module ... by using Y": a purpose the parser
        # took for the sentence's verb; the instruction that follows is the reader's
        return True
    # the trigger is the sentence's verb, with no subject: an instruction ("..., use X", "omit
    # X or use Y"), an instruction's purpose ("To use X, run ..."), a heading that instructs
    # ("Convert X by using Y"); "Detect retries using keys", a duty listed for the subject,
    # keeps its subject
    lead = trigger
    while lead.dep_ == "conj" and lead.head.i != lead.i:
        lead = lead.head
    # "When using X, omit Y", "Before using X, run Y": a clause that adverbially modifies an
    # instruction in running text is the reader's too (in a list under a heading, "Detect
    # retries using keys" is a duty)
    up = lead.head if lead.dep_ == "pcomp" and lead.head.dep_ == "prep" else lead
    # the parser may hang it on the instruction's object ("Start a session on S1 using X")
    if up.dep_ == "acl" and up.head.dep_ == "dobj" and up.head.head.i == tok.i:
        up = up.head
    # so is one in a list item whose verb follows a purpose ("- To save X, start Y by using Z")
    purpose = any(c.dep_ == "advcl" and c.i < tok.i and _infinitive(c) for c in tok.children)
    # and, anywhere, a clause a subordinating word opens ("When using X, redirect Y" in a list item)
    subordinate = up.dep_ == "advcl" and any(
        c.dep_ in ("mark", "advmod") and c.tag_ in ("IN", "WRB") and c.i < up.i for c in up.children
    )
    # the verb it hangs on may be one joined to the sentence's verb ("export X ... and then
    # import the file by using Y")
    verb = up.head
    while verb.dep_ == "conj" and verb.head.i != verb.i and verb.i != tok.i:
        verb = verb.head
    # "..., connect using X", "avoid using X": the gerund completing an instruction in running
    # text says how the reader is to do it (in a list, "Detect retries using keys" is a duty)
    adverbial = (
        up.dep_ in ("advcl", "prep", "dobj", "xcomp")
        and verb.i == tok.i
        and (block.kind in ("para", "quote") or purpose or subordinate)
    )
    # a verb in its base form with no subject, no modal and no "to" of its own is an imperative
    # wherever the parser hangs it ("To get a key, use a `Get-Item` command in the `Cert:` drive":
    # "drive" taken for the sentence's verb)
    bare = trigger.tag_ == "VB" and not any(
        c.dep_ in ("aux", "auxpass", "nsubj", "nsubjpass") for c in trigger.children
    )
    # a clause a subordinating word opens, or a purpose, on a main clause with no subject at all
    # is an instruction however the parser tags its verb ("When using X as the style, navigate to
    # the next item": "navigate" taken for an adjective; "To cancel a subscription, delete the
    # subscriber by using X": "delete" taken for a past tense)
    unsaid = (
        (subordinate or purpose)
        and verb.i == tok.i
        and tok.dep_ == "ROOT"
        and tok.pos_ != "AUX"
        and not any(c.dep_ in ("nsubj", "nsubjpass", "csubj", "expl") for c in tok.children)
    )
    return (
        bare
        or unsaid
        or (
            tok.tag_ in ("VB", "VBP")
            and (lead.i == tok.i or _infinitive(trigger) or block.kind == "heading" or adverbial)
        )
    )


def _variable(tok) -> bool:
    """Is the noun, or a word before it in its phrase, a variable of code ("`$Time`", "The
    `$Data` variable")?"""
    # the parser may hang the "$" on the verb rather than on the name it is written against
    return any(
        t.text == "$" and t.i + 1 < len(t.doc) and t.doc[t.i + 1].idx == t.idx + 1
        for t in tok.doc[min(tok.left_edge.i, max(0, tok.i - 1)) : tok.i]
    )


def _expletive_it(it) -> bool:
    """ "it is best / more important / easier to ...": "it" stands for nothing. Read from the
    parse (any adjective); coreference's `_expletive` reads the text against a list of
    adjectives, which misses "it is more important to use X" (two PowerShell relations)."""
    verb = it.head
    return lemma(verb) == "be" and any(c.dep_ == "acomp" for c in verb.children)


def _infinitive(tok) -> bool:
    return any(c.dep_ == "aux" and c.lower_ == "to" for c in tok.children)


def _use_as_noun(doc: Document, block: Block, trigger_start: int) -> bool:
    """Is the trigger "use" the noun of "in use", "the use of X", "for use with X"?"""
    tok = _token_at(doc, block, trigger_start)
    if tok is None or tok.pos_ != "NOUN" or lemma(tok).lower() != "use":
        return False
    return tok.dep_ == "pobj" or any(c.dep_ in ("det", "poss") for c in tok.children)


def _modifier(doc: Document, block: Block, trigger_start: int) -> bool:
    """Is the trigger word an adjective of the noun after it ("the following paths")?"""
    tok = _token_at(doc, block, trigger_start)
    return tok is not None and tok.dep_ == "amod" and tok.head.i > tok.i


def _how_to(doc: Document, block: Block, trigger_start: int) -> bool:
    """Is the trigger the verb of "how to ..." ("Explains how to use X")? Then it is the reader's."""
    tok = _token_at(doc, block, trigger_start)
    return tok is not None and {"how", "to"} <= {c.lower_ for c in tok.children if c.dep_ in ("advmod", "aux")}


def conditional(doc: Document, block: Block, trigger_start: int) -> bool:
    """Is the trigger's clause a condition ("If X is specified in Y, ...", "unless X uses Y")?"""
    tok = _token_at(doc, block, trigger_start)
    for _ in range(6):
        if tok is None or tok.dep_ == "ROOT" or tok.head is tok:
            return False
        if tok.dep_ == "advcl":
            return any(c.dep_ == "mark" and c.lower_ in ("if", "unless") for c in tok.children)
        tok = tok.head
    return False


_LIKENESS = frozenset({"similar", "equivalent", "identical", "comparable", "analogous"})


def _comparison(doc: Document, block: Block, trigger_start: int) -> bool:
    """Is the trigger's clause what something is compared with ("X is similar to using Y",
    "works like calling Y", "has the same effect as using Y", "as you would use Y", "as if it
    used Y")? It says nothing of X."""
    tok = _token_at(doc, block, trigger_start)
    for _ in range(4):
        if tok is None:
            return False
        head = tok.head
        if tok.dep_ in ("pcomp", "pobj") and head.dep_ == "prep":
            word = head.lower_
            return (
                word in ("like", "unlike", "than")
                or (word in ("to", "with") and lemma(head.head).lower() in _LIKENESS)
                # "has the same effect as using Y", "is the same as calling Y"
                or (word == "as" and "same" in {head.head.lower_, *(c.lower_ for c in head.head.children)})
            )
        # a clause marked "as if" or "as ... would", whether parsed as a clause of the sentence's
        # verb or (a line break inside "Use\nthem as you would use X") as that verb itself
        marks = {c.lower_ for c in tok.children if c.dep_ == "mark"}
        would = any(c.dep_ == "aux" and c.lower_ in ("would", "might") for c in tok.children)
        if "as" in marks and (bool(marks & {"if", "though"}) or would):
            return True
        if tok.dep_ in ("advcl", "ROOT") or head is tok:
            return False
        tok = head
    return False


INDEFINITE = frozenset({"a", "an", "any", "another", "each", "every", "some"})


def _indefinite(noun) -> bool:
    """Does the noun introduce one of a kind ("a client", "each job")?"""
    return any(c.dep_ == "det" and c.lower_ in INDEFINITE for c in noun.children)


def _other_than_subject(doc: Document, block: Block, noun) -> bool:
    """Does a common noun that acts name something other than the page's subject? A bare one
    does ("Module authors", "users", "sessions"); "the service" may be the subject itself (a
    word naming a kind of system, or one of its name's words); "this command", "the following
    example" is the page's example, something else; so are "the services", several things."""
    if not any(c.dep_ in ("det", "poss") for c in noun.children) or noun.tag_ == "NNS":
        return True
    if noun.dep_ not in ("attr", "appos", "ROOT") and _indefinite(noun):
        return True  # "allows a client that uses X": one of a kind, not the page's subject ("X is a service that ...")
    kind = lemma(noun).lower()
    page = doc.subject_at(block.start) or doc.subject
    return kind not in _kind_nouns() and not (page is not None and kind in page.surface.lower().split())


@functools.cache
def _kind_nouns() -> frozenset[str]:
    from kgr.stages.extract import HEAD_TYPES

    return frozenset(w for words in HEAD_TYPES.values() for w in words if " " not in w)


def _borrowed_subject(doc: Document, block: Block, trigger_start: int, left: list):
    """A trigger in a clause with no subject of its own ("using" in "jobs started by using X",
    "when using X, Y is inferred", "loads data using X") acts for the subject of the clause it
    modifies: that subject's span when it is a name before the trigger, False when that subject
    is something else (a name after it, a common noun, "you") or what a passive verb acts on
    ("X commands are submitted by using Y"), None when the parse names none or only "it", "they"
    or "we" (the caller's usual guess then)."""
    sdoc = _parse_of(doc, block)
    if sdoc is None:
        return None
    tok = token_covering(sdoc, trigger_start - block.start)
    if tok is None or tok.tag_ not in ("VBG", "VB") or tok.dep_ not in ("pcomp", "advcl", "acl", "xcomp"):
        return None
    for step in range(8):
        if tok.dep_ in ("csubj", "csubjpass"):
            return False  # "Using X with Y throws an error": the use is what the sentence is about; no one acts
        if step and _stray_conj(tok):
            return False  # "the location most recently pushed onto the stack by using X": pushed by whoever
        if step and tok.dep_ in ("acl", "relcl"):
            # "jobs created by using X", "modules that were created using X": what the clause
            # describes was made with X; the name it is, if any, uses X
            return _span_at(block, tok.head, left) or False
        if tok.dep_ == "ROOT" or tok.head is tok:
            break
        tok = tok.head
        subj = next((c for c in tok.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if subj is None:
            continue
        if subj.pos_ == "PRON" and subj.lower_ in ("it", "they", "we"):
            return None  # may stand for the name before it: the caller resolves it
        if _finite_verb(subj):
            return False  # a misparse: what acts is not known
        if _passive(tok, subj):
            return False  # "X commands are submitted by using Y": X is acted on; the agent is not said
        hit = _span_at(block, subj, left)
        return hit if hit is not None else False
    return None


def _finite_verb(subj) -> bool:
    """Is the subject the parser found a verb with a tense ("The X cmdlet changes the current
    location to the location most recently pushed onto the stack by using Y", "changes" taken
    for the subject of "pushed")? A subject is a noun or a pronoun; a clause that is one is a
    ``csubj``. Then the parse says nothing sure of who acts."""
    return subj.tag_ in ("VBZ", "VBD", "VBP")


def _stray_conj(tok) -> bool:
    """Is ``tok`` a past form the parser joined to a verb before it with nothing that joins them
    (no "and", no comma)? "The X cmdlet changes the current location to the location most
    recently pushed onto the stack by using Y": "pushed" describes the noun before it, and the
    sentence's subject does not do it."""
    if tok.dep_ != "conj" or tok.tag_ not in ("VBD", "VBN"):
        return False
    head = tok.head
    return not any(c.dep_ in ("cc", "punct", "preconj") and head.i < c.i < tok.i for c in head.children)


def _passive(verb, subj) -> bool:
    """Is ``subj`` what ``verb`` acts on? A passive subject; or the subject spaCy gives a past
    participle with no "have" over it ("interactive PSSessions started by using X": the sessions
    are started, by whoever uses X)."""
    if subj.dep_ == "nsubjpass":
        return True
    return verb.tag_ == "VBN" and not any(c.dep_ == "aux" and c.lower_ in ("have", "has", "had") for c in verb.children)


def _copula_subject(block: Block, noun, spans: list):
    """The name a copula says the noun is ("The Adapter is the only Corvina service that talks to
    X": the Adapter), when the noun a relative clause describes is that copula's complement; else None."""
    if noun.dep_ != "attr" or noun.head.lemma_ != "be":
        return None
    subj = next((c for c in noun.head.children if c.dep_ == "nsubj"), None)
    if subj is None:
        return None
    return next(iter(_covering(block, subj, spans)), None)


def _covering(block: Block, token, spans: list) -> list:
    """The spans the token's first character falls in."""
    at = block.start + token.idx
    return [sp for sp in spans if sp.start <= at < sp.end]


def _span_at(block: Block, token, spans: list):
    exact = _covering(block, token, spans)
    if exact:
        return exact[0]
    # a name among the words before the head ("the new `ledger-svc` release"), not one in what
    # follows it ("modules on the Spool Gallery that ...": the modules)
    lo = block.start + token.left_edge.idx
    hi = block.start + token.idx + len(token)
    inside = [sp for sp in spans if lo <= sp.start and sp.end <= hi]
    return inside[0] if inside else None


def _subject(doc: Document, block: Block, trigger_start: int, left: list, sentence_start: int | None = None):
    if not left:
        return None
    nearest = left[-1]
    gap = _unmark(doc.text[nearest.end : trigger_start])
    if (
        SUBJECT_GAP.match(gap)
        and not _pronoun_acts(doc, block, trigger_start, nearest)
        and not _preposition_object(doc, block, nearest)
        and not _verb_object(doc, block, nearest)
    ):
        # "A, B and C are owned by T": the whole coordinated list is the subject; use its head
        return nearest
    # the sentence's first name is its usual subject ("X ... and works from Y"), unless it is in a
    # clause the sentence opens with ("When used with SSH, this parameter ... as defined in Y")
    first = left[0]
    lead = LEADING_CLAUSE.match(doc.text, sentence_start) if sentence_start is not None else None
    if lead is not None and first.start < lead.end():
        first = next((sp for sp in left if sp.start >= lead.end()), None)
        if first is None:
            return None
    gap_first = _unmark(doc.text[first.end : trigger_start])
    if len(gap_first) <= 120 and ";" not in gap_first:
        return _as_parsed(doc, block, trigger_start, first)
    return None


def _preposition_object(doc: Document, block: Block, sp) -> bool:
    """Is the name the object of a preposition ("Convert the SDDL to a PSCustomObject by using
    X")? It is then no subject, however near the trigger it is written; an agent ("done by X
    inside Y") is."""
    tok = _token_at(doc, block, sp.end - 1)
    return tok is not None and tok.dep_ == "pobj" and tok.head.lower_ != "by" and block.start + tok.idx >= sp.start


def _verb_object(doc: Document, block: Block, sp) -> bool:
    """Is the name what a verb acts on ("Get an ACL using X")? It is then no subject, however near
    the trigger it is written."""
    tok = _token_at(doc, block, sp.end - 1)
    return tok is not None and tok.dep_ == "dobj" and block.start + tok.idx >= sp.start


def _pronoun_acts(doc: Document, block: Block, trigger_start: int, name) -> bool:
    """Does the parse give the trigger's clause a personal pronoun for subject, written before
    ``name`` ("we must specify the destination in the Y cmdlet and use Z")? Then the name is in
    what the clause says, not who acts, however close it stands to the trigger."""
    found = _who_acts(doc, block, trigger_start, described=())
    if found is None or found[0] != "subject":
        return False
    tok = found[1]
    return tok.tag_ == "PRP" and block.start + tok.idx + len(tok) <= name.start


def _as_parsed(doc: Document, block: Block, trigger_start: int, first):
    """The sentence's first name as its subject, unless the parse says otherwise:

    - its verb has a subject, a common noun that does not hold the name ("The following example
      gets the events from the PowerShell event log and decrypts them using X"): the name only
      qualifies something; False when that noun is something other than the page's subject (no
      name acts), None when it may be the subject itself ("the service");
    - its verb has a pronoun for subject ("we", "they") and the name comes after it: None;
    - its verb has no subject and the name comes after it ("Shows a Markdown file in the console
      using VT100"): the name is what the verb acts on, for the section's subject (None)."""
    tok = _token_at(doc, block, trigger_start)
    if tok is None:
        return first
    root = tok.sent.root
    subj = next((c for c in root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    if subj is None:
        subjectless = root.pos_ in ("VERB", "AUX") and not any(c.dep_ == "expl" for c in root.children)
        if (
            subjectless
            and block.start + root.idx < first.start
            or _preposition_object(doc, block, first)
            or _verb_object(doc, block, first)
        ):
            return None  # "Example 3: Convert the SDDL to a PSCustomObject by using X": no subject said
        return first
    lo, hi = block.start + subj.left_edge.idx, block.start + subj.right_edge.idx + len(subj.right_edge)
    if lo <= first.start < hi:
        return first
    if subj.tag_ == "PRP" and first.start >= hi:
        # "we must specify the destination in the Y cmdlet and use Z": the pronoun acts; a name
        # after it is what the verb acts on, and whom "we" stands for is the caller's usual guess
        return None
    if subj.pos_ != "NOUN":
        return first
    return False if _other_than_subject(doc, block, subj) else None


def _unmark(text: str) -> str:
    """``text`` without inline markup, nor the "> " that opens a quoted paragraph's next line."""
    return re.sub(r"[*`_]|(?<=\n)[ \t]*>+", "", text)


def _structural(doc: Document, block: Block, bspans: list, add) -> None:
    sec = doc.section(block.start)
    heading = (
        re.sub(r"^(?:\d+(?:\.\d+)*|[A-Z])[.)]?\s+", "", sec.path[-1].strip(" *`:")) if sec.path else ""
    )  # "6. References"
    subject = doc.subject_at(block.start)
    page_subject = doc.subject
    # "Owner: T", "Region: X", "Supersedes: ADR-4"
    for m in KEY_VALUE.finditer(block.masked):
        key = re.sub(r"\s+", " ", m.group("key").lower())
        rel, inverse = KEY_RELATIONS[key]
        pos = block.start + m.end()
        vals = [sp for sp in bspans if sp.start >= pos]
        if not vals:
            continue
        gap = doc.text[pos : vals[0].start]
        if len(_unmark(gap).strip()) > 20:
            continue
        objs = _listed(doc, vals)
        subj = _line_key(doc, block, bspans, block.start + m.start()) or page_subject or subject
        for obj in objs:
            src, dst = (obj, subj) if inverse else (subj, obj)
            add(src, dst, rel, 0.9, f"key:{key}", block, block.start, block.end)
    if block.kind == "item" and bspans:
        first = next((sp for sp in bspans if _relevant(sp)), None)
        subj = page_subject or subject
        if first is None or subj is None:
            return
        if DEPENDENCY_HEADINGS.search(heading):
            # the item names what it is about first ("Kestrel: ...", "Requires the key from X"),
            # not in passing ("A VPN connection to the bastion host")
            lead = _unmark(doc.text[block.start : first.start])
            if not ITEM_LEAD.fullmatch(lead):
                return
            # a hard dependency when the item says so ("requires", "cannot start without"), else uses
            rel = "depends_on" if REQUIRED_WORDS.search(block.masked) else "uses"
            add(subj, first, rel, 0.8, f"section:{heading.lower()}", block, block.start, block.end)
        elif REFERENCE_HEADINGS.match(heading):
            # "See also" lists are navigation, not statements; "References" cite their first item
            # when it is a standard or a decision record, and refer to anything else.
            rel = "cites" if _citable(first) else "refers_to"
            add(subj, first, rel, 0.7, f"section:{heading.lower()}", block, block.start, block.end)
    # "(OPS-781)", "see POL-007", "recorded in ADR-012", "close SEC-2207": a page or section
    # refers to every ticket or document id its text names
    for sp in bspans:
        if sp.features.get("pattern") != "ticket" or block.kind == "heading":
            continue
        s0, e0 = _sentence_of(block, sp.start)
        prev = [x for x in bspans if x.end <= sp.start]
        if prev and re.fullmatch(r"\s*\(\s*", doc.text[prev[-1].end : sp.start]) and len(prev[-1].surface.split()) > 1:
            continue  # "Access Control Policy (POL-003)": the id names the thing, it is not a reference
        if sp.surface in _kinds_named(doc) or _names_a_kind(doc, block, sp):
            continue  # "Encodes in XYZ-32 format", "an ABC-256 hash": a kind of thing, not a record
        named = _names_the_id(doc, block, sp, bspans)
        if named is not None and named[0] == "labels":
            # "QSA-2025-003: Inlet leaked token prefixes in debug logs": the record the line opens
            # with is about the name its statement is about
            add(sp, named[1], "refers_to", 0.6, "an id's line", block, block.start + s0, block.start + e0)
            continue
        said = _said_by_the_id(doc, block, sp, bspans) if named is None else []
        for obj in said:
            # "QRFC-0021 proposes moving Coldline into Strata": the record is about what it says
            add(sp, obj, "refers_to", 0.6, "an id says", block, block.start + s0, block.start + e0)
        if said:
            continue
        who = named[1] if named is not None else subject
        if who is not None:
            # a release, policy or decision record that names a decision record or a standard
            # cites it ("Breaking: ... (ADR-019)" under a release); anything else refers to it
            rel = "cites" if _doclike(who) and _citable(sp) else "refers_to"
            add(who, sp, rel, 0.6, "names an id", block, block.start + s0, block.start + e0)


# how an id hangs on the clause whose subject we look for: as an argument ("presented X", "a list
# in X", "see X" joined to the clause), not in a clause of its own ("as defined in X")
_ARGUMENT_DEPS = ("pobj", "dobj", "prep", "compound", "appos", "conj", "xcomp", "attr", "nmod")


def _names_the_id(doc: Document, block: Block, sp, bspans: list):
    """("named", the name that is the subject of the clause an id is an argument of) ("Yusra
    Adeyemi keeps a list of known slow patterns in QS-1422", "Cairn will keep the language; see
    QS-2031"): the sentence says what that thing has to do with the record, so it is the one
    that refers to it. ("labels", the subject's name) when the id opens the line as its label
    ("QSA-2025-003: Inlet leaked token prefixes"). None when the id stands in parentheses after
    a statement ("... logs a warning (QS-1650)") or in a clause of its own ("as defined in
    QRFC-0018", "following ADR-023"), which the page or section it is under refers to; or when
    the subject is no name ("The decision to build Kestrel is recorded in ADR-012", "This
    follows SEC-2231") or is the id itself. A relative pronoun stands for the noun its clause
    describes ("2.1.1, which waited for INC-0007")."""
    if re.search(r"\(\s*(?:see\s+)?$", doc.text[max(block.start, sp.start - 8) : sp.start], re.I):
        return None
    tok = _token_at(doc, block, sp.start)
    own = range(sp.start - block.start, sp.end - block.start)
    kind = "labels" if _line_key(doc, block, bspans, sp.end) is sp else "named"
    for _ in range(6):
        if tok is None:
            return None
        subj = next((c for c in tok.children if c.dep_ in ("nsubj", "nsubjpass") and c.idx not in own), None)
        if subj is not None:
            break
        if kind == "labels":
            if tok.head.pos_ not in ("VERB", "AUX") and tok.dep_ != "compound":
                return None  # the label hangs on its statement's verb, however the parser calls it
        elif tok.dep_ not in _ARGUMENT_DEPS or (tok.dep_ == "prep" and tok.tag_ in ("VBG", "VBN")):
            return None
        if tok.head is tok:
            return None
        tok = tok.head
    else:
        return None
    if subj.tag_ in ("WDT", "WP") and tok.dep_ == "relcl":
        subj = tok.head
    found = next(
        (x for x in _covering(block, subj, bspans) if x is not sp and x.source != "coref" and x.type != "DATE"), None
    )
    return None if found is None else (kind, found)


# how the names an id's clause is about hang on its verb: its objects and their phrases, not a
# clause of their own that describes or qualifies them ("..., which offloads blocks to X")
_OBJECT_DEPS = (
    "dobj",
    "pobj",
    "prep",
    "xcomp",
    "ccomp",
    "pcomp",
    "conj",
    "appos",
    "compound",
    "attr",
    "dative",
    "nmod",
)


def _said_by_the_id(doc: Document, block: Block, sp, bspans: list) -> list:
    """The names in the objects of the clause an id is the subject of ("QRFC-0021 proposes moving
    the Coldline plugin into Strata": Coldline, Strata), or []: a record that does something to
    things is about them."""
    tok = _token_at(doc, block, sp.start)
    own = range(sp.start - block.start, sp.end - block.start)
    while tok is not None and tok.dep_ in ("compound", "nmod") and tok.head.idx in own:
        tok = tok.head
    if tok is None or tok.dep_ != "nsubj" or tok.head.pos_ != "VERB":
        return []
    out: list = []
    stack = [c for c in tok.head.children if c.dep_ in _OBJECT_DEPS]
    while stack:
        t = stack.pop()
        x = next((x for x in _covering(block, t, bspans) if x is not sp), None)
        if x is not None and x.source != "coref" and _relevant(x) and all(x is not y for y in out):
            out.append(x)
        stack.extend(c for c in t.children if c.dep_ in _OBJECT_DEPS)
    return sorted(out, key=lambda x: x.start)


def _line_key(doc: Document, block: Block, bspans: list, pos: int):
    """The name a line opens with as its key ("INFRA-88: alert before credentials expire. Owner:
    X."), when ``pos`` is on that line after it; else None (the key belongs to the page)."""
    start = doc.text.rfind("\n", block.start, pos) + 1 or block.start
    first = next((sp for sp in bspans if start <= sp.start < pos), None)
    if first is None or ITEM_MARK.fullmatch(doc.text[max(start, block.start) : first.start]) is None:
        return None
    return first if _unmark(doc.text[first.end : first.end + 3]).startswith(":") else None


def _kinds_named(doc: Document) -> set[str]:
    """The id-shaped names the document writes as a kind of thing at least once ("Encodes in
    UTF-7 format"): there every mention of the name is that kind ("**UTF-7** is no longer
    recommended"), not a record the page refers to. One name, one kind of thing, per document."""
    if doc._kinds_cache is None:
        kinds: set[str] = set()
        for block in doc.blocks:
            for sp in doc._spans_cache.get(id(block), []):
                if sp.features.get("pattern") == "ticket" and sp.surface not in kinds and _names_a_kind(doc, block, sp):
                    kinds.add(sp.surface)
        doc._kinds_cache = kinds
    return doc._kinds_cache


def _names_a_kind(doc: Document, block: Block, sp) -> bool:
    """Whether an id-shaped name modifies the common noun after it ("in XYZ-32 format", "the
    ABC-256 algorithm"): then it names a kind of thing, not a ticket or a document one could
    look up ("see OPS-12", "(OPS-12)", "OPS-12 proposes ...")."""
    sdoc = _parse_of(doc, block)
    if sdoc is None:
        return False
    lo, hi = sp.start - block.start, sp.end - block.start
    toks = list(tokens_starting_in(sdoc, lo, hi))
    outside = [t for t in toks if not lo <= t.head.idx < hi]
    if len(outside) != 1:
        return False
    tok = outside[0]
    if tok.dep_ == "amod" and tok.tag_ == "JJ" and tok.head.pos_ == "NOUN" and tok.head.i > tok.i:
        # "creates UTF-8 files": read as an adjective, it says what kind the files are
        return lemma(tok.head).lower() not in RECORD_NOUNS
    if any(o.pos_ == "PROPN" and not any(c.isdigit() for c in o.text) for o in _alternatives(tok)):
        # "saved as Unicode or UTF-8", "defaults to UTF-8 instead of ASCII": listed with, or
        # against, a name that is no id, it is a thing of its kind
        return True
    return (
        tok.dep_ in ("compound", "nmod", "amod")
        and tok.head.i > tok.i
        and tok.head.pos_ == "NOUN"
        and (tok.head.tag_ == "NN" or _plural_noun(tok.head))
        and lemma(tok.head).lower() not in RECORD_NOUNS
    )


def _plural_noun(tok) -> bool:
    """Is a word tagged as a plural noun one for sure: the subject of a verb after it ("UTF-16
    characters render ...") or the object of one before it, with more words of its clause after
    it ("writes UTF-16 characters to the file")? Not "the period that OPS-12 sets", "the rules
    OPS-12 sets.", "until the new index from LED-502 lands": a verb read as a plural noun ends
    the clause."""
    if tok.tag_ != "NNS":
        return False
    if tok.dep_ in ("nsubj", "nsubjpass"):
        return tok.head.i > tok.i and tok.head.pos_ in ("VERB", "AUX")
    after = tok.doc[tok.i + 1] if tok.i + 1 < len(tok.doc) else None
    return tok.dep_ == "dobj" and tok.head.i < tok.i and after is not None and not after.is_punct


def _alternatives(tok) -> list:
    """The words ``tok`` is listed with or set against: the one it is joined to ("Unicode or
    UTF-8"), those joined to it ("UTF-8 rather than ASCII"), and what a joining preposition of
    its governs ("UTF-8 instead of ASCII")."""
    out = [tok.head] if tok.dep_ == "conj" else []
    for c in tok.children:
        if c.dep_ == "conj":
            out.append(c)
        elif c.dep_ == "cc":
            out.extend(g for g in c.children if g.dep_ == "pobj")
    return out


# what an id names when it modifies one of these nouns is still a record, or a part of one
# ("the OPS-12 incident", "RFC-7232 section 3.1")
RECORD_NOUNS = frozenset(
    "ticket issue incident bug fix patch change request proposal rfc decision record review report "
    "postmortem advisory vulnerability task story epic item case thread discussion pr commit "
    "release milestone outage alert finding action section chapter paragraph clause appendix page".split()
)


PLACE_PREP = re.compile(r"(?:\bin|\bfrom|\bat|\bbetween|\bwithin|\bout\s+of)\s+(?:the\s+)?$", re.I)
PLACE_LIST = re.compile(r"^\s*(?:,|and|or|,\s*and)\s*(?:the\s+)?$", re.I)


def _is_place(sp) -> bool:
    if sp.features.get("pattern") == "region":
        return True
    if sp.source in ("code", "regex") or sp.type in ("DATE", "VERSION", "API"):
        return False
    if sp.features.get("gaz_source") in ("bold", "code", "title", "heading", "codename"):
        return False  # a name the corpus defines (**Lantern**) is a thing, whatever NER guesses here
    if sp.type != "LOCATION" and sp.features.get("ner_label") not in ("GPE", "LOC"):
        return False
    votes = PLACE_VOTES.get().get(sp.surface)
    return votes is None or votes[0] * 2 >= votes[1]


PLACE_NOUNS = frozenset(
    "region regions office offices city town country zone zones site sites campus area building floor room "
    "datacenter datacentre center centre".split()
)


def _names_the_kind_of(doc: Document, block: Block, prep_start: int, owner) -> bool:
    """Does ``owner`` only qualify the noun the place's preposition hangs on ("records events in
    the Windows PowerShell log in Event Viewer", "the current PowerShell host application in
    Notepad")? That noun is what is in the place, not the name."""
    prep = _token_at(doc, block, prep_start)
    if prep is None or prep.dep_ != "prep" or prep.head.pos_ != "NOUN":
        return False
    tok = _token_at(doc, block, owner.end - 1)
    while tok is not None and tok.dep_ == "compound" and tok.head.i > tok.i:
        tok = tok.head
        if tok.i == prep.head.i:
            return True
    return False


def _unit_note(doc: Document, block: Block, sp) -> bool:
    """Is the name in a parenthesis that opens with a preposition and follows a quantity ("a
    timeout of 4 minutes (in MS)", "(in GB)")? It says how the number is measured, not where
    anything is."""
    tok = _token_at(doc, block, sp.start)
    prep = tok.head if tok is not None and tok.dep_ == "pobj" else None
    if prep is None or prep.dep_ != "prep" or prep.i == 0 or prep.nbor(-1).text != "(":
        return False
    quantity = prep.head
    return quantity.pos_ == "NOUN" and any(c.dep_ == "nummod" for c in quantity.children)


def _modifies_noun(doc: Document, block: Block, sp) -> bool:
    """Does the name only qualify the noun after it ("in Nomad variables", "in the Northbeam
    console")? What is in it is then that thing, and the name is no place."""
    tok = _token_at(doc, block, sp.end - 1)
    if tok is None or tok.dep_ not in ("compound", "nmod", "amod", "poss"):
        return False
    head = tok.head
    if head.lower_ in PLACE_NOUNS:
        return False  # "in the eu-central-1 region", "in the Porto office": still the place
    return head.i > tok.i and head.pos_ in ("NOUN", "PROPN") and block.start + head.idx >= sp.end


def _qualifies_a_new_thing(doc: Document, block: Block, sp) -> bool:
    """Does the name only qualify a noun that names one thing of a kind ("introduces a CIM
    provider model", "adds a Kestrel client", "is based on the following Web service
    specifications")? That thing is what is defined or depended on, not the name; "defines the
    ReportTable class" still defines ReportTable."""
    if not _modifies_noun(doc, block, sp):
        return False
    head = _token_at(doc, block, sp.end - 1).head
    chain = head.dep_ == "compound"
    while head.dep_ == "compound" and head.head.i > head.i:
        head = head.head
    return chain or any(c.dep_ == "det" and c.lower_ in ("a", "an") for c in head.children)


# per document: surface -> (mentions NER calls a place, mentions NER labels at all)
PLACE_VOTES: contextvars.ContextVar[dict[str, tuple[int, int]]] = contextvars.ContextVar("place_votes", default={})


def _place_votes(spans: list) -> dict[str, tuple[int, int]]:
    votes: dict[str, list[int]] = {}
    for sp in spans:
        label = sp.features.get("ner_label")
        if label:
            v = votes.setdefault(sp.surface, [0, 0])
            v[0] += label in ("GPE", "LOC", "FAC")
            v[1] += 1
    return {k: (a, b) for k, (a, b) in votes.items()}


# what the nearest earlier name must not be to be the one located ("Priya Raman in Tallinn" locates her team)
NOT_OWNERS = frozenset({"PERSON", "DATE", "VERSION", "CONCEPT"})


def _locations(doc: Document, block: Block, bspans: list, add) -> None:
    """ "X ... in Tallinn", "runs in eu-central-1 with a standby in eu-west-1": the nearest earlier
    thing (not a person) in the sentence is located in the place."""
    for s0, e0 in block.sentences():
        s, e = block.start + s0, block.start + e0
        spans = [sp for sp in bspans if s <= sp.start < e]
        prev_place = None
        for i, sp in enumerate(spans):
            if not _is_place(sp):
                prev_place = None
                continue
            before = _unmark(doc.text[max(s, sp.start - 20) : sp.start])
            listed = prev_place is not None and PLACE_LIST.match(_unmark(doc.text[prev_place.end : sp.start]))
            if (
                not (PLACE_PREP.search(before) or listed)
                or _modifies_noun(doc, block, sp)
                or _unit_note(doc, block, sp)
                or _listed_with_things(doc, block, sp, spans)
            ):
                prev_place = None
                continue
            if _not_where(doc, block, sp):
                prev_place = None
                continue
            prep = doc.text.rfind(" ", s, sp.start - 1)
            at = prep + 1 if prep >= 0 else sp.start
            owner = _dep_subject(doc, block, at, spans)
            shared = None if owner is not None else _shared_subject(doc, block, at, spans)
            owner = owner or shared
            if (
                owner is None
                or owner.type in ("PERSON", "DATE", "VERSION")
                or _is_place(owner)
                or owner.start >= sp.start
            ):
                # the nearest earlier thing; not when a second verb shares a subject the parse
                # gives (the nearest is then the first verb's object)
                nearest = (
                    x
                    for x in reversed(spans[:i])
                    if x.type not in NOT_OWNERS and not _is_place(x) and not _set_in(doc, block, x, sp)
                )
                owner = None if shared is not None else next(nearest, None)
            if owner is not None and not _names_the_kind_of(doc, block, at, owner):
                add(owner, sp, "located_in", 0.6, "in <place>", block, s, e)
            prev_place = sp


# verbs whose "in" says in which release, product or language something happens, not where it is
# ("introduced in Windows Vista", "implemented in Windows PowerShell", "written in Go")
_NOT_WHERE_VERBS = frozenset(
    ("introduce", "implement", "add", "deprecate", "remove", "support", "fix", "change", "ship", "release", "write")
)


def _not_where(doc: Document, block: Block, sp) -> bool:
    """Does the preposition before the place say something other than where a thing is? When the
    verb it completes is negated ("aren't supported in Windows PE"), says in which release or product
    something happens (``_NOT_WHERE_VERBS``), or acts on a pronoun ("to return it in Fahrenheit": what
    is there is what "it" stands for, not a name before it)."""
    tok = _token_at(doc, block, sp.start)
    for _ in range(3):
        if tok is None or tok.dep_ == "prep":
            break
        tok = tok.head
    if tok is None or tok.dep_ != "prep":
        return False
    verb = tok.head
    if verb.pos_ not in ("VERB", "AUX"):
        return False
    return (
        any(c.dep_ == "neg" for c in verb.children)
        or lemma(verb).lower() in _NOT_WHERE_VERBS
        or any(c.dep_ == "dobj" and c.pos_ == "PRON" for c in verb.children)
    )


def _set_in(doc: Document, block: Block, sp, place) -> bool:
    """Is the name itself the setting "in" something ("work fine in PowerShell, but may break in
    Windows PowerShell"), while the place's own preposition hangs on another word? It is then no
    thing located in the place; "at the Astoria Theatre in London" is."""
    tok = _token_at(doc, block, sp.end - 1)
    while tok is not None and tok.dep_ == "compound" and tok.head.i > tok.i:
        tok = tok.head
    if tok is None or tok.dep_ != "pobj" or tok.head.lower_ not in ("in", "within", "inside"):
        return False
    prep = _token_at(doc, block, place.start)
    while prep is not None and prep.dep_ != "prep" and prep.head is not prep:
        prep = prep.head
    return prep is not None and prep.dep_ == "prep" and prep.head.i != tok.i and prep.head.i != tok.head.i


def _listed_with_things(doc: Document, block: Block, sp, spans: list) -> bool:
    """Is the place listed with a name of a made thing ("available only in Windows Vista,
    Windows Server 2008, and later versions")? Then none of them is one: places are listed with
    places ("in Tallinn, Estonia", "in Porto and Lisbon"). A person or an organisation NER finds
    may be a list the parser joined to the place's ("studied in Ontario and at McGill University")."""
    tok = _token_at(doc, block, sp.end - 1)
    if tok is None:
        return False
    listed = _alternatives(tok) + [c for c in tok.children if c.dep_ == "appos"]
    for other in listed:
        hit = _span_at(block, other, spans)
        if (
            hit is not None
            and hit is not sp
            and hit.type not in ("LOCATION", "PERSON", "ORG")
            and not hit.features.get("ner_label")
            and not _is_place(hit)
        ):
            return True
    return False


def _shared_subject(doc: Document, block: Block, prep_start: int, spans: list):
    """The subject a second coordinated verb shares with the first ("It is owned by T and runs in
    R": the page's subject the "it" stands for, not T, the name nearest before), or None."""
    tok = _token_at(doc, block, prep_start)
    verb = tok.head if tok is not None and tok.dep_ == "prep" else None
    for _ in range(4):  # "runs in R with a warm standby in R2": up to the verb
        if verb is None or verb.pos_ in ("VERB", "AUX") or verb.dep_ not in ("pobj", "prep"):
            break
        verb = verb.head
    if verb is None or verb.dep_ != "conj" or verb.pos_ not in ("VERB", "AUX") or verb.head.pos_ not in ("VERB", "AUX"):
        return None
    subj = next((c for c in verb.head.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    if subj is None:
        return None
    hit = _span_at(block, subj, spans)
    if hit is not None:
        return hit
    return doc.subject_at(prep_start) if subj.lower_ in ("it", "this") else None


def _appositions(doc: Document, block: Block, bspans: list, add) -> None:
    """ "Amara Osei (Payments Platform)", "Lorcan Pyle of Hexaport Systems" -> part_of; "Mercury is
    NHub's SMS adapter" -> part_of."""
    text = doc.text
    for a, b in zip(bspans, bspans[1:]):
        gap = text[a.end : b.start]
        after = text[b.end : b.end + 2]
        if (
            a.type == "PERSON"
            and re.fullmatch(r"\s*\(\s*", gap)
            and after.startswith(")")
            and b.type not in ("PERSON", "DATE")
        ):
            add(a, b, "part_of", 0.75, "person (team)", block, block.start, block.end)
        elif a.type == "PERSON" and b.type in ("TEAM", "ORG") and re.fullmatch(r"\s+of\s+(?:the\s+)?", gap):
            # "led by Emile Brassard of the Docs WG", "Lorcan Pyle of Hexaport Systems maintains it"
            s0, e0 = _sentence_of(block, a.start)
            add(a, b, "part_of", 0.75, "person of team", block, block.start + s0, block.start + e0)
        elif re.fullmatch(r"\s*(?:\*\*)?\s*(?:is|are)\s+(?:the\s+|an?\s+)?", _unmark(gap)) is not None and re.match(
            r"['’]s\b", text[b.end : b.end + 3]
        ):
            s0, e0 = _sentence_of(block, a.start)
            add(a, b, "part_of", 0.8, "X is Y's part", block, block.start + s0, block.start + e0)


# "the Storage WG, whose lead is X"; "The TSC has five members: A (chair), B and C"
WHOSE_LEAD = re.compile(
    r",?\s*whose\s+(?:\w+\s+)?(?:lead|head|chair|manager|members?)\s+(?:is|are|include)\s+(?:the\s+)?"
)
HAS_MEMBERS = re.compile(r"\s+(?:has|have)\s+(?:\w+\s+){0,2}members\s*(?::|,\s*namely)\s*")
MEMBER_GAP = re.compile(r"\s*(?:\([^()]{0,40}\))?\s*(?:,|and|,\s*and)?\s*")


def _members(doc: Document, block: Block, bspans: list, add) -> None:
    """ "the Storage WG, whose lead is X" -> X part_of the Storage WG; "The TSC has five members:
    A (chair), B, C and D" -> each of them part_of the TSC (a person belongs to the team)."""
    text = doc.text
    for k, (a, b) in enumerate(zip(bspans, bspans[1:])):
        gap = _unmark(text[a.end : b.start])
        if WHOSE_LEAD.fullmatch(gap):
            s0, e0 = _sentence_of(block, a.start)
            add(b, a, "part_of", 0.8, "whose lead is", block, block.start + s0, block.start + e0)
        elif HAS_MEMBERS.fullmatch(gap):
            s0, e0 = _sentence_of(block, a.start)
            members = [b]
            for nxt in bspans[k + 2 :]:
                if not MEMBER_GAP.fullmatch(_unmark(text[members[-1].end : nxt.start])):
                    break
                members.append(nxt)
            for m in members:
                if _relevant(m):
                    add(m, a, "part_of", 0.8, "has members", block, block.start + s0, block.start + e0)


# "A is now B." between two names, B ending its clause: a rename ("Hopper is now Inlet;")
NOW_NAMED = re.compile(r"\s*(?:is|are)\s+now\s+(?:called\s+|named\s+|known\s+as\s+)?")
CLAUSE_END = re.compile(r"\s*(?:[.;:,)]|$)")


def _now_named(doc: Document, block: Block, bspans: list, add) -> None:
    """ "Tallyhive is now Quillstone." -> Tallyhive same_as Quillstone: the former name first. Only
    between two names, the second ending its clause and written as a name, not an abbreviation
    or a state ("X is now GA", "The job state is now Disconnected": no name before)."""
    text = doc.text
    for a, b in zip(bspans, bspans[1:]):
        if not NOW_NAMED.fullmatch(_unmark(text[a.end : b.start])) or not CLAUSE_END.match(
            _unmark(text[b.end : b.end + 3])
        ):
            continue
        if {a.type, b.type} & {"VERSION", DATE} or b.surface.isupper() or not re.search(r"[a-z]", b.surface):
            continue
        tok = _token_at(doc, block, b.start)
        if tok is not None and tok.pos_ in ("ADJ", "VERB"):
            continue  # "... is now Disconnected": a state
        s0, e0 = _sentence_of(block, a.start)
        add(a, b, "same_as", 0.85, "is now", block, block.start + s0, block.start + e0)


def _definition(doc: Document, block: Block, bspans: list, add) -> None:
    """Glossary style "**Term**: A Toggler flag that ..." -> the term is part of the named thing."""
    m = re.match(r"\s*(?:[-*+]\s+)?\*\*([^*]+)\*\*\s*:?\s*:?\s*(?:An?|The)\s+", block.raw)
    if not m or not bspans:
        return
    term = next(
        (sp for sp in bspans if sp.start <= block.start + m.start(1) < sp.end or sp.start == block.start + m.start(1)),
        None,
    )
    if term is None:
        return
    s0, e0 = _sentence_of(block, block.start + m.end())
    end = block.start + e0
    # "A Toggler flag that ...": a name right after the article, used as a modifier of a noun
    first = next((sp for sp in bspans if sp.start == block.start + m.end()), None)
    if first is not None and first is not term and re.match(r"\s+[a-z]", doc.text[first.end : first.end + 3]):
        add(term, first, "part_of", 0.5, "definition", block, block.start, end)


def _sentence_of(block: Block, pos: int) -> tuple[int, int]:
    rel = pos - block.start
    for s, e in block.sentences():
        if s <= rel < e:
            return s, e
    return 0, len(block.raw)


def _steps(doc: Document, by_block: dict[int, list], add) -> None:
    """Consecutive numbered steps: the key thing of step n precedes that of step n+1."""
    prev_block, prev_key = None, None
    for block in doc.blocks:
        if block.kind == "heading":
            prev_block, prev_key = None, None
            continue
        if block.kind != "item" or block.step is None:
            continue
        key = _step_key(doc, block, by_block.get(id(block), []))
        if prev_block is not None and block.step == prev_block.step + 1 and key is not None and prev_key is not None:
            add(prev_key, key, "precedes", 0.6, "numbered steps", block, prev_block.start, block.end)
        prev_block, prev_key = block, key


def _step_key(doc: Document, block: Block, bspans: list):
    """The actor of a step: the grammatical subject of its first sentence ("3. OIS commits ...").
    Imperative steps ("Check the dashboard") have no actor and link nothing."""
    s0, e0 = block.sentences()[0] if block.sentences() else (0, len(block.raw))
    first = [sp for sp in bspans if sp.start < block.start + e0 and _relevant(sp)]
    for sp in first:
        if _subject_in(doc, block, sp) is not None:
            return sp
    # an imperative step ("Freeze writes with `ledgerctl freeze`") is keyed by the command it runs
    return next((sp for sp in first if sp.features.get("code_font") and sp.type in ("API", "COMPONENT")), None)


def _readers_object(noun) -> bool:
    """Is the noun what a verb of the reader's, or the writers', acts on ("you disconnect a
    PSSession")?"""
    if noun.dep_ != "dobj":
        return False
    return any(c.dep_ == "nsubj" and c.lower_ in ("you", "we") for c in noun.head.children)


def _subject_in(doc: Document, block: Block, sp):
    """The token of the name that is a clause's subject, or None."""
    sdoc = _parse_of(doc, block)
    if sdoc is None:
        return None
    rel_start, rel_end = sp.start - block.start, sp.end - block.start
    return next((t for t in tokens_starting_in(sdoc, rel_start, rel_end) if t.dep_ in ("nsubj", "nsubjpass")), None)


def _tables(doc: Document, by_block: dict[int, list], add) -> None:
    header: list[str] | None = None
    for block in doc.blocks:
        if block.kind != "row":
            header = None
            continue
        cells = _cells(block)
        if header is None:
            header = [c[2].strip().lower() for c in cells]
            continue
        bspans = by_block.get(id(block), [])
        if not cells or not bspans:
            continue
        key = cells[0][2].strip().lower()
        key_rel = _column_relation(key.strip("*` ")) if len(cells) == 2 else None
        if key_rel is not None and doc.subject_at(block.start) is not None:
            # a key/value table: "| Owning team | Fulfilment |" about the page's subject
            subj = doc.subject or doc.subject_at(block.start)
            for sp in _named_in(cells[1], bspans):
                _add_cell(add, subj, sp, key_rel, f"table:{key}", block)
            continue
        row_entity = next((sp for sp in bspans if cells[0][0] <= sp.start < cells[0][1]), None)
        if row_entity is None:
            continue
        if len(cells) == 2 and len(header) == 2 and _renames(doc, block, header):
            # "## Renamed settings" over "| old | new |" rows: each row a former name and the current one
            current = _named_in(cells[1], bspans)
            if len(current) == 1 and _relevant(row_entity):
                add(row_entity, current[0], "same_as", 0.75, "table:renamed", block, block.start, block.end)
            continue
        for cell, name in zip(cells[1:], header[1:]):
            rel = _column_relation(name)
            if rel is None:
                continue
            for sp in _named_in(cell, bspans):
                _add_cell(add, row_entity, sp, rel, f"table:{name}", block)


def _named_in(cell: tuple[int, int, str], spans: list) -> list:
    """The names a table cell holds (no date or version)."""
    return [sp for sp in spans if cell[0] <= sp.start < cell[1] and _relevant(sp)]


# "Renamed keys", not "Renaming files" or "Rename a function": a how-to's table is no list of renames
RENAMED = re.compile(r"\b(?:renamed|former\s+names?|old\s+names?)\b", re.I)
OLD_NEW = (re.compile(r"^(?:old|former|previous|before)\b"), re.compile(r"^(?:new|current|after)\b"))


def _renames(doc: Document, block: Block, header: list[str]) -> bool:
    """Is a two-column table a list of renames: its section's heading says so ("Renamed
    settings"), or its columns are the old and the new ("| Old name | New name |")?"""
    if all(rx.match(h.strip("*` ")) for rx, h in zip(OLD_NEW, header)):
        return True
    path = doc.section(block.start).path
    return bool(path) and RENAMED.search(path[-1]) is not None


def _add_cell(add, row_entity, cell, column: tuple[str, bool], pattern: str, block: Block) -> None:
    """The relation a column names between the row's entity and a name in a cell: "Owner"
    says the row's thing is owned by the cell's, "Owns" the other way round. A person is not
    owned: in a team column, a person belongs to the team."""
    rel, reverse = column
    src, dst = (cell, row_entity) if reverse else (row_entity, cell)
    if rel == "owned_by" and src.type == "PERSON":
        rel = "part_of"
    add(src, dst, rel, 0.75, pattern, block, block.start, block.end)


def _cells(block: Block) -> list[tuple[int, int, str]]:
    out = []
    pos = block.start
    for part in block.raw.split("|"):
        out.append((pos, pos + len(part), part))
        pos += len(part) + 1
    return [c for c in out[1:-1]] if block.raw.strip().startswith("|") else out


# What a table column's header names: (pattern, relation, from the cell to the row). The words
# are the annotation guideline's cues for each relation; "Lead" and "Members" count only as the
# whole header ("Team lead"), not in "Lead time". First match wins.
COLUMN_RELATIONS = [
    (re.compile(r"\b(?:owns|maintains|operates)\b"), "owned_by", True),
    # a person's or a team's "Area" (of responsibility) is what they own; an owner is a person, team or
    # company (TYPE_OK), so a place's "Area" relates nothing
    (re.compile(r"^(?:(?:focus\s+)?areas?(?:\s+of\s+responsibility)?|responsibilit(?:y|ies))$"), "owned_by", True),
    (re.compile(r"^(?:[\w-]+\s+)?(?:leads?|led\s+by|members?|chairs?)$"), "part_of", True),
    (
        re.compile(
            r"\b(?:owner|owning|owned\s+by|team|working\s+group|squad|maintaine[rd]|run\s+by|operated\s+by|authors?\b)"
        ),
        "owned_by",
        False,
    ),
    (
        re.compile(r"\b(?:region|location|office|site|city|country|data\s*cent(?:er|re)|runs\s+in|hosted\s+in)"),
        "located_in",
        False,
    ),
    (re.compile(r"^(?:supersedes|replaces)$"), "precedes", True),
    (re.compile(r"^(?:superseded|replaced)\s+by$"), "precedes", False),
    (re.compile(r"\b(?:depends|dependenc|requires)"), "depends_on", False),
    (re.compile(r"\b(?:uses|integrat|calls)"), "uses", False),
    (re.compile(r"\b(?:part\s+of|parent|component\s+of|member\s+of|belongs\s+to|affiliation)"), "part_of", False),
]


def _column_relation(name: str) -> tuple[str, bool] | None:
    """The relation a table column names, and whether it points from the cell to the row
    (under "Owns" or "Lead", the cell's thing is owned by, or belongs to, the row's)."""
    return next(((rel, reverse) for rx, rel, reverse in COLUMN_RELATIONS if rx.search(name)), None)


def _sequences(doc: Document, by_block: dict[int, list], add) -> None:
    """ "upgraded X from 1.2.7 to 1.3.2" (releases), "A -> B -> C": the first precedes the second."""
    for block in doc.blocks:
        spans = by_block.get(id(block), [])
        for a, b in zip(spans, spans[1:]):
            gap = _unmark(doc.text[a.end : b.start])
            before = _unmark(doc.text[max(block.start, a.start - 6) : a.start]).lower()
            arrow = re.fullmatch(r"\s*(?:->|→|=>|-->)\s*", gap) and not (
                # "through `Templates -> Components -> Logging`": a path written as code names a place in
                # a menu or a tree (inline code may run over a line break of its paragraph)
                doc.text.count("`", block.start, a.end + re.search(r"[-→=]", doc.text[a.end : b.start]).start()) % 2
            )
            if arrow or (
                re.fullmatch(r"\s+to\s+", gap) and before.endswith("from ") and a.type == b.type and _release(a, b)
            ):  # "from 1.2.7 to 1.3.2"; "moves a certificate from LocalMachine to CurrentUser" is no order
                s0, e0 = _sentence_of(block, a.start)
                add(a, b, "precedes", 0.75, "sequence", block, block.start + s0, block.start + e0)


# a release and its pre-release: "2.2.0-rc.1", "v3.3.0-rc1", "1.0.0-beta.2", "4.1b2" (PEP 440)
PRERELEASE = re.compile(
    r"(?:^|\s)v?(\d+(?:\.\d+){1,3})(?:-?(?:rc|alpha|beta|preview|pre)|(?<=\d)(?:a|b))[.-]?\d*$", re.I
)
RELEASE = re.compile(r"(?:^|\s)v?(\d+(?:\.\d+){1,3})$")


def _release_parts(surface: str) -> tuple[str, str, bool] | None:
    """(product words, release number, is a pre-release) of a version's surface
    ("kestrel-client 1.4.0-rc1" -> ("kestrel-client", "1.4.0", True)), or None."""
    text = _unmark(surface).strip()
    for rx, pre in ((PRERELEASE, True), (RELEASE, False)):
        m = rx.search(text)
        if m:
            return text[: m.start()].strip().lower(), m.group(1), pre
    return None


def _prereleases(doc: Document, by_block: dict[int, list], add) -> None:
    """A pre-release precedes the release it is a candidate for ("2.2.0-rc.1 is the release
    candidate for 2.2.0"), when the text names both together: in one sentence, or in one list
    item or the next ("- 2.2.0 becomes the first LTS release. / - 2.2.0-rc.1 is planned two weeks
    before the final release"). Which release a candidate became is what semantic versioning
    says; a paragraph that merely names both ("ran on 1.4.0-rc1 ... 1.4.0 will be tagged") is
    left to the model."""
    blocks = doc.blocks
    for i, block in enumerate(blocks):
        spans = [sp for sp in by_block.get(id(block), []) if sp.type == "VERSION"]
        for p in spans:
            parts = _release_parts(p.surface)
            if parts is None or not parts[2]:
                continue
            s0, e0 = _sentence_of(block, p.start)
            near = [sp for sp in spans if block.start + s0 <= sp.start < block.start + e0]
            if block.kind == "item":
                for j in (i - 1, i + 1):
                    if 0 <= j < len(blocks) and blocks[j].kind == "item":
                        near += [sp for sp in by_block.get(id(blocks[j]), []) if sp.type == "VERSION"]
            for r in near:
                other = _release_parts(r.surface)
                if other is None or other[2] or other[1] != parts[1]:
                    continue
                if parts[0] and other[0] and parts[0] != other[0]:
                    continue  # two products' numbers ("kestrel-client 1.4.0-rc1", "ledger-svc 1.4.0")
                add(p, r, "precedes", 0.8, "pre-release", block, block.start + s0, block.start + e0)


AS_REQUIRED = re.compile(r"\bas\s+(?:the\s+)?$", re.I)
REQUIRE_VERB = re.compile(r"^\s*(?:requires|required|recommends|mandates|specifies|demands|prescribes|says)\b", re.I)
ID_LIKE = re.compile(r"^[A-Z][A-Z0-9]{1,9}-\d{1,6}$")


def _as_required(doc: Document, block: Block, bspans: list, add) -> None:
    """ "..., as ADR-012 recommends" (a document cites a document); "X is due ..., as the
    Incident Policy requires" (the policy defines X)."""
    for sp in bspans:
        before = _unmark(doc.text[max(block.start, sp.start - 8) : sp.start])
        if not AS_REQUIRED.search(before) or not REQUIRE_VERB.match(_unmark(doc.text[sp.end : sp.end + 20])):
            continue
        s0, e0 = _sentence_of(block, sp.start)
        s, e = block.start + s0, block.start + e0
        if ID_LIKE.match(sp.surface) or sp.type == "STANDARD":
            src = doc.subject_at(sp.start)
            if src is not None:
                add(src, sp, "cites", 0.75, "as X requires", block, s, e)
        else:
            first = next((x for x in bspans if s <= x.start < sp.start and _relevant(x)), None)
            if first is not None:
                add(sp, first, "defines", 0.7, "as X requires", block, s, e)


ERROR_WORDS = re.compile(r"\b(?:errors?|rejects?|rejected|returns?|fails?\s+with|raises?)\b", re.I)
ERROR_CODE = re.compile(r"^(?:[A-Z][A-Z0-9]*_)+[A-Z0-9]+$|^[A-Z]{2,}(?:-\d{3})?-[A-Z]{3,}$|^[A-Z]{1,3}\d{3,5}$")


def _defined_terms(doc: Document, block: Block, bspans: list, add) -> None:
    """A policy or standard that introduces a term in bold ("**Legal hold**: ...") defines it."""
    subject = doc.subject
    if subject is None or not _doclike(subject) or subject.type == "VERSION":
        return
    # a decision record or policy that states the error a rule raises defines that error code
    for s0, e0 in block.sentences():
        sentence = block.masked[s0:e0]
        if not ERROR_WORDS.search(sentence):
            continue
        for sp in bspans:
            if block.start + s0 <= sp.start < block.start + e0 and _as_code(doc, sp) and ERROR_CODE.match(sp.surface):
                add(subject, sp, "defines", 0.6, "error code in a decision", block, block.start + s0, block.start + e0)
    if subject.type not in ("POLICY", "STANDARD"):
        return
    topic = _topic(doc, block)
    if topic is not None and topic.surface != subject.surface:
        add(subject, topic, "defines", 0.6, "bold term in a policy", block, block.start, block.end)


def _release_additions(doc: Document, block: Block, bspans: list, add) -> None:
    """Release notes: "error code X was added", "New: error code X" -> the release defines X."""
    owner = _topic(doc, block)  # "- 2.8.0: `OIS-409-DUPLICATE` was added"
    if owner is None or owner.type != "VERSION":
        owner = doc.subject_at(block.start)
    if owner is None or owner.type != "VERSION":
        return
    for sp in bspans:
        before = _unmark(doc.text[max(block.start, sp.start - 14) : sp.start]).lower()
        after = _unmark(doc.text[sp.end : sp.end + 16]).lower()
        if re.search(r"error\s+codes?\s+$", before) or re.match(
            r"\s*(?:was|were|is|are)\s+(?:added|introduced|new)\b", after
        ):
            s0, e0 = _sentence_of(block, sp.start)
            add(owner, sp, "defines", 0.7, "release adds", block, block.start + s0, block.start + e0)
