"""Terminal tools: run commands and code on the user's machine, parsed, sandboxed, approved."""
