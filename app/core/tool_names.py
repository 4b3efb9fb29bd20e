"""Readable names for tools and their categories, for cards, approvals and Settings.

The machine name stays the identity (rules, logs, the model); these names are only for
people. A third-party server's name is shown as given, never trusted to mean anything.
"""

from __future__ import annotations

CATEGORY_TITLES: dict[str, str] = {
    "browser": "Browser",
    "calendar": "Calendar",
    "core": "Deskhand",
    "docker": "Docker",
    "fs": "Files",
    "github": "GitHub",
    "integrations": "Connected services",
    "kubectl": "Kubernetes",
    "memory": "Memory",
    "reminders": "Reminders",
    "shell": "Terminal",
    "skills": "Skills",
    "slack": "Slack",
    "tasks": "Scheduled tasks",
}

#: Words a machine name starts with that the category already says.
_PREFIXES = (
    "fs_",
    "browser_",
    "calendar_",
    "docker_",
    "github_",
    "kubectl_",
    "memory_",
    "reminders_",
    "shell_",
    "skill_",
    "slack_",
    "tasks_",
)

#: Names whose plain reading would be wrong or odd.
_OVERRIDES: dict[str, str] = {
    "browse_tools": "Browse tools",
    "get_tool_details": "Read tool details",
    "shell_run": "Run a command",
    "shell_code": "Run code",
    "shell_start": "Start a terminal session",
    "shell_send": "Type into a terminal",
    "shell_read": "Read terminal output",
    "shell_stop": "Stop a terminal session",
    "shell_list": "List terminal sessions",
    "docker_exec": "Run in container",
    "kubectl_exec": "Run in pod",
    "browser_evaluate": "Run script on page",
    "reminders_create": "Create reminder",
    "reminders_create_recurring": "Create repeating reminder",
    "reminders_cancel": "Cancel reminder",
    "reminders_snooze": "Snooze reminder",
    "reminders_list": "List reminders",
    "tasks_create": "Schedule a task",
    "tasks_list": "List scheduled tasks",
    "tasks_pause": "Pause scheduled task",
    "tasks_remove": "Remove scheduled task",
    "memory_store": "Remember",
    "integration_get_credentials": "Use account credentials",
}


def category_title(category: str) -> str:
    """ "fs" → "Files", "mcp:github" → "MCP: github", unknown → "Title case"."""
    if category.startswith("mcp:"):
        return f"MCP: {category.removeprefix('mcp:')}"
    if category == "mcp":
        return "MCP"
    return CATEGORY_TITLES.get(category, category.replace("_", " ").strip().title())


def tool_title(name: str) -> str:
    """ "fs_write_file" → "Write file"; "mcp__github__create_issue" → "Create issue"."""
    if name in _OVERRIDES:
        return _OVERRIDES[name]
    base = name
    if name.startswith("mcp__") and name.count("__") >= 2:
        base = name.split("__", 2)[2]
    else:
        for prefix in _PREFIXES:
            if name.startswith(prefix) and len(name) > len(prefix):
                base = name[len(prefix) :]
                break
    words = base.replace("-", "_").replace(".", "_").split("_")
    text = " ".join(w for w in words if w)
    return text[:1].upper() + text[1:] if text else name
