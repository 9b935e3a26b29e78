  $ . "$TESTDIR/setup.sh"

A real pipe from files to the database:

  $ kgr normalize examples/kb | kgr chunk | kgr load --db kb.sqlite
  loaded 17 documents (*), 0 unchanged, 0 failed, 0 pruned, 0 errors (glob)

Loading the same records again writes nothing:

  $ kgr normalize examples/kb | kgr chunk | kgr load --db kb.sqlite
  loaded 0 documents (0 chunks), 17 unchanged, 0 failed, 0 pruned, 0 errors

Records are JSON Lines that jq (or python) can read; every stage passes other kinds through:

  $ kgr normalize examples/kb/handbook/faq.md --root examples/kb | python3 -c 'import json,sys; r=json.loads(sys.stdin.readline()); print(r["kind"], r["path"], r["title"])'
  doc handbook/faq.md Engineering FAQ

  $ printf '{"kind": "note", "n": 1}\n' | kgr chunk
  {"kind":"note","n":1}

The planted credential in the night-shift notes is redacted before it leaves normalize:

  $ kgr normalize examples/kb/runbooks/night-shift-notes.txt --root examples/kb | grep -c 'AKIAQ7MBT4HARBOR2X9Z'
  0
  [1]
  $ kgr normalize examples/kb/runbooks/night-shift-notes.txt --root examples/kb | grep -o 'REDACTED:[a-z-]*' | sort -u
  REDACTED:aws-access-key-id
  REDACTED:generic-secret

ingest runs the stages in one process; a second run finds nothing to do:

  $ kgr ingest examples/kb --db ingest.sqlite --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["seen"], r["ingested"], r["failed"])'
  17 17 0
  $ kgr ingest examples/kb --db ingest.sqlite --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["seen"], r["unchanged"], r["ingested"])'
  17 17 0
  $ kgr entities "fare engine" --db ingest.sqlite --limit 1
  1.00  Fare Engine  [SERVICE]  (also: *) (glob)

The whole pipeline as filters, graph included:

  $ kgr normalize examples/kb | kgr chunk | kgr extract | kgr link | kgr load --db graph.sqlite
  loaded 17 documents (41 chunks), 0 unchanged, 0 failed, 0 pruned, 0 errors
  $ kgr status --db graph.sqlite --json | python3 -c 'import json,sys; c=json.load(sys.stdin)["counts"]; print(c["entities"] > 50, c["relations"] > 20, c["relation_evidence"] >= c["relations"])'
  True True True
