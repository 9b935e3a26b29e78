"""Does the graph look like knowledge? Top entities by degree and a random sample of relations.

    python bench/bench_graph.py --keep /tmp/ps.sqlite
    python bench/graph_report.py /tmp/ps.sqlite [--top 20] [--sample 20] [--seed 20261122]

Degree counts distinct relations (either direction) plus documents that mention the entity.
"""

from __future__ import annotations

import argparse
import random
import textwrap

from kgr.store import Store


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--sample", type=int, default=20)
    ap.add_argument("--seed", type=int, default=20261122)
    args = ap.parse_args()
    with Store(args.db, readonly=True) as store:
        print(f"top {args.top} entities by degree (relations + documents mentioning them)")
        rows = store.query(
            """
            WITH rel AS (SELECT src_id AS id, count(*) AS n FROM relations GROUP BY src_id
                         UNION ALL SELECT dst_id, count(*) FROM relations GROUP BY dst_id),
                 r AS (SELECT id, sum(n) AS n FROM rel GROUP BY id),
                 d AS (SELECT entity_id AS id, count(DISTINCT doc_id) AS n FROM mentions WHERE entity_id IS NOT NULL GROUP BY entity_id)
            SELECT e.name, e.type, coalesce(r.n, 0), coalesce(d.n, 0), coalesce(r.n, 0) + coalesce(d.n, 0) AS deg
            FROM entities e LEFT JOIN r ON r.id = e.id LEFT JOIN d ON d.id = e.id
            ORDER BY deg DESC, e.name LIMIT ?
            """,
            (args.top,),
        )
        print(f"{'entity':<36}{'type':<11}{'relations':>10}{'docs':>7}")
        for name, typ, nrel, ndocs, _ in rows:
            print(f"{name[:35]:<36}{typ:<11}{nrel:>10}{ndocs:>7}")
        ids = [r[0] for r in store.query("SELECT id FROM relations ORDER BY id")]
        rng = random.Random(args.seed)
        pick = sorted(rng.sample(ids, min(args.sample, len(ids))))
        print(f"\n{len(pick)} random relations of {len(ids)} (seed {args.seed}), with their evidence")
        for rid in pick:
            ((s, rel, d, conf),) = store.query(
                "SELECT s.name, r.rel, d.name, r.confidence FROM relations r JOIN entities s ON s.id = r.src_id "
                "JOIN entities d ON d.id = r.dst_id WHERE r.id = ?",
                (rid,),
            )
            ev = store.query(
                "SELECT dc.path, e.sentence, e.pattern FROM relation_evidence e JOIN docs dc ON dc.id = e.doc_id "
                "WHERE e.relation_id = ? ORDER BY e.confidence DESC LIMIT 1",
                (rid,),
            )
            print(f"- {s} --{rel}--> {d}  ({conf:.2f})")
            if ev:
                path, sentence, pattern = ev[0]
                one = " ".join((sentence or "").split())
                print(textwrap.indent(textwrap.shorten(f'"{one}"', 220) + f"  [{path}; {pattern}]", "    "))


if __name__ == "__main__":
    main()
