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

A database that does not exist is an error (1) with a hint, and nothing on stdout:

  $ kgr status --db missing.sqlite
  Error: database not found: missing.sqlite
  Hint: create it with `kgr ingest DIR --db PATH`
  [1]
