"""Named sub-agents as the user defines them: `deskhand agents …` and the AgentBook save
them in settings.json, refuse a bad definition naming the field at fault in plain words,
leave Deskhand's own agents alone, and a sub-agent's tools never include the forbidden ones
or a third party's tools by category."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from app.core.agent_book import AgentError
from app.core.agents import BUILTIN_AGENTS, tool_names
from app.core.runtime import Runtime
from app.core.settings import AgentDefinition
from tools.registry import ToolRegistry, ToolSource
from tools.spec import Operation, ToolManifest


@pytest.fixture
def cli_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh home for `deskhand --home`, with no keyring of this machine."""
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    home = tmp_path / "cli-home"
    home.mkdir()
    return home


def deskhand(home: Path, *args: str) -> int:
    from app.cli import main

    return main(["--home", str(home), "agents", *args])


def saved_agents(home: Path) -> list[dict[str, Any]]:
    agents: list[dict[str, Any]] = json.loads((home / "settings.json").read_text("utf-8"))["agents"]
    return agents


def errors(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


def fields_refused(err: list[str]) -> set[str]:
    """The fields named by `deskhand: agents: <field>: <message>` lines."""
    assert err and all(line.startswith("deskhand: agents: ") for line in err), err
    return {line.split(": ")[2] for line in err}


# ---- the command line ---------------------------------------------------------------------


def test_add_list_edit_remove_round_trip_in_settings_json(
    cli_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    told = tmp_path / "told.md"
    told.write_text("Summarise each file in three lines.", "utf-8")
    assert (
        deskhand(
            cli_home,
            "add",
            "Summarizer",
            "--description",
            "Summarises files",
            "--instructions-file",
            str(told),
            "--tool",
            "fs_read_file",
            "--tool",
            "fs_write_file",
            "--allow",
            "fs_read_file",
            "--max-steps",
            "5",
        )
        == 0
    )
    assert capsys.readouterr().out == "Added the agent Summarizer\n"
    (saved,) = saved_agents(cli_home)
    assert saved["name"] == "Summarizer" and saved["description"] == "Summarises files"
    assert saved["instructions"] == "Summarise each file in three lines."
    assert saved["tools"] == ["fs_read_file", "fs_write_file"]
    assert saved["allow"] == ["fs_read_file"] and saved["max_steps"] == 5

    assert deskhand(cli_home, "list", "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(a["name"], a["builtin"]) for a in listed] == [
        ("Researcher", True),
        ("Reviewer", True),
        ("Summarizer", False),
    ]
    assert deskhand(cli_home, "list") == 0
    text = capsys.readouterr().out
    assert "Researcher  (built-in)" in text and "\nSummarizer\n" in text
    assert "    tools: fs_read_file, fs_write_file" in text
    assert "    budget: 5 steps, 600 s, 200000 tokens" in text

    # edit by any case; --tool replaces the list, other fields stay
    code = deskhand(
        cli_home, "edit", "summarizer", "--tool", "fs_read_file", "--clear-allow", "--json"
    )
    assert code == 0
    shown = json.loads(capsys.readouterr().out)
    (edited,) = saved_agents(cli_home)
    assert edited["id"] == saved["id"] == shown["id"]
    assert edited["tools"] == ["fs_read_file"] and edited["allow"] == []
    assert edited["instructions"] == saved["instructions"] and edited["max_steps"] == 5

    assert deskhand(cli_home, "edit", "Summarizer", "--rename", "Digest") == 0
    assert [a["name"] for a in saved_agents(cli_home)] == ["Digest"]
    assert deskhand(cli_home, "remove", "DIGEST") == 0
    assert capsys.readouterr().out.endswith("Removed the agent Digest\n")
    assert saved_agents(cli_home) == []


@pytest.mark.parametrize(
    ("options", "field"),
    [
        (["--tool", "no_such_tool"], "tools"),
        (["--tool", "category:nothing"], "tools"),
        (["--tool", "delegate_agent"], "tools"),
        (["--tool", "tasks_create"], "tools"),
        (["--tool", "fs_read_file", "--tool", "tasks*"], "tools"),
        (["--tool", "shell_run", "--allow", "shell_run,command=python3"], "allow"),
        (["--tool", "fs_read_file", "--allow", "fs_write_file"], "allow"),
        (["--allow", "fs_read_file,colour=blue"], "allow"),
        (["--provider", "no-such-account"], "provider"),
        (["--max-steps", "0"], "max_steps"),
        (["--max-seconds", "100000"], "max_seconds"),
    ],
)
def test_a_bad_definition_is_refused_naming_its_field(
    cli_home: Path, capsys: pytest.CaptureFixture[str], options: list[str], field: str
) -> None:
    assert deskhand(cli_home, "add", "Helper", "--description", "Helps", *options) == 2
    assert fields_refused(errors(capsys)) == {field}
    assert not (cli_home / "settings.json").exists()


def test_bad_names_are_refused_in_plain_words(
    cli_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert deskhand(cli_home, "add", "x" * 41, "--description", "Helps") == 2
    assert errors(capsys) == ["deskhand: agents: name: must be at most 40 characters"]
    assert deskhand(cli_home, "add", "../Helper", "--description", "Helps") == 2
    (line,) = errors(capsys)
    assert line.startswith("deskhand: agents: name: use letters, digits, spaces")
    assert deskhand(cli_home, "add", "researcher", "--description", "Mine") == 2
    assert fields_refused(errors(capsys)) == {"name"}


def test_every_problem_is_reported_at_once(
    cli_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = deskhand(
        cli_home,
        "add",
        "Helper",
        "--description",
        "Helps",
        "--tool",
        "no_such_tool",
        "--tool",
        "delegate_agent",
        "--provider",
        "nobody",
    )
    assert code == 2
    err = errors(capsys)
    assert len(err) == 3 and fields_refused(err) == {"tools", "provider"}
    assert "deskhand: agents: provider: there is no provider account 'nobody'" in err


def test_names_are_unique_ignoring_case(cli_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert deskhand(cli_home, "add", "Helper", "--description", "Helps") == 0
    assert deskhand(cli_home, "add", "HELPER", "--description", "Helps too") == 2
    assert errors(capsys) == ["deskhand: agents: name: there is already an agent called 'Helper'"]
    assert deskhand(cli_home, "add", "Other", "--description", "Other") == 0
    assert deskhand(cli_home, "edit", "other", "--rename", "helper") == 2
    assert fields_refused(errors(capsys)) == {"name"}
    assert [a["name"] for a in saved_agents(cli_home)] == ["Helper", "Other"]


def test_deskhands_own_agents_cannot_be_edited_or_removed(
    cli_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert deskhand(cli_home, "edit", "Researcher", "--max-steps", "50") == 2
    (line,) = errors(capsys)
    assert line.startswith("deskhand: agents: name: 'Researcher' ships with Deskhand")
    assert "under another name" in line
    assert deskhand(cli_home, "remove", "reviewer") == 2
    assert fields_refused(errors(capsys)) == {"name"}
    assert deskhand(cli_home, "remove", "Nobody") == 2
    assert errors(capsys) == [
        "deskhand: agents: name: there is no agent 'Nobody' (see: deskhand agents list)"
    ]
    assert not (cli_home / "settings.json").exists()


def test_a_hand_edited_bad_agent_is_left_out_and_the_others_load(
    cli_home: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    good = {"name": "Helper", "description": "Helps", "tools": ["fs_read_file"]}
    bad = {"name": "no/slashes", "description": "Bad"}
    (cli_home / "settings.json").write_text(json.dumps({"agents": [good, bad]}), "utf-8")
    with caplog.at_level(logging.WARNING, logger="app.core.settings"):
        assert deskhand(cli_home, "list", "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [a["name"] for a in listed if not a["builtin"]] == ["Helper"]
    assert any(
        "agents[1]" in r.getMessage()
        and "no/slashes" in r.getMessage()
        and "left out" in r.getMessage()
        for r in caplog.records
    )


# ---- the service --------------------------------------------------------------------------


def test_the_book_checks_against_the_runtimes_provider_accounts(runtime: Runtime) -> None:
    account = runtime.settings.providers[0].id
    book = runtime.agents
    added = book.add(
        AgentDefinition(name="Writer", description="Writes notes", provider=account, model="m")
    )
    assert added.provider == account
    assert book.get("WRITER") == added and book.get("nobody") is None
    assert [a.definition.name for a in book.list() if not a.builtin] == ["Writer"]
    assert book.builtin("researcher") and not book.builtin("Writer")
    assert runtime.settings_store.load().agents == [added]  # saved, and in force
    assert runtime.settings.agents == [added]

    with pytest.raises(AgentError) as refused:
        book.edit("Writer", provider="gone", max_steps=0)
    assert refused.value.problems == [("max_steps", "must be from 1 to 200 (got 0)")]
    with pytest.raises(AgentError) as refused:
        book.edit("Writer", provider="gone")
    assert [f for f, _ in refused.value.problems] == ["provider"]
    assert str(refused.value) == "provider: there is no provider account 'gone'"
    with pytest.raises(AgentError) as refused:
        book.edit("Writer", colour="blue")
    assert refused.value.problems == [("colour", "there is no such field")]

    assert book.edit("writer", provider=None).provider is None
    assert book.remove("Writer").name == "Writer"
    assert runtime.settings.agents == [] and runtime.settings_store.load().agents == []


def test_the_book_lists_deskhands_agents_first_as_copies(runtime: Runtime) -> None:
    listed = runtime.agents.list()
    assert [(a.definition.name, a.builtin) for a in listed] == [
        (a.name, True) for a in BUILTIN_AGENTS
    ]
    listed[0].definition.max_steps = 199
    assert BUILTIN_AGENTS[0].max_steps != 199


def test_an_error_lists_each_problem_on_its_own_line(runtime: Runtime) -> None:
    with pytest.raises(AgentError) as refused:
        runtime.agents.add({"name": "Reviewer", "description": "x", "tools": ["nope"]})
    assert str(refused.value).splitlines() == [
        "name: 'Reviewer' is the name of an agent Deskhand ships",
        "tools: no tool is called 'nope' (see: deskhand tools list)",
    ]


# ---- the tools a sub-agent gets -----------------------------------------------------------


class _NoArgs(BaseModel):
    pass


def _reader(name: str, category: str) -> ToolManifest:
    return ToolManifest(
        name=name,
        category=category,
        description="Reads something.",
        params=_NoArgs,
        operations=frozenset({Operation.READ}),
        impl=lambda args, ctx: "read",
    )


def test_the_researcher_reads_and_never_writes_delegates_or_touches_tasks() -> None:
    registry = ToolRegistry.default(None, entry_points=False)
    registry.add([_reader("delegate_agent", "agents")])  # as if it were a reading tool
    assert {"tasks_list", "fs_write_file", "delegate_agent"} <= set(registry.names())
    researcher = next(a for a in BUILTIN_AGENTS if a.name == "Researcher")
    names = tool_names(researcher, registry)
    assert "fs_read_file" in names
    assert not names & {"fs_write_file", "delegate_agent", "tasks_list"}


def test_a_category_counts_only_deskhands_own_tools() -> None:
    registry = ToolRegistry.default(None, entry_points=False)
    pack = ToolSource("pack", "pack:extra.py", fingerprint="sha256:0", origin="a drop-in file")
    registry.add([_reader("extra_fs_peek", "fs")], pack)
    by_category = tool_names(
        AgentDefinition(name="A", description="d", tools=["category:fs"]), registry
    )
    assert "fs_read_file" in by_category and "fs_write_file" in by_category
    assert "extra_fs_peek" not in by_category
    read_only = tool_names(AgentDefinition(name="A", description="d"), registry)
    assert "fs_read_file" in read_only and "extra_fs_peek" not in read_only
    named = tool_names(
        AgentDefinition(name="A", description="d", tools=["extra_fs_peek"]), registry
    )
    assert "extra_fs_peek" in named
