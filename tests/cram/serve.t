kgr serve through the official MCP Inspector (npm @modelcontextprotocol/inspector 1.0.3, CLI
mode), which starts the server over stdio, lists its tools and calls one. .ci/run installs
the Inspector; elsewhere this transcript is skipped when it is missing (exit 80), but not
under CI=true.

  $ . "$TESTDIR/setup.sh"
  $ INSPECTOR=$(command -v mcp-inspector || echo "$TESTDIR/../../.ci/node/node_modules/.bin/mcp-inspector")
  $ [ -x "$INSPECTOR" ] || [ "$CI" = true ] || exit 80
  $ kgr ingest examples/kb --db kb.sqlite --no-embed 2> /dev/null

The default profile, graphrag:

  $ "$INSPECTOR" --cli kgr serve --db kb.sqlite --method tools/list 2> /dev/null \
  >   | python3 -c 'import json,sys; print(*sorted(t["name"] for t in json.load(sys.stdin)["tools"]), sep="\n")'
  entity_lookup
  explain_entity
  extract_and_link
  hybrid_query
  ingest_docs
  review_links
  status

A question, answered with the passage's path and why it was chosen:

  $ "$INSPECTOR" --cli kgr serve --db kb.sqlite --method tools/call --tool-name hybrid_query \
  >   --tool-arg 'query=Which team owns the Vehicle Locator Service?' --tool-arg k=1 2> /dev/null \
  >   | python3 -c 'import json,sys; r=json.load(sys.stdin)["structuredContent"]["results"][0]; print(r["path"]); print(r["why"])'
  teams/fleet-operations.md
  keyword match #1; about Fleet Operations, 1 hop away via owned_by

The kb profile: the edges around a concept, exactly as traversed:

  $ "$INSPECTOR" --cli kgr serve --db kb.sqlite --profile kb --method tools/call --tool-name get_related \
  >   --tool-arg 'concept=Vehicle Locator Service' --tool-arg hops=1 2> /dev/null \
  >   | python3 -c 'import json,sys; d=json.load(sys.stdin)["structuredContent"]; [print(e["src_name"], e["rel"], e["dst_name"]) for e in d["edges"]]' \
  >   | grep owned_by
  Vehicle Locator Service owned_by Fleet Operations

A bad argument is a tool error the client sees, with a clear message:

  $ "$INSPECTOR" --cli kgr serve --db kb.sqlite --method tools/call --tool-name hybrid_query \
  >   --tool-arg query=x --tool-arg k=1000 2> /dev/null \
  >   | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["isError"]); print(d["content"][0]["text"])'
  True
  Argument k must be at most 100 (got 1000).
