  $ . "$TESTDIR/setup.sh"

A bad line becomes an error record on stdout, one line on stderr, and exit status 1;
the good records around it still pass:

  $ printf '{"kind":"note"}\nnot json\n{"kind":"note2"}\n' | kgr chunk 2> err
  {"kind":"note"}
  {"kind":"error","stage":"input","message":"line 2: not valid JSON (*)","line":2} (glob)
  {"kind":"note2"}
  [1]
  $ cat err
  input: line 2: not valid JSON (*) (glob)

A binary file with a text extension is skipped with a reason, not parsed:

  $ mkdir kb && printf '\x89PNG\r\n\x1a\n\x00\x00\x00' > kb/image.md && echo '# Fine' > kb/fine.md
  $ kgr normalize kb 2> err | python3 -c 'import json,sys; [print(r["kind"], r.get("reason", r.get("title"))) for r in map(json.loads, sys.stdin)]'
  doc Fine
  error binary
  $ cat err
  normalize: image.md: binary content (png) in a .md file [binary]

A missing path and a usage error:

  $ kgr normalize nowhere.md > /dev/null
  normalize: nowhere.md: no such file or directory [not_found]
  [1]
  $ kgr chunk --overlap 2
  Usage: kgr chunk [OPTIONS] [INPUT]
  Try 'kgr chunk --help' for help.
  
  Error: Invalid value for '--overlap': 2.0 is not in the range 0<=x<=0.5.
  [2]

Closing the pipe early is not an error:

  $ kgr normalize examples/kb | head -c 10 > /dev/null; echo "${PIPESTATUS[0]}"
  0

Questions: an empty one, a database that does not exist, a relation type that does not:

  $ kgr normalize examples/kb/handbook | kgr chunk | kgr load --db q.sqlite
  loaded 4 documents * (glob)
  $ kgr query "" --db q.sqlite
  Error: the query is empty
  [2]
  $ kgr query "fares" --db missing.sqlite
  Error: database not found: missing.sqlite
  Hint: create it with `kgr ingest DIR --db PATH`
  [1]
  $ kgr query "fares" --db q.sqlite --rels likes
  Error: unknown relation type likes
  Hint: known: cites, defines, depends_on, located_in, mentions, owned_by, part_of, precedes, refers_to, same_as, uses
  [2]

A database without vectors still answers by keywords, and says what vector search needs:

  $ kgr query "who do I ask about fares" --db q.sqlite --mode bm25 --k 1 --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["path"])'
  faq.md
  $ kgr query "fares" --db q.sqlite --mode vector
  Error: q.sqlite has no vectors yet
  Hint: run: kgr embed --pending --db q.sqlite
  [2]

A file that is not kgr's is refused, and left as it was; so is an empty one, for reading:

  $ python3 -c 'import sqlite3; sqlite3.connect("notes.db").execute("CREATE TABLE notes(body TEXT)")'
  $ cksum < notes.db > before
  $ kgr ingest examples/kb/handbook --db notes.db --no-embed --no-graph
  Error: notes.db is not a kgr database (application_id 0x00000000, 1 table)
  Hint: give --db a kgr database, or the path of a new file for a new one
  [1]
  $ cksum < notes.db | cmp - before && ls notes.db*
  notes.db
  $ echo 'plain text' > notes.txt
  $ kgr query "fares" --db notes.txt
  Error: notes.txt is not a kgr database (not an SQLite file)
  Hint: give --db a kgr database, or the path of a new file for a new one
  [1]
  $ touch empty.sqlite
  $ kgr query "fares" --db empty.sqlite
  Error: empty.sqlite is empty: not a kgr database yet
  Hint: create it with `kgr ingest DIR --db empty.sqlite`
  [1]
