"""GitHub tools: repositories, issues and pull requests, files."""
