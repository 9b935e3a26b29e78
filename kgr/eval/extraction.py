"""`kgr eval extraction`: precision, recall and F1 against a hand-annotated corpus.

The corpus format is that of a golden folder (docs/ plus annotations/ with
mentions.jsonl, entities.jsonl, relations.jsonl; see its README). The documents are
ingested into a scratch database through the normal pipeline, then:

- mentions match on (document, surface, n), where n is the occurrence of the
  surface in the document counted at token boundaries, so the score does not
  depend on how HTML, PDF or DOCX text was laid out;
- canonical entities are scored with B-cubed over the correctly found mentions:
  precision falls when different gold entities share a predicted entity (homonyms
  merged), recall falls when one gold entity is split (aliases not merged); when every
  gold entity is annotated in one document only, predicted entities are taken page by
  page (the corpus cannot say whether two pages' "France" are one thing);
- relations match on (document, source, relation, destination) after mapping each
  predicted entity to the gold entity most of its matched mentions belong to; a gold
  same_as whose two ends were merged into one entity counts as found. The mapping is
  made inside each document first, so a corpus annotated page by page (one gold
  "France" per document) maps one predicted entity onto each page's own;
- entity typing: over the correctly found mentions, the type of the entity kgr linked
  the mention to against the gold entity's type (accuracy, per gold type, confusion).

A gold surface opening with a lower-case "the" ("the United States") is also found by
the name without it, since kgr (like the golden guideline) leaves determiners out of names.

annotations/scope.json, when present, says what the corpus annotates: relations are
scored only for its "relation_types", a predicted relation only when both ends map to
gold entities of its "entity_types" (others are neither right nor wrong), and predicted
mentions kgr types as dates, numbers or versions are not counted when "entity_types"
leaves those types out. A corpus that annotates no mention in any document's title line
(every document opening with a heading) has the predictions made there left out too.
"""

from __future__ import annotations

import collections
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from kgr.errors import KgrError
from kgr.store import Store
from kgr.store.lock import writing

WORD = r"A-Za-z0-9_\u00C0-\u024F"
# Types of values rather than named things: a corpus whose scope.json lists none of them cannot
# judge kgr's mentions of them. kgr types dates DATE and versions VERSION; the others are the
# spellings other type sets give numbers and times.
VALUE_TYPES = ("DATE", "TIME", "VERSION", "NUMBER", "CARDINAL", "ORDINAL", "QUANTITY", "MONEY", "PERCENT")
DETERMINERS = ("the",)


def surface_regex(surface: str) -> re.Pattern:
    return re.compile(rf"(?<![{WORD}])(?<!\d-)" + re.escape(surface) + rf"(?![{WORD}])(?!-\d)")


def occurrence_index(text: str, surface: str, start: int) -> int | None:
    for n, m in enumerate(surface_regex(surface).finditer(text), 1):
        if m.start() == start:
            return n
        if m.start() > start:
            return None
    return None


def _jsonl(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def prf(tp: int, npred: int, ngold: int) -> dict[str, float]:
    p = tp / npred if npred else 0.0
    r = tp / ngold if ngold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {
        "precision": round(p, 4),
        "recall": round(r, 4),
        "f1": round(f, 4),
        "tp": tp,
        "predicted": npred,
        "gold": ngold,
    }


def load_scope(ann: Path) -> dict[str, Any] | None:
    """annotations/scope.json: what the corpus annotates (relation_types, entity_types), or None."""
    path = Path(ann) / "scope.json"
    if not path.exists():
        return None
    scope = orjson.loads(path.read_bytes())
    if not isinstance(scope, dict):
        raise KgrError(f"{path} is not a JSON object", hint='expected {"relation_types": [...], "entity_types": [...]}')
    return scope


def eval_extraction(
    golden: str | Path,
    *,
    db: str | Path | None = None,
    config=None,
    only_docs: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Ingest golden/docs into a scratch database (or `db`) and score it; `only_docs` (paths
    relative to docs/) restricts the scoring, not the ingest, to those documents."""
    golden = Path(golden)
    docs_dir, ann = golden / "docs", golden / "annotations"
    for need in (docs_dir, ann / "mentions.jsonl", ann / "entities.jsonl", ann / "relations.jsonl"):
        if not need.exists():
            raise KgrError(f"{need} not found", hint="--golden takes a folder with docs/ and annotations/")
    tmp = None
    if db is None:
        tmp = tempfile.TemporaryDirectory(prefix="kgr-eval-")
        db = Path(tmp.name) / "golden.sqlite"
    from kgr import config as config_mod
    from kgr.ingest.pipeline import ingest

    cfg = config if config is not None else config_mod.load()
    with writing(db) as store:
        ingest([str(docs_dir)], store, config=cfg)
        result = score(store, ann, only_docs=only_docs)
    if tmp is not None:
        tmp.cleanup()
    return result


def _gold_key(text: str, m: dict) -> list[tuple]:
    """The keys a gold mention matches: its own, and for a surface opening with a lower-case
    determiner ("the United States") the name without it, as kgr's guideline writes names."""
    keys = [(m["doc"], m["surface"], m["n"])]
    head, _, rest = m["surface"].partition(" ")
    start = m.get("start")
    if head in DETERMINERS and rest and start is not None and text[start : start + len(m["surface"])] == m["surface"]:
        n = occurrence_index(text, rest, start + len(head) + 1)
        if n is not None:
            keys.append((m["doc"], rest, n))
    return keys


def score(store: Store, ann: Path, only_docs: Iterable[str] | None = None) -> dict[str, Any]:
    """Score the database against the annotations; `only_docs` restricts gold and predictions to
    those document paths (for cross-validation)."""
    ann = Path(ann)
    keep = None if only_docs is None else set(only_docs)

    def kept(doc: str) -> bool:
        return keep is None or doc in keep

    scope = load_scope(ann)
    scope_rels = set(scope["relation_types"]) if scope and scope.get("relation_types") else None
    scope_types = set(scope["entity_types"]) if scope and scope.get("entity_types") else None
    unjudged_types = set(VALUE_TYPES) - scope_types if scope_types else set()
    gold_mentions = [m for m in _jsonl(ann / "mentions.jsonl") if kept(m["doc"])]
    gold_relations = [r for r in _jsonl(ann / "relations.jsonl") if kept(r["doc"])]
    gold_type = {e["id"]: e.get("type") for e in _jsonl(ann / "entities.jsonl") if "id" in e}
    texts = {p: t for p, t in store.query("SELECT path, text FROM docs WHERE status='ok'") if kept(p)}

    gold_key: dict[tuple, str] = {}
    alternative: dict[tuple, tuple] = {}  # a determiner-less key -> the gold key it stands for
    for m in gold_mentions:
        own, *others = _gold_key(texts.get(m["doc"], ""), m)
        gold_key[own] = m["entity"]
        for other in others:
            alternative.setdefault(other, own)

    titles = _unannotated_titles(texts, gold_mentions)

    # Pronouns and definite descriptions are annotated only in some documents (those whose
    # annotation has any): coreference predictions elsewhere can be neither right nor wrong.
    coref_docs = {m["doc"] for m in gold_mentions if m.get("kind", "name") != "name"}
    pred: dict[tuple, int] = {}
    pred_type: dict[tuple, str | None] = {}
    seen_spans = set()
    unjudged = 0
    rows = store.query(
        'SELECT d.path, c.start + m.start, c.start + m."end", m.entity_id, m.source, m.type, e.type FROM mentions m '
        "JOIN chunks c ON c.id = m.chunk_id JOIN docs d ON d.id = m.doc_id "
        "LEFT JOIN entities e ON e.id = m.entity_id ORDER BY d.path, 2"
    )
    for path, start, end, eid, source, mtype, etype in rows:
        if (path, start, end) in seen_spans or start is None or path not in texts:
            continue
        if source == "coref" and path not in coref_docs:
            continue
        seen_spans.add((path, start, end))
        if unjudged_types and (etype or mtype) in unjudged_types or start < titles.get(path, 0):
            unjudged += 1  # a date where the corpus annotates none, a name in an unannotated title
            continue
        text = texts[path]
        surface = text[start:end]
        n = occurrence_index(text, surface, start)
        if n is None:
            key = (path, surface, -start)  # not at a token boundary: cannot match
        else:
            key = (path, surface, n)
        if key not in gold_key and key in alternative and alternative[key] not in pred:
            key = alternative[key]
        if key not in pred:
            pred[key] = eid
            pred_type[key] = etype

    matched = [(k, pred[k], gold_key[k]) for k in pred if k in gold_key]
    mention = prf(len(matched), len(pred), len(gold_key))
    if scope_types or titles:
        mention["unjudged"] = unjudged

    # B-cubed over matched mentions. A corpus whose every entity is annotated in one document
    # only (Re-DocRED: each page on its own) cannot say whether two pages' "France" are one
    # thing: a predicted entity is then judged page by page.
    gold_docs = collections.defaultdict(set)
    for m in gold_mentions:
        gold_docs[m["entity"]].add(m["doc"])
    per_document = len({m["doc"] for m in gold_mentions}) > 1 and all(len(d) == 1 for d in gold_docs.values())
    by_pred = collections.defaultdict(list)
    by_gold = collections.defaultdict(list)
    for i, (k, p, g) in enumerate(matched):
        by_pred[(k[0], p) if per_document else p].append(i)
        by_gold[g].append(i)
    bp = br = 0.0
    for k, p, g in matched:
        cp, cg = by_pred[(k[0], p) if per_document else p], by_gold[g]
        inter = sum(1 for j in cp if matched[j][2] == g)
        bp += inter / len(cp)
        br += inter / len(cg)
    n = len(matched)
    cp_, cr_ = (bp / n, br / n) if n else (0.0, 0.0)
    canonical = {
        "precision": round(cp_, 4),
        "recall": round(cr_, 4),
        "f1": round(2 * cp_ * cr_ / (cp_ + cr_), 4) if cp_ + cr_ else 0.0,
        "predicted_entities": len(by_pred),
        "gold_entities": len(by_gold),
    }
    if per_document:
        canonical["per_document"] = True

    typing = _typing([(gold_type.get(g), pred_type[k]) for k, _, g in matched])

    # map predicted entities to gold ones by majority, inside each document first (a corpus
    # may annotate each document on its own: one predicted "France" is a gold entity per page)
    votes: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    doc_votes: dict[tuple, collections.Counter] = collections.defaultdict(collections.Counter)
    for k, p, g in matched:
        votes[p][g] += 1
        doc_votes[(k[0], p)][g] += 1
    mapping = {p: c.most_common(1)[0][0] for p, c in votes.items()}
    doc_mapping = {dp: c.most_common(1)[0][0] for dp, c in doc_votes.items()}

    def judged(rel: str, src: str, dst: str) -> bool:
        if scope_rels is not None and rel not in scope_rels:
            return False
        if scope_types is not None:
            return gold_type.get(src) in scope_types and gold_type.get(dst) in scope_types
        return True

    gold_triples = {
        (r["doc"], r["src"], r["rel"], r["dst"]) for r in gold_relations if judged(r["rel"], r["src"], r["dst"])
    }
    pred_triples = set()
    out_of_scope = 0
    for path, src, dst, rel in store.query(
        "SELECT DISTINCT d.path, r.src_id, r.dst_id, r.rel FROM relation_evidence e "
        "JOIN relations r ON r.id = e.relation_id JOIN docs d ON d.id = e.doc_id"
    ):
        if path not in texts:
            continue
        s = doc_mapping.get((path, src)) or mapping.get(src, f"?{src}")
        d = doc_mapping.get((path, dst)) or mapping.get(dst, f"?{dst}")
        if judged(rel, s, d):
            pred_triples.add((path, s, rel, d))
        else:
            out_of_scope += 1
    # a merged rename counts as a found same_as
    for doc, s, rel, d in gold_triples:
        if rel == "same_as":
            ps = {p for p, c in votes.items() if c.get(s)}
            pd = {p for p, c in votes.items() if c.get(d)}
            if ps & pd:
                pred_triples.add((doc, s, rel, d))
    relation = prf(len(pred_triples & gold_triples), len(pred_triples), len(gold_triples))
    by_rel = {}
    for rel in sorted({t[2] for t in gold_triples}):
        g = {t for t in gold_triples if t[2] == rel}
        p = {t for t in pred_triples if t[2] == rel}
        by_rel[rel] = prf(len(g & p), len(p), len(g))
    relation["by_relation"] = by_rel
    result = {"mention": mention, "canonical": canonical, "relation": relation, "typing": typing}
    if scope is not None:
        relation["out_of_scope"] = out_of_scope
        result["scope"] = {"relation_types": sorted(scope_rels or ()), "entity_types": sorted(scope_types or ())}
    if keep is not None:
        result["documents"] = len(texts)
    return result


def _unannotated_titles(texts: dict[str, str], gold_mentions: list[dict]) -> dict[str, int]:
    """{doc: end of its title line} when the corpus leaves titles unannotated: every document
    opens with a Markdown heading and not one gold mention lies in one (Re-DocRED annotates its
    sentences; the title was added when it was converted). Otherwise {}."""
    ends = {}
    for path, text in texts.items():
        if not text.startswith("#"):
            return {}
        end = text.find("\n")
        ends[path] = len(text) if end < 0 else end
    if len(ends) < 3:
        return {}
    for m in gold_mentions:
        end = ends.get(m["doc"])
        if end is None:
            continue
        for n, found in enumerate(surface_regex(m["surface"]).finditer(texts[m["doc"]]), 1):
            if found.start() >= end:
                break
            if n == m["n"]:
                return {}  # a gold mention in a title
    return ends


def _typing(pairs: list[tuple[str | None, str | None]]) -> dict[str, Any]:
    """Entity type of the predicted entity against the gold entity's, over found mentions
    (gold mentions whose entity has no type are left out)."""
    confusion: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for gold, predicted in pairs:
        if gold:
            confusion[gold][predicted or "-"] += 1
    n = sum(sum(c.values()) for c in confusion.values())
    right = sum(c[g] for g, c in confusion.items())
    by_type = {
        g: {"accuracy": round(c[g] / sum(c.values()), 4), "n": sum(c.values())} for g, c in sorted(confusion.items())
    }
    return {
        "accuracy": round(right / n, 4) if n else 0.0,
        "n": n,
        "by_type": by_type,
        "confusion": {g: dict(sorted(c.items())) for g, c in sorted(confusion.items())},
    }


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{'':<12}{'precision':>10}{'recall':>10}{'f1':>8}"]
    for name in ("mention", "canonical", "relation"):
        r = result[name]
        lines.append(f"{name:<12}{r['precision']:>10.3f}{r['recall']:>10.3f}{r['f1']:>8.3f}")
    scope = result.get("scope")
    if scope:
        lines.append("")
        lines.append(
            f"scope: relations {', '.join(scope['relation_types']) or 'all'}; "
            f"entities {', '.join(scope['entity_types']) or 'all'}"
        )
        lines.append(
            f"not judged: {result['mention'].get('unjudged', 0)} predicted mentions (values, titles), "
            f"{result['relation'].get('out_of_scope', 0)} predicted relations"
        )
    by = result["relation"].get("by_relation") or {}
    if by:
        lines.append("")
        lines.append(f"{'relation':<12}{'precision':>10}{'recall':>10}{'f1':>8}{'gold':>6}")
        for rel, r in by.items():
            lines.append(f"{rel:<12}{r['precision']:>10.3f}{r['recall']:>10.3f}{r['f1']:>8.3f}{r['gold']:>6}")
    typing = result.get("typing")
    if typing and typing["n"]:
        lines.append("")
        lines.append(f"entity typing over {typing['n']} found mentions: accuracy {typing['accuracy']:.3f}")
        lines.extend(_confusion_lines(typing["confusion"]))
    return "\n".join(lines)


def _confusion_lines(confusion: dict[str, dict[str, int]]) -> list[str]:
    """Gold type per row, predicted type per column, with each row's accuracy."""
    columns = sorted({p for row in confusion.values() for p in row})
    corner = "gold/kgr"
    width = max([len(c) for c in columns] + [5]) + 1
    first = max([len(g) for g in confusion] + [len(corner)]) + 1
    lines = [f"{corner:<{first}}" + "".join(f"{c:>{width}}" for c in columns) + f"{'acc':>{width}}"]
    for gold, row in confusion.items():
        total = sum(row.values())
        cells = "".join(f"{row.get(c, 0) or '.':>{width}}" for c in columns)
        lines.append(f"{gold:<{first}}{cells}{row.get(gold, 0) / total:>{width}.2f}")
    return lines
