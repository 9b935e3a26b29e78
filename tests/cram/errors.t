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
