"""Readable names for tools and their categories, for cards, approvals and Settings.

The machine name stays the identity (rules, logs, the model); these names are only for
people. A third-party server's name is shown as given, never trusted to mean anything.
"""

from __future__ import annotations

import re

CATEGORY_TITLES: dict[str, str] = {
    "browser": "Browser",
    "calendar": "Calendar",
    "core": "Deskhand",
    "docker": "Docker",
    "fs": "Files",
    "github": "GitHub",
    "integrations": "Connected services",
    "knowledge": "Knowledge",
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

#: Names whose plain reading would be wrong, vague or odd. Each title stands on its own (the
#: chat view shows it without the category), so "Delete" says what it deletes.
_OVERRIDES: dict[str, str] = {
    "browse_tools": "Find tools",
    "get_tool_details": "Read tool details",
    # browser
    "browser_back": "Go back",
    "browser_click": "Click on page",
    "browser_download": "Download file",
    "browser_evaluate": "Run script on page",
    "browser_fill": "Fill in field",
    "browser_forward": "Go forward",
    "browser_navigate": "Open web page",
    "browser_press": "Press key",
    "browser_screenshot": "Take screenshot",
    "browser_scroll": "Scroll page",
    "browser_select": "Choose from list",
    "browser_snapshot": "Read page",
    "browser_tabs": "Manage tabs",
    "browser_type": "Type text",
    "browser_wait": "Wait for page",
    # calendar
    "calendar_list_calendars": "List calendars",
    # docker
    "docker_container_logs": "Read container logs",
    "docker_container_stats": "Container resource use",
    "docker_exec": "Run in container",
    "docker_prune": "Clean up unused items",
    "docker_pull_image": "Download image",
    # files
    "fs_copy": "Copy file",
    "fs_delete": "Delete file",
    "fs_file_info": "File details",
    "fs_list_dir": "List folder",
    "fs_move": "Move file",
    "fs_search": "Find files",
    # github
    "github_comment": "Comment on issue",
    "github_get_issue": "Read issue",
    "github_list_repos": "List repositories",
    "github_read_file": "Read repository file",
    # connected services
    "integration_get_credentials": "Show account settings",
    "integration_is_enabled": "Check service account",
    "integration_list": "List services",
    "list_integration_accounts": "List service accounts",
    "set_active_integration_account": "Switch service account",
    # knowledge
    "knowledge_read": "Read document",
    "knowledge_search": "Search your documents",
    # kubernetes
    "kubectl_apply": "Apply manifest",
    "kubectl_contexts": "List clusters",
    "kubectl_delete": "Delete resource",
    "kubectl_describe": "Describe resource",
    "kubectl_events": "List cluster events",
    "kubectl_exec": "Run in pod",
    "kubectl_get": "Get resources",
    "kubectl_logs": "Read pod logs",
    "kubectl_rollout_restart": "Restart workload",
    "kubectl_rollout_status": "Check rollout",
    "kubectl_scale": "Scale workload",
    "kubectl_top": "Resource use",
    # memory
    "memory_delete": "Forget",
    "memory_list": "List memories",
    "memory_search": "Search memories",
    "memory_store": "Remember",
    "memory_update": "Change memory",
    # reminders
    "reminders_cancel": "Cancel reminder",
    "reminders_create": "Create reminder",
    "reminders_create_recurring": "Create repeating reminder",
    "reminders_list": "List reminders",
    "reminders_snooze": "Snooze reminder",
    # terminal
    "shell_run": "Run a command",
    "shell_code": "Run code",
    "shell_start": "Start background command",
    "shell_send": "Type into background command",
    "shell_read": "Read background output",
    "shell_stop": "Stop background command",
    "shell_list": "List background commands",
    # skills
    "skill_list": "List skills",
    "skill_load": "Load skill",
    "skill_run_script": "Run skill script",
    # slack
    "slack_health": "Check Slack connection",
    "slack_list_channels": "List channels",
    "slack_read_messages": "Read messages",
    "slack_search_users": "Find people",
    "slack_send_message": "Send message",
    # scheduled tasks
    "tasks_create": "Schedule a task",
    "tasks_list": "List scheduled tasks",
    "tasks_pause": "Pause scheduled task",
    "tasks_remove": "Remove scheduled task",
}


def category_title(category: str) -> str:
    """ "fs" → "Files", "mcp:github" → "MCP: github", unknown → "Title case"."""
    if category.startswith("mcp:"):
        return f"MCP: {category.removeprefix('mcp:')}"
    if category == "mcp":
        return "MCP"
    return CATEGORY_TITLES.get(category, category.replace("_", " ").strip().title())


#: Words people write in capitals.
_ACRONYMS = frozenset(
    {"API", "CSV", "DNS", "HTML", "HTTP", "ID", "IP", "JSON", "PDF", "PR", "SQL", "SSH", "URI"}
    | {"URL", "YAML"}
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def tool_title(name: str) -> str:
    """ "fs_edit_file" → "Edit file"; "mcp__github__create_issue" → "Create issue";
    "getUserById" → "Get user by ID"."""
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
    base = _CAMEL.sub("_", base)
    words = [w for w in re.split(r"[\s_\-.:/]+", base) if w]
    if not words:
        return name
    shown = [_word(w) for w in words]
    first = shown[0]
    shown[0] = first if first.isupper() else first[:1].upper() + first[1:]
    return " ".join(shown)


def _word(word: str) -> str:
    """A word as it reads in a title: acronyms in capitals, other capitals only when the
    name had them inside the word ("HTMLParse" stays)."""
    if word.upper() in _ACRONYMS:
        return word.upper()
    return word.lower() if len(word) == 1 or word[1:].islower() else word
