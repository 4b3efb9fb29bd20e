"""MCP servers as tool categories (docs/architecture.md §2, §5.3).

`config` reads and writes `mcp.json` (no SDK import); `manager` owns the background
loop and is light until a server starts; `connection` and `results` import the `mcp` SDK
and load only when a server is started.
"""
