"""The link stage: canonicalise mentions into entities (seed 000 section 7).

Blocking finds candidate entities for a surface by its ``norm`` (lower-case
alphanumerics), known aliases, edit distance <= 1 and token Jaccard >= 0.6.
The candidates are scored

    score = 0.45 cos + 0.25 string_sim + 0.15 type_prior + 0.10 context + 0.05 popularity

where ``cos`` is the cosine between the surface and the entity's stored vector (name,
other names, definition) when the entity has one; until then the string similarity stands
in for it. The mention links
when the score reaches the threshold (0.72); otherwise it founds a new entity with
``aliases=[surface]``. An exact norm or alias hit links unless the text gives evidence of
two things: the mention's own type evidence (a head noun, a regex family) incompatible with
all of the entity's; what spaCy or a capitalised run suggests differs from one document to
the next for the same thing and is no such evidence.

An entity's type is decided over all its mentions, in every document, by the learned model
of :mod:`kgr.stages.entitytypes` (features of each mention and of the words around it),
or, without a model, by a weighted vote of the mentions' types.

Aliases are also learned from the text itself before a document is linked:
"Payments Platform (PayPlat)", "Y: short for X", "usually written Y",
"Short name: Y" on a page about X, "X was called Y until ..." (kept apart, joined
by a same_as relation). Processing is deterministic: the same input gives the same
entities, keys and links.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from kgr import records
from kgr.stages import entitytypes

THRESHOLD = 0.72
STRUCTURAL = 0.9  # string similarity of the matches the linker trusts without vectors
GENERIC_HEADS = {
    "service",
    "services",
    "svc",
    "engine",
    "adapter",
    "team",
    "api",
    "hub",
    "system",
    "platform",
    "server",
    "tool",
    "cluster",
    "database",
    "db",
    "policy",
    "office",
    "the",
}


@functools.lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """spaCy's English stop words, read from their module alone: importing spaCy itself takes
    seconds, which a cold `kgr query` or `kgr link` cannot afford."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("spacy")
    path = Path(spec.origin).parent / "lang" / "en" / "stop_words.py"
    mod_spec = importlib.util.spec_from_file_location("_kgr_spacy_en_stop_words", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return frozenset(mod.STOP_WORDS)


@functools.lru_cache(maxsize=1 << 16)
def norm(surface: str) -> str:
    """lowercase(alnum_only(surface)), accents folded: "Lucía Ferrante" -> "luciaferrante"."""
    folded = unicodedata.normalize("NFKD", surface)
    return "".join(c for c in folded.lower() if c.isalnum() and not unicodedata.combining(c))


def tokens(surface: str) -> list[str]:
    """Lower-case word tokens; CamelCase is split first ("BasinOps" -> basin, ops)."""
    return list(_tokens(surface))


@functools.lru_cache(maxsize=1 << 16)
def _tokens(surface: str) -> tuple[str, ...]:
    split = re.sub(r"([a-z])([A-Z])", r"\1 \2", surface)
    folded = unicodedata.normalize("NFKD", split.lower())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return tuple(t for t in re.split(r"[^a-z0-9]+", folded) if t)


IDENTIFIER = re.compile(r"[^\W_][-_.:/][^\W_]|[a-z][A-Z]")


@functools.lru_cache(maxsize=1 << 16)
def identifier(surface: str) -> bool:
    """Is this name written as an identifier ("Get-ChildItem", "setl.release.enabled",
    "PayloadSize"): one word joined by punctuation or in CamelCase? Two such names are the same
    thing only when they are written the same (case and punctuation aside) or declared so."""
    s = surface.strip()
    return bool(s) and not any(c.isspace() for c in s) and bool(IDENTIFIER.search(s))


# a Roman numeral written as one (upper case): "II", "XIV"
ROMAN = re.compile(r"(?=[MDCLXVI])M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")


@functools.lru_cache(maxsize=1 << 16)
def numbered(surface: str) -> bool:
    """Does the name carry a number: a digit ("ADR-019"), or a Roman numeral after its first
    word ("Johann Strauss II", "World War I")? Names that differ only in it name different
    things, father and son, one war and the next: such a name matches only as written."""
    if any(c.isdigit() for c in surface):
        return True
    return any(ROMAN.fullmatch(w.strip(".,;:()")) for w in surface.split()[1:])


# ":2022", " v4.0", " 3.6.1", " Type II"; a bare number only after a mixed-case word ("PostgreSQL 15",
# not "ISO 27001" or "SOC 2", where the number is the name).
VERSION_TAIL = re.compile(
    r"(?:\s*:\s*\d{4}|\s+v?\d+(?:\.\d+)+(?:-[a-z0-9]+(?:\.[a-z0-9]+)*)?|\s+v\d+|\s+Type\s+(?:I{1,3}|[123])|(?<=[a-z])\s+\d{1,3})+$"
)


def unversioned(surface: str) -> str:
    """ "ISO/IEC 27001:2022" -> "ISO/IEC 27001", "PCI DSS v4.0" -> "PCI DSS", "PostgreSQL 15" -> "PostgreSQL"."""
    core = VERSION_TAIL.sub("", surface).strip()
    core = core.replace("ISO/IEC ", "ISO ")
    return core if core and len(core) >= 2 else surface


def singular(n: str) -> str:
    if n.endswith("ies") and len(n) > 4:
        return n[:-3] + "y"
    if n.endswith(("ches", "shes", "sses", "xes", "zes")) and len(n) > 5:
        return n[:-2]
    if n.endswith("s") and not n.endswith("ss") and len(n) > 3:
        return n[:-1]
    return n


def is_abbreviation(short: str, long: str) -> bool:
    """Can ``short`` be read as an abbreviation of ``long``? ("OIS", "Order Intake Service"),
    ("PayPlat", "Payments Platform"), ("ledger-svc", "Ledger Service"), ("NHub", "Notification Hub")."""
    s = norm(short)
    words = tokens(long)
    if not s or len(words) < 1 or len(s) >= len(norm(long)) or s[0] != words[0][0]:
        return False
    stoks = tokens(short)
    if len(stoks) > 1:  # code names: every part abbreviates a word, in order
        i = 0
        for part in stoks:
            while i < len(words) and not _subseq(part, words[i]):
                i += 1
            if i == len(words):
                return False
            i += 1
        return True
    if len(words) < 2:
        return False
    # initials or prefixes of the words, in order, first letter of each used word
    return _abbrev(s, words)


def _subseq(part: str, word: str) -> bool:
    if not part or part[0] != word[0]:
        return False
    it = iter(word)
    return all(c in it for c in part)


def _abbrev(s: str, words: list[str]) -> bool:
    # dynamic check: s is a concatenation of non-empty prefixes of a subsequence of words starting with words[0]
    from functools import lru_cache

    @lru_cache(maxsize=None)
    def go(i: int, j: int) -> bool:
        if i == len(s):
            return j >= 1
        for k in range(j, len(words)):
            w = words[k]
            if k > j and j == 0:
                return False
            n = 1
            while n <= len(w) and i + n <= len(s) and s[i : i + n] == w[:n]:
                if go(i + n, k + 1):
                    return True
                n += 1
            if j == 0:
                return False
        return False

    return go(0, 0)


@dataclass
class Entity:
    key: str
    name: str
    type: str
    norm: str
    aliases: list[str] = field(default_factory=list)
    description: str | None = None
    popularity: float = 0.0
    type_votes: dict[str, float] = field(default_factory=dict)
    surface_votes: dict[str, int] = field(default_factory=dict)
    docs: set[str] = field(default_factory=set)
    origin: str = "extracted"
    type_feats: dict[str, float] = field(default_factory=dict)  # its mentions' typing features, summed
    type_n: int = 0  # how many mentions gave them
    strong_types: dict[str, int] = field(default_factory=dict)  # types its mentions show by themselves
    # the qualifiers of the titles of the pages it is the subject of ("footballer" of "Scott Howell
    # (footballer)"), in this run: a page of the same name with another qualifier is another thing
    qualifiers: set[str] = field(default_factory=set)

    def record(self) -> dict:
        rec = {
            "kind": records.ENTITY,
            "key": self.key,
            "name": self.name,
            "type": self.type,
            "norm": self.norm,
            "aliases": list(self.aliases),
            "popularity": round(self.popularity, 4),
        }
        if self.description:
            rec["description"] = self.description
        return rec


ALIAS_PATTERNS = [
    # "Long Name (Short)" / "Long Name (`short`)"
    re.compile(
        r"(?P<long>[A-Z][\w'-]*(?:[ -](?:of |and |for )?[A-Za-z][\w'-]*){0,5})\s+\(\s*`?(?P<short>[A-Za-z][\w.-]{1,24})`?\s*(?:[,;)]|\s+for\s)"
    ),
    # "Short: Short for Long" / "Short is short for Long"
    re.compile(
        r"\**`?(?P<short>[A-Za-z][\w.-]{1,24})`?\**\s*(?::|is|stands\s+for)\s*(?:[Ss]hort\s+for|[Aa]bbreviation\s+(?:of|for))\s+(?:the\s+)?(?P<long>[A-Z][\w'-]*(?:\s+[A-Za-z][\w'-]*){0,5})"
    ),
    # "Long, usually written Short" / "Long, also called Short" / "Long (also known as Short)"
    re.compile(
        r"(?P<long>[A-Z][\w'-]*(?:\s+[A-Za-z][\w'-]*){0,5}),?\s+(?:usually|often|commonly|also)\s+(?:written|called|known\s+as|abbreviated(?:\s+as)?|referred\s+to\s+as)\s+\**`?(?P<short>[A-Za-z][\w.-]{1,30})`?"
    ),
]
ID_AFTER_NAME = re.compile(
    r"(?P<long>(?:[A-Z][\w'-]*\s+){1,5}(?:Policy|Standard|Procedure|Policies|Guideline|Guidelines|Plan|Agreement|Charter))\s+\((?P<id>[A-Z][A-Z0-9]{1,9}-\d{1,6})\)"
)
SUBJECT_ALIAS = re.compile(
    r"(?:[Ss]hort\s+name|[Aa]bbreviation|[Aa]lso\s+known\s+as|[Aa]ka|[Rr]epository|[Rr]epo|[Cc]ode\s+name|[Ss]ervice\s+id|[Ii]d)\s*:?\**\s*:?\s*\**`?(?P<short>[A-Za-z][\w.-]{1,30})`?"
)


def declared_short_form(short: str, long: str) -> bool:
    """Looser than is_abbreviation, for forms the text declares ("SETL: short for Settlement Engine"):
    same first letter, and the letters of the short form appear in order in the long one."""
    s, full = norm(short), norm(long)
    return bool(s) and len(s) < len(full) and s[0] == full[0] and _subseq(s, full)


def learn_aliases(text: str, subject: str | None) -> list[tuple[str, str]]:
    """(short, long) pairs the text itself declares."""
    pairs = []
    for i, rx in enumerate(ALIAS_PATTERNS):
        check = is_abbreviation if i == 0 else declared_short_form
        for m in rx.finditer(text):
            long, short = m.group("long").strip(), m.group("short").strip()
            long = _trim_long(long, short, check)
            if long:
                pairs.append((short, long))
    # "Access Control Policy (POL-003)": a document id in parentheses names the thing before it
    for m in ID_AFTER_NAME.finditer(text):
        pairs.append((m.group("id"), m.group("long")))
    if subject:
        for m in SUBJECT_ALIAS.finditer(text):
            short = m.group("short").strip()
            if declared_short_form(short, subject) or norm(short).startswith(norm(subject)[:4]):
                pairs.append((short, subject))
        lead = lead_name(text, subject)
        if lead:
            pairs.append((subject, lead))
    return pairs


def _personal_name(name: str) -> bool:
    """Two words or more, the last capitalised: how a person's name is written ("Maren van
    Holt"), unlike a species or a topic typed PERSON by mistake ("Velora minima")."""
    words = name.split()
    return len(words) >= 2 and words[-1][:1].isupper()


# the name a page's first sentence is about: "Forge (`forge-ci`) is ...", "The Quay Gateway was ..."
LEAD_NAME = re.compile(
    r"(?:The\s+)?\**`?(?P<name>[A-Z][\w.'’-]*(?:\s+[A-Z][\w.'’-]*){0,3})`?\**(?:\s*\([^()]*\))?\s+(?:is|are|was|were)\s"
)


FIRST_PARAGRAPH_CHARS = 5000  # where a page's first paragraph of prose is looked for


def _first_paragraph(text: str, title: str = "") -> str:
    """The first paragraph of prose: not a heading, a table, markup, or the title on its own line."""
    for para in re.split(r"\n\s*\n", text[:FIRST_PARAGRAPH_CHARS]):
        para = para.strip()
        if para and not para.startswith(("#", "|", "<", "---", "```")) and para.lower() != title.strip().lower():
            return para
    return ""


def lead_name(text: str, subject: str) -> str | None:
    """The shorter name the first sentence gives the page's subject, when the title adds only
    the class that sentence says it is: "# Forge CI" over "Forge (`forge-ci`) is the continuous
    integration system ..." ("CI" abbreviates "continuous integration"), "# Quay storage
    engine" over "Quay is the storage engine of ...". The two name one thing. A title that adds
    anything the sentence does not say ("Quay Service Runbook" over "Quay Service is ...")
    names another."""
    sentence = re.split(r"(?<=[.!?])\s", _first_paragraph(text, subject), maxsplit=1)[0]
    m = LEAD_NAME.match(sentence)
    if not m:
        return None
    name = m.group("name")
    short, long = tokens(name), tokens(subject)
    if not short or len(short) >= len(long) or long[: len(short)] != short:
        return None
    rest = subject.split()[len(name.split()) :]
    if len(rest) != len(long) - len(short):  # the title's words and its tokens do not line up
        return None
    if any(w.lower() in stop_words() for w in rest):  # "Quay and Weir", "Boxing in Armenia": more than one thing
        return None
    said = [w.lower() for w in re.findall(r"[\w'’-]+", sentence[m.end() :])]
    words = {singular(w) for w in said}
    if all(singular(w.lower()) in words for w in rest):
        return name
    if len(rest) == 1 and rest[0].isupper() and 2 <= len(rest[0]) <= 5:
        runs = (" ".join(said[i : i + n]) for n in range(len(rest[0]), 1, -1) for i in range(len(said) - n + 1))
        if any(len(run.split()) == len(rest[0]) and is_abbreviation(rest[0], run) for run in runs):
            return name
    return None


def _trim_long(long: str, short: str, check=None) -> str:
    """ "Recently the Payments Platform" -> the longest tail that the short form abbreviates."""
    check = check or is_abbreviation
    words = long.split()
    for i in range(len(words)):
        cand = " ".join(words[i:])
        if cand and cand[0].isupper() and check(short, cand):
            return cand
    return ""


class Linker:
    """Canonical entities for a stream of documents, optionally seeded from a database."""

    def __init__(
        self,
        entities: Iterable[dict] = (),
        *,
        threshold: float = THRESHOLD,
        vectors=None,
        votes=None,
        typer: entitytypes.Typer | None | str = "default",
    ):
        """``vectors(entity, surface, string_sim) -> cosine`` supplies the cosine term from entity
        vectors (see :class:`kgr.ingest.graphbuild.EntityVectors`); it returns ``string_sim`` for an
        entity that has no vector yet. ``votes(key) -> (surface votes, type votes)`` gives a
        seeded entity the votes of the documents linked before (asked once, when a document
        first links to it), so its name and type are decided by all of them; a third item, when
        given, is (typing feature counts, their number of mentions, strong types) of those mentions.
        ``typer`` decides an entity's type from the features of all its mentions
        (:mod:`kgr.stages.entitytypes`; "default": the packaged model; None: a vote of the
        mentions' types)."""
        self.threshold = threshold
        self.typer = entitytypes.default_typer() if typer == "default" else typer
        self.vectors = vectors
        self.votes = votes
        self._unvoted: set[str] = set()
        self.entities: dict[str, Entity] = {}
        self.by_norm: dict[str, str] = {}
        self.same_norm: dict[str, list[str]] = {}  # every entity a name or alias norm names (homonyms)
        self.by_token: dict[str, set[str]] = {}
        self.aliases: dict[str, str] = {}  # norm of a learned alias -> norm of its long form
        self.pending_long: dict[str, str] = {}  # long forms declared before any mention of them
        for rec in entities:
            ent = Entity(
                rec["key"],
                rec["name"],
                rec["type"],
                rec.get("norm") or norm(rec["name"]),
                list(rec.get("aliases") or []),
                rec.get("description"),
                rec.get("popularity") or 0.0,
                origin=rec.get("origin", "extracted"),
            )
            self._index(ent)
            if votes is not None:
                self._unvoted.add(ent.key)

    # -- index -----------------------------------------------------------------------

    def _index(self, ent: Entity) -> None:
        self.entities[ent.key] = ent
        for surface in [ent.name, *ent.aliases]:
            n = norm(surface)
            if n:
                self._index_norm(n, ent.key)
            for t in tokens(surface):
                self.by_token.setdefault(t, set()).add(ent.key)

    def _add_alias(self, ent: Entity, surface: str) -> bool:
        if surface in ent.aliases or surface == ent.name:
            return False
        ent.aliases.append(surface)
        n = norm(surface)
        if n:
            self._index_norm(n, ent.key)
        for t in tokens(surface):
            self.by_token.setdefault(t, set()).add(ent.key)
        return True

    def _index_norm(self, n: str, key: str) -> None:
        for probe in (n, singular(n)):
            self.by_norm.setdefault(probe, key)
            keys = self.same_norm.setdefault(probe, [])
            if key not in keys:
                keys.append(key)

    # -- linking -------------------------------------------------------------------------

    def candidates(self, surface: str) -> list[tuple[str, float]]:
        """(entity key, string similarity) for the entities a surface could name."""
        n = norm(surface)
        out: dict[str, float] = {}
        for probe in (n, singular(n)):
            for key in self.same_norm.get(probe, ()):
                if key in self.entities:
                    out[key] = 1.0
            if probe in self.aliases and self.aliases[probe] in self.by_norm:
                out[self.by_norm[self.aliases[probe]]] = 1.0
        if out:
            return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))
        core = unversioned(surface)
        if core != surface and norm(core) in self.by_norm:
            return [(self.by_norm[norm(core)], 0.95)]
        special = self._special_candidates(surface)
        if special:
            return special
        if numbered(surface):
            return []  # "ADR-019" is not a typo of "ADR-012", nor "Strauss II" of "Strauss III": numbers match exactly
        if identifier(surface):
            return []  # "Set-Item" is no typo of "Get-Item", nor "Get-ItemProperty" a longer "Get-Item"
        toks = set(tokens(surface))
        keys: set[str] = set()
        for t in toks:
            keys |= self.by_token.get(t, set())
        from rapidfuzz.distance import Levenshtein

        for key in sorted(keys):
            ent = self.entities[key]
            best = 0.0
            for name in [ent.name, *ent.aliases]:
                en = norm(name)
                if numbered(name) or identifier(name):
                    continue
                et = set(tokens(name))
                if len(n) >= 5 and Levenshtein.distance(n, en, score_cutoff=1) <= 1:
                    best = max(best, 0.9)
                if toks and et:
                    jac = len(toks & et) / len(toks | et)
                    if jac >= 0.6:
                        best = max(best, 0.5 + 0.4 * jac)
                    # "Ledger" for "Ledger Service": the rest is a generic head noun
                    if (
                        toks < et
                        and (et - toks) <= GENERIC_HEADS
                        and list(tokens(name))[: len(toks)] == tokens(surface)
                    ):
                        best = max(best, 0.85)
            if best:
                out[key] = best
        return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))

    def _special_candidates(self, surface: str) -> list[tuple[str, float]]:
        """Code names and contractions ("order-intake", "CoreInfra") of a multi-word name, and
        first names of people: linked only when exactly one entity fits."""
        words = surface.split()
        fits: list[str] = []
        if len(words) == 1 and (re.search(r"[-_]", surface) or re.search(r"[a-z][A-Z]", surface)):
            first = norm(surface)[:1]
            for key, ent in self.entities.items():
                if any(
                    len(name.split()) > 1 and norm(name)[:1] == first and is_abbreviation(surface, name)
                    for name in (ent.name, *ent.aliases)
                ):
                    fits.append(key)
        elif len(words) == 1 and surface[:1].isupper() and surface[1:].islower():
            n = norm(surface)
            fits = [
                k
                for k, e in self.entities.items()
                if e.type == "PERSON" and _personal_name(e.name) and norm(e.name.split()[0]) == n
            ]
        if len(fits) == 1:
            return [(fits[0], 0.9)]
        return []

    def score(self, ent: Entity, string_sim: float, mtype: str, doc_path: str, surface: str = "") -> float:
        tp = (
            1.0
            if mtype == ent.type
            else 0.5
            if "CONCEPT" in (mtype, ent.type) or {mtype, ent.type} <= {"ORG", "PRODUCT", "SERVICE", "COMPONENT", "TEAM"}
            else 0.0
        )
        ctx = 1.0 if doc_path in ent.docs else 0.0
        pop = min(1.0, math.log1p(ent.popularity) / math.log(50))
        # The cosine term comes from entity vectors for the loose string matches (shared words,
        # one edit); exact names, declared aliases and the structural matches (code names,
        # a person's first name, >= 0.9) are better evidence than a short name's embedding.
        # Without an entity vector, the string similarity stands in for the cosine.
        cos = string_sim
        if self.vectors is not None and string_sim < STRUCTURAL:
            cos = self.vectors(ent, surface, string_sim)
        return 0.45 * cos + 0.25 * string_sim + 0.15 * tp + 0.10 * ctx + 0.05 * pop

    def current_type(self, ent: Entity) -> str:
        """The entity's type from all its mentions linked so far."""
        if self.typer is not None and ent.type_n:
            return self.typer.predict(entitytypes.entity_features(ent.type_feats, ent.type_n))[0]
        return ent.type

    def _signature_ok(self, r: dict, src: Entity, dst: Entity) -> bool:
        """Can these entities hold the relation ``r``? Only what can never hold it is refused (a
        person or a date is no place to be located in), and only when the mentions the relation
        was read from agree: the type model is less sure of places and owners on text unlike what
        it was trained on ("Guilderland" a person over a page of Wikipedia), where the mention's
        own type (spaCy's place) is the better evidence. The mentions' types are read first: they
        are on the record, where the entities' mean running the type model."""
        if _signature_fits(r["rel"], r.get("src_type"), r.get("dst_type")):
            return True
        return _signature_fits(r["rel"], self.current_type(src), self.current_type(dst))

    def link(self, surface: str, mtype: str, doc_path: str, strong: str | None = None) -> tuple[Entity, float, bool]:
        """Return (entity, link score, created) for a mention. An exact name or alias links
        unless the text shows two things: the mention's own strong type evidence (``strong``,
        see :func:`entitytypes.strong_type`) against the entity's."""
        cands = self.candidates(surface)
        best, best_score = None, 0.0
        for key, sim in cands:
            ent = self.entities[key]
            if sim >= 1.0 and not _conflict(strong, ent):
                s = max(0.9, self.score(ent, sim, mtype, doc_path, surface))
            else:
                s = self.score(ent, sim, mtype, doc_path, surface)
            if s > best_score:
                best, best_score = ent, s
        if best is not None and best_score >= self.threshold:
            return best, best_score, False
        ent = self._new(surface, mtype)
        return ent, 1.0, True

    def _new(self, surface: str, mtype: str) -> Entity:
        n = norm(surface) or surface.lower()
        key = n
        i = 2
        while key in self.entities:
            key = f"{n}~{i}"
            i += 1
        ent = Entity(key, " ".join(surface.split()), mtype, n, [])
        self._index(ent)
        return ent

    # -- one document ------------------------------------------------------------------------

    def learn(self, text: str, subject: str | None) -> None:
        """Remember the aliases a text declares ("Order Intake Service (OIS)")."""
        for short, long in learn_aliases(text, subject):
            self.declare(short, long)

    def declare(self, short: str, long: str) -> None:
        """Remember one declared alias: ``short`` names ``long``."""
        self.aliases.setdefault(norm(short), norm(long))
        if norm(long) not in self.by_norm:
            self.pending_long.setdefault(norm(long), long)

    def link_doc(
        self, doc: dict | None, mentions: list[dict], relations: list[dict], chunk_starts: dict[str, int] | None = None
    ) -> list[dict]:
        """Link one document's mentions and relations. ``chunk_starts`` (chunk id -> its offset in
        the document's text) lets the words around each mention be read for its entity's type."""
        path = doc["path"] if doc else ""
        text = (doc or {}).get("text") or ""
        common = entitytypes.lower_words(text)
        contexts: dict[int, dict] = {}  # what typing reads beyond the mention record: kept with it
        for i, m in enumerate(mentions):
            extra = {}
            at = (chunk_starts or {}).get(m.get("chunk"))
            if at is not None and text and m.get("start") is not None:
                extra["ctx"] = entitytypes.context(text, at + m["start"], at + m["end"])
            if text and m.get("source") != "coref":
                extra["common"] = entitytypes.commonness(m["surface"], common)
            if extra:
                contexts[i] = extra
        subject = _subject_surface(doc, mentions)
        core, qualifier = _qualified((doc or {}).get("title") or "")
        core = norm(core)
        if doc is not None:
            self.learn(doc.get("text", ""), subject)
        touched: dict[str, Entity] = {}
        by_surface: dict[str, Entity] = {}
        out_mentions = []
        # names before pronouns, long surfaces before short ones: full names found the entities
        order = sorted(
            range(len(mentions)), key=lambda i: (mentions[i].get("source") == "coref", -len(mentions[i]["surface"]), i)
        )
        linked: dict[int, tuple[Entity, float]] = {}
        for i in order:
            m = mentions[i]
            surface = m.get("refers_to") or m["surface"]
            mtype = m.get("type") or "CONCEPT"
            strong = entitytypes.strong_type(m["surface"], mtype, m.get("source"), m.get("features"))
            if surface in by_surface:
                ent, score = by_surface[surface], 1.0
            else:
                base = (m.get("features") or {}).get("base")
                long_norm = self.aliases.get(norm(surface))
                if long_norm and long_norm not in self.by_norm and long_norm in self.pending_long:
                    ent = self._new(self.pending_long[long_norm], m.get("type") or "CONCEPT")
                    score = 1.0
                elif base and self.candidates(base) and self.candidates(base)[0][1] >= 1.0:
                    ent, score, _ = self.link(base, mtype, path, strong)
                else:
                    ent, score, _ = self.link(surface, mtype, path, strong)
                if qualifier and m.get("source") != "coref" and norm(surface) == core:
                    if ent.qualifiers and qualifier not in ent.qualifiers:
                        ent, score = self._new(surface, mtype), 1.0  # "Scott Howell (political consultant)"
                    ent.qualifiers.add(qualifier)
                # a learned alias points a new short form at its long form
                long_norm = self.aliases.get(norm(surface))
                if long_norm and long_norm in self.by_norm and self.by_norm[long_norm] != ent.key and _fresh(ent):
                    self._forget(ent)
                    ent = self.entities[self.by_norm[long_norm]]
                by_surface[surface] = ent
            if m.get("source") != "coref":
                written = " ".join(m["surface"].split())  # a name the text wrapped is named on one line
                if self._add_alias(ent, written):
                    touched[ent.key] = ent
                ent.surface_votes[written] = ent.surface_votes.get(written, 0) + 1
                ent.type_votes[m.get("type") or "CONCEPT"] = ent.type_votes.get(m.get("type") or "CONCEPT", 0) + m.get(
                    "score", 0.5
                )
            features = {**(m.get("features") or {}), **contexts.get(i, {})}
            entitytypes.add_mention(
                ent.type_feats,
                entitytypes.mention_features(m["surface"], mtype, m.get("source"), features, features.get("ctx")),
            )
            ent.type_n += 1
            if strong:
                ent.strong_types[strong] = ent.strong_types.get(strong, 0) + 1
            ent.popularity += 1
            ent.docs.add(path)
            touched[ent.key] = ent
            linked[i] = (ent, score)
        for i, m in enumerate(mentions):
            ent, score = linked[i]
            rec = {**m, "entity": ent.key, "link_score": round(score, 4)}
            if i in contexts:  # kept, so that a later run reads this mention's typing features from the store
                rec["features"] = {**(m.get("features") or {}), **contexts[i]}
            out_mentions.append(rec)
        out_relations = []
        for r in relations:
            src = by_surface.get(r["src"]) or self.link(r["src"], r.get("src_type") or "CONCEPT", path)[0]
            dst = by_surface.get(r["dst"]) or self.link(r["dst"], r.get("dst_type") or "CONCEPT", path)[0]
            touched[src.key], touched[dst.key] = src, dst
            if src.key == dst.key:
                continue
            if str(r.get("pattern", "")).startswith("learned:") and not self._signature_ok(r, src, dst):
                continue  # the classifier alone said it, and the entities' types cannot hold it
            out_relations.append(
                {**r, "src": src.key, "dst": dst.key, "src_surface": r["src"], "dst_surface": r["dst"]}
            )
        for ent in touched.values():
            self._settle(ent)
        entity_records = [self.entities[k].record() for k in sorted(touched) if k in self.entities]
        return entity_records + out_mentions + out_relations

    def _settle(self, ent: Entity) -> None:
        """Type by weighted vote; name: the most used multi-word surface, else the most used one."""
        if ent.key in self._unvoted:
            self._unvoted.discard(ent.key)
            surfaces, types, *typing = self.votes(ent.key)
            for surface, n in surfaces.items():
                ent.surface_votes[surface] = ent.surface_votes.get(surface, 0) + n
            for typ, w in types.items():
                ent.type_votes[typ] = ent.type_votes.get(typ, 0) + w
            if typing:
                counts, n, strong = typing[0]
                for f, c in counts.items():
                    ent.type_feats[f] = ent.type_feats.get(f, 0.0) + c
                ent.type_n += n
                for typ, c in strong.items():
                    ent.strong_types[typ] = ent.strong_types.get(typ, 0) + c
        if self.typer is not None and ent.type_n and ent.type_votes:
            ent.type = self.typer.predict(entitytypes.entity_features(ent.type_feats, ent.type_n))[0]
        elif ent.type_votes:
            ent.type = max(sorted(ent.type_votes), key=lambda t: ent.type_votes[t])
        if ent.surface_votes and ent.origin != "manual":
            # a release's mentions name the product too: "Windows PowerShell" counts the mentions
            # of "Windows PowerShell 3.0" and "Windows PowerShell 5.1" linked with it
            releases: dict[str, int] = {}
            for s, v in ent.surface_votes.items():
                core = unversioned(s)
                if core != s and core in ent.surface_votes:
                    releases[core] = releases.get(core, 0) + v
            most = max(v + releases.get(s, 0) for s, v in ent.surface_votes.items())

            def rank(s: str):
                votes = ent.surface_votes.get(s, 0) + releases.get(s, 0)
                full = len(s.split()) > 1 and s[:1].isupper() and 2 * votes >= most
                return (full, votes, len(s), s)

            best = max(ent.surface_votes, key=rank)
            if best != ent.name and (ent.name not in ent.surface_votes or rank(best) > rank(ent.name)):
                if ent.name not in ent.aliases:
                    ent.aliases.append(ent.name)
                ent.name = best
                if best in ent.aliases:
                    ent.aliases.remove(best)

    def _forget(self, ent: Entity) -> None:
        self.entities.pop(ent.key, None)
        for n, k in list(self.by_norm.items()):
            if k == ent.key:
                del self.by_norm[n]
        for keys in self.same_norm.values():
            if ent.key in keys:
                keys.remove(ent.key)
        for keys in self.by_token.values():
            keys.discard(ent.key)


def _fresh(ent: Entity) -> bool:
    return ent.popularity == 0 and ent.origin != "manual"


# Types that one real thing can be given by different mentions (a team is also written about as
# an organisation; a service, its component or the product it is sold as): no evidence of two things.
TYPE_GROUPS = {
    "PERSON": "person",
    "ORG": "org",
    "TEAM": "org",
    "SERVICE": "system",
    "COMPONENT": "system",
    "PRODUCT": "system",
    "API": "system",
    "LOCATION": "place",
    "STANDARD": "rule",
    "POLICY": "rule",
    "VERSION": "version",
    "DATE": "date",
}


def _incompatible(a: str, b: str) -> bool:
    """Can a thing of type ``a`` not be a thing of type ``b``? (CONCEPT goes with any.)"""
    ga, gb = TYPE_GROUPS.get(a), TYPE_GROUPS.get(b)
    return ga is not None and gb is not None and ga != gb


def _conflict(strong: str | None, ent: Entity) -> bool:
    """Evidence of two things behind one name: the mention shows a type by itself (a head noun,
    a regex family) that none of the entity's own strong evidence is compatible with. The
    types spaCy or a capitalised run suggest are not such evidence: they differ from one
    document to the next for the same thing."""
    if strong is None or not ent.strong_types:
        return False
    return all(_incompatible(strong, t) for t in ent.strong_types)


# "(1972 film)", "(footballer)", "(deprecated)": tells a title from others of its name, names nothing
QUALIFIER = re.compile(r"\s*\(([^()]*)\)$")


def _qualified(title: str) -> tuple[str, str | None]:
    """A title's name and the qualifier that tells it from others of that name, lower case:
    "Scott Howell (footballer)" -> ("Scott Howell", "footballer"); (title, None) without one."""
    title = title.strip()
    m = QUALIFIER.search(title)
    qualifier = " ".join(m.group(1).lower().split()) if m else ""
    if not qualifier or not title[: m.start()]:
        return title, None
    return title[: m.start()], qualifier


def _subject_surface(doc: dict | None, mentions: list[dict]) -> str | None:
    if doc is None:
        return None
    title = (doc.get("title") or "").lower()
    names = [
        m["surface"]
        for m in mentions
        if m.get("source") != "coref" and m["surface"].lower() in title and len(m["surface"]) > 2
    ]
    return max(names, key=len) if names else None


def link(recs: Iterable[dict], *, linker: Linker | None = None) -> Iterator[dict]:
    """The stage: each document's mentions and relations get entity keys; entity records precede them."""
    linker = linker or Linker()
    doc: dict | None = None
    mentions: list[dict] = []
    relations: list[dict] = []

    chunk_starts: dict[str, int] = {}

    def flush() -> Iterator[dict]:
        nonlocal mentions, relations
        if mentions or relations:
            yield from linker.link_doc(doc, mentions, relations, chunk_starts)
        mentions, relations = [], []

    for rec in recs:
        kind = rec.get("kind")
        if kind == records.CHUNK and rec.get("start") is not None:
            chunk_starts[records.chunk_id(rec.get("doc", ""), rec.get("ord", 0))] = rec["start"]
        if kind == records.MENTION and "entity" not in rec:
            mentions.append(rec)
        elif kind == records.RELATION and "src_surface" not in rec:
            relations.append(rec)
        else:
            yield from flush()
            if kind == records.DOC:
                doc = rec
                chunk_starts = {}
            yield rec
    yield from flush()


def _signature_fits(rel: str, src_type: str | None, dst_type: str | None) -> bool:
    """Can things of these types hold a relation of this type? Only what never can is refused."""
    if rel == "located_in":
        return dst_type not in ("PERSON", "DATE", "VERSION", "API")
    if rel == "owned_by":
        return dst_type not in ("DATE", "VERSION", "STANDARD", "API")
    if rel == "part_of" and src_type == "PERSON":
        return dst_type not in ("PERSON", "DATE", "VERSION")
    return True
