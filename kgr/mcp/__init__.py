"""``kgr serve``: the MCP server. ``registry`` declares tools and profiles, ``service`` holds what
the tools share, ``tools`` has one module per profile family, ``http`` the HTTP transport and
``server`` builds the MCPServer of a profile and runs it."""
