"""``kgr serve``: the MCP server (``server``) and its tool profiles (``tools``)."""
