  $ . "$TESTDIR/setup.sh"

The group's help lists the commands:

  $ kgr --help | head -3
  Usage: kgr [OPTIONS] COMMAND [ARGS]...
  
    kgr: a local-first Knowledge GraphRAG toolchain.

  $ kgr --version
  kgr, version 0.1.0

An unknown command is a usage error (2):

  $ kgr nosuchcommand
  Usage: kgr [OPTIONS] COMMAND [ARGS]...
  Try 'kgr --help' for help.
  
  Error: No such command 'nosuchcommand'.
  [2]

Status on a database that does not exist yet creates it empty (seed 000: "Initialize the
database and report status"); a read command such as query does not create one:

  $ kgr status --db new.sqlite --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["empty"], d["schema_version"] == d["schema_latest"], d["storage"]["auto_vacuum"])'
  True True incremental
  $ kgr status --db new.sqlite | grep '^empty'
  empty      yes: no documents, entities or memories yet (kgr ingest DIR --db DB fills it)
  $ kgr query "fares" --db missing.sqlite
  Error: database not found: missing.sqlite
  Hint: create it with `kgr ingest DIR --db PATH`
  [1]

A database in a folder that does not exist is an error (1) with a hint, and nothing on stdout:

  $ kgr status --db nofolder/missing.sqlite
  Error: database not found: nofolder/missing.sqlite, and its folder nofolder does not exist
  Hint: create the folder first, or give --db a path in an existing folder
  [1]
  $ test -e nofolder || echo "no folder made"
  no folder made
