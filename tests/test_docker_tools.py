"""The docker tools against a real, private dockerd (tests/fixtures_docker.py), called through
the real registry and runner; plus `deskhand ask` end to end with the scripted model."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.approval import Verdict
from integrations.spec import Account
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.fixtures_docker import BUSYBOX, TEST_IMAGE, DockerDaemon, busybox_tar
from tests.test_approval import verdict
from tests.test_cli import deskhand, deskhand_env, events_of
from tests.waits import Watch
from tools.registry import ToolRegistry
from tools.runner import ToolRunner, always_asks
from tools.spec import Progress, ToolContext, ToolError, ToolResult

REPO = Path(__file__).resolve().parents[1]

READS = {
    "docker_list_containers",
    "docker_inspect_container",
    "docker_container_logs",
    "docker_container_stats",
    "docker_list_images",
    "docker_list_volumes",
    "docker_list_networks",
}
CHANGES = {
    "docker_start_container",
    "docker_stop_container",
    "docker_restart_container",
    "docker_remove_container",
    "docker_run_container",
    "docker_exec",
    "docker_pull_image",
    "docker_remove_image",
    "docker_prune",
}


# ---- harness ---------------------------------------------------------------------------------


class Tools:
    """Calls tools the way the agent does: registry → runner → ToolResult."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.registry = ToolRegistry.default(None, entry_points=False)
        self.runner = ToolRunner(self.registry)
        self.account: Account | None = None
        self.progress: list[Progress] = []

    def context(self, account: Account | None = None, **kw: Any) -> ToolContext:
        chosen = account or self.account

        def resolve(integration: str) -> Account:
            assert integration == "docker"
            assert chosen is not None
            return chosen

        return ToolContext(
            call_id="t",
            home=self.home,
            account_resolver=resolve,
            integration="docker",
            progress_sink=kw.pop("progress_sink", self.progress.append),
            **kw,
        )

    def call(
        self, name: str, args: dict[str, Any] | None = None, ctx: ToolContext | None = None
    ) -> ToolResult:
        return asyncio.run(self.runner.run(name, args or {}, ctx or self.context()))

    def preview(self, name: str, args: dict[str, Any], ctx: ToolContext | None = None) -> str:
        async def go() -> str | None:
            manifest, params = self.runner.validate(name, args)
            context = ctx or self.context()
            found = await self.runner.classify(manifest, params, context, asks=always_asks)
            return found.preview

        text = asyncio.run(go())
        assert text is not None, f"{name} offers no preview"
        return text


def daemon_account(daemon: DockerDaemon, label: str = "Local Docker") -> Account:
    return Account("local", "docker", label, {"host": daemon.url})


@pytest.fixture(scope="module")
def runner_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("docker-home")


@pytest.fixture
def tools(docker_env: DockerDaemon, runner_home: Path) -> Iterator[Tools]:
    harness = Tools(runner_home)
    harness.account = daemon_account(docker_env)
    yield harness
    harness.runner.shutdown()


@pytest.fixture
def client(docker_env: DockerDaemon) -> Iterator[Any]:
    sdk = docker_env.client()
    yield sdk
    sdk.close()


def start(client: Any, name: str, command: str = "sleep 600", **kw: Any) -> Any:
    """A started container running `command` (through sh) with no network."""
    return client.containers.run(
        TEST_IMAGE, ["sh", "-c", command], name=name, detach=True, network_mode="none", **kw
    )


def finished(client: Any, name: str, command: str) -> Any:
    """A container that ran `command` to its end."""
    container = start(client, name, command)
    container.wait(timeout=30)
    container.reload()
    return container


def state_of(client: Any, name: str) -> dict[str, Any]:
    return client.api.inspect_container(name)["State"]


def import_image(client: Any, reference: str, label: str = "") -> str:
    """Import the busybox file system as `reference` (a distinct label gives a distinct ID)."""
    repository, tag = reference.split(":")
    changes = [f'LABEL variant="{label}"'] if label else None
    client.api.import_image_from_data(
        busybox_tar(BUSYBOX), repository=repository, tag=tag, changes=changes
    )
    return client.images.get(reference).id


# ---- manifests and approval ---------------------------------------------------------------------


def test_manifests_declare_operations_so_reads_run_and_changes_ask():
    registry = ToolRegistry.default(None, entry_points=False)
    manifests = {m.name: m for m in registry.manifests() if m.category == "docker"}
    assert set(manifests) == READS | CHANGES
    for name, manifest in manifests.items():
        expected = Verdict.ALLOW if name in READS else Verdict.ASK
        assert verdict(manifest) is expected, name
        assert manifest.requires == ("docker",) and manifest.integration == "docker"
        assert len(manifest.summary) <= 120, name
    for name in ("docker_remove_container", "docker_run_container", "docker_prune"):
        assert manifests[name].preview is not None
    assert "delete" in manifests["docker_remove_container"].operations
    assert "execute" in manifests["docker_exec"].operations
    assert "execute" in manifests["docker_run_container"].operations


def test_manifest_module_is_cheap():
    code = (
        "import sys, tools.docker.manifest\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'docker'))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert proc.stdout.strip() == "[]"


# ---- reading -----------------------------------------------------------------------------------


def test_list_containers_running_all_and_filtered(tools: Tools, client: Any):
    start(client, "web")
    finished(client, "old-job", "echo done")
    running = tools.call("docker_list_containers")
    assert running.ok, running.error
    assert running.content.startswith(f"Docker host: Local Docker ({tools.account.fields['host']})")
    assert running.data["host"] == "Local Docker"
    assert [c["name"] for c in running.data["containers"]] == ["web"]
    assert "web" in running.content and "old-job" not in running.content
    everything = tools.call("docker_list_containers", {"all": True})
    assert {c["name"] for c in everything.data["containers"]} == {"web", "old-job"}
    exited = tools.call("docker_list_containers", {"all": True, "filters": {"status": "exited"}})
    assert [c["name"] for c in exited.data["containers"]] == ["old-job"]
    assert exited.data["containers"][0]["image"] == TEST_IMAGE


def test_inspect_summarises_and_hides_credential_values(tools: Tools, client: Any):
    start(client, "api", environment={"MODE": "prod", "API_TOKEN": "tok-9f8e7d6c"})
    result = tools.call("docker_inspect_container", {"container": "api"})
    assert result.ok, result.error
    info = result.data["container"]
    assert info["name"] == "api" and info["image"] == TEST_IMAGE and info["state"] == "running"
    assert "MODE=prod" in info["env"] and "API_TOKEN=[redacted]" in info["env"]
    assert "running (started" in result.content
    assert "tok-9f8e7d6c" not in result.content + json.dumps(result.data)
    full = tools.call("docker_inspect_container", {"container": "api", "full": True})
    assert full.data["container"]["Config"]["Image"] == TEST_IMAGE
    assert "tok-9f8e7d6c" not in full.content


def test_logs_tail_is_newest_last(tools: Tools, client: Any):
    finished(client, "counter", "seq 1 500")
    result = tools.call("docker_container_logs", {"container": "counter", "tail": 4})
    assert result.ok, result.error
    assert result.content.splitlines()[-4:] == ["497", "498", "499", "500"]
    assert result.data["lines"] == 4 and result.data["omitted_lines"] == 0
    finished(client, "complainer", "echo oops >&2")
    stderr = tools.call("docker_container_logs", {"container": "complainer"})
    assert stderr.data["text"] == "oops\n"


def test_logs_are_capped_keeping_the_newest_lines(tools: Tools, client: Any):
    finished(client, "chatty", "seq 100000000000 100000009999")  # 130,000 characters
    result = tools.call("docker_container_logs", {"container": "chatty", "tail": None})
    assert result.ok and result.truncated
    lines = result.content.splitlines()
    assert lines[-1] == "100000009999"
    assert "older lines omitted" in result.content
    assert result.data["omitted_lines"] + result.data["lines"] == 10_000
    assert len(result.data["text"]) <= 20_000
    numbers = [int(line) for line in lines if line.isdigit()]
    assert numbers == list(range(numbers[0], 100000010000))  # contiguous, in order


def test_logs_since_and_until_select_a_time_window(tools: Tools, client: Any):
    container = finished(client, "phases", "echo first; sleep 1.2; echo second")
    stamped = tools.call("docker_container_logs", {"container": "phases", "timestamps": True})
    stamps = dict(reversed(line.split(" ", 1)) for line in stamped.data["text"].splitlines())
    assert set(stamps) == {"first", "second"}
    from tools.docker.format import parse_engine_time

    first, second = parse_engine_time(stamps["first"]), parse_engine_time(stamps["second"])
    assert first and second
    middle = (first + (second - first) / 2).isoformat()
    late = tools.call("docker_container_logs", {"container": "phases", "since": middle})
    early = tools.call("docker_container_logs", {"container": "phases", "until": middle})
    assert late.data["text"].split() == ["second"]
    assert early.data["text"].split() == ["first"]
    recent = tools.call("docker_container_logs", {"container": container.name, "since": "1h"})
    assert recent.data["text"].split() == ["first", "second"]
    bad = tools.call("docker_container_logs", {"container": "phases", "since": "yesterdayish"})
    assert not bad.ok and "since" in bad.error and "10m" in bad.error


def test_stats_snapshot_per_running_container(tools: Tools, client: Any):
    start(client, "busy", "while true; do :; done")
    start(client, "idle")
    finished(client, "stopped", "true")
    result = tools.call("docker_container_stats")
    assert result.ok, result.error
    rows = {r["name"]: r for r in result.data["containers"]}
    assert set(rows) == {"busy", "idle"}
    assert rows["busy"]["cpu_percent"] > rows["idle"]["cpu_percent"]
    assert rows["idle"]["memory_bytes"] > 0 and rows["idle"]["pids"] >= 1
    assert "CPU %" in result.content and "MEM USAGE / LIMIT" in result.content
    one = tools.call("docker_container_stats", {"container": "idle"})
    assert [r["name"] for r in one.data["containers"]] == ["idle"]
    refused = tools.call("docker_container_stats", {"container": "stopped"})
    assert not refused.ok and "only running containers" in refused.error


# ---- changing state ------------------------------------------------------------------------------


def test_stop_start_restart_change_the_engine_state(tools: Tools, client: Any):
    start(client, "web")
    before = state_of(client, "web")["StartedAt"]
    assert "Stop (kill after 1 s) container web" in tools.preview(
        "docker_stop_container", {"container": "web", "timeout": 1}
    )
    stopped = tools.call("docker_stop_container", {"container": "web", "timeout": 1})
    assert stopped.ok, stopped.error
    assert state_of(client, "web")["Status"] == "exited"
    assert "Stopped web" in stopped.content
    started = tools.call("docker_start_container", {"container": "web"})
    assert started.ok and state_of(client, "web")["Running"]
    after_start = state_of(client, "web")["StartedAt"]
    assert after_start != before
    restarted = tools.call("docker_restart_container", {"container": "web", "timeout": 0})
    assert restarted.ok, restarted.error
    assert state_of(client, "web")["StartedAt"] != after_start
    assert restarted.data["state"] == "running"


def test_remove_container_previews_and_needs_force_when_running(tools: Tools, client: Any):
    import docker.errors

    start(client, "doomed")
    preview = tools.preview("docker_remove_container", {"container": "doomed"})
    assert "Delete container doomed" in preview and TEST_IMAGE in preview
    assert "without force=true this call will fail" in preview
    refused = tools.call("docker_remove_container", {"container": "doomed"})
    assert not refused.ok and "force=true" in refused.error
    assert state_of(client, "doomed")["Running"]
    removed = tools.call("docker_remove_container", {"container": "doomed", "force": True})
    assert removed.ok, removed.error
    with pytest.raises(docker.errors.NotFound):
        client.containers.get("doomed")


def test_run_detached_starts_a_container(tools: Tools, client: Any):
    args = {
        "image": TEST_IMAGE,
        "command": ["sleep", "600"],
        "name": "bg",
        "env": {"MODE": "test"},
        "network": "none",
        "detach": True,
    }
    result = tools.call("docker_run_container", args)
    assert result.ok, result.error
    assert result.data["name"] == "bg" and result.data["state"] == "running"
    attrs = client.api.inspect_container("bg")
    assert attrs["State"]["Running"] and "MODE=test" in attrs["Config"]["Env"]


def test_run_in_foreground_streams_output_as_progress(tools: Tools, client: Any):
    args = {
        "image": TEST_IMAGE,
        "command": "sh -c 'echo one; echo two; echo three >&2; exit 3'",
        "name": "fg",
        "network": "none",
        "remove": True,
    }
    result = tools.call("docker_run_container", args)
    assert result.ok, result.error
    assert result.data["exit_code"] == 3 and "fg exited with code 3" in result.content
    # stdout and stderr are copied apart, so only lines of one stream keep their order
    messages = [p.message for p in tools.progress]
    assert sorted(messages) == ["one", "three", "two"]
    assert [m for m in messages if m != "three"] == ["one", "two"]
    assert sorted(result.data["output"].splitlines()) == ["one", "three", "two"]
    assert not client.containers.list(all=True, filters={"name": "fg"})  # --rm


def test_run_in_foreground_keeps_the_newest_output_and_caps_progress(tools: Tools):
    args = {
        "image": TEST_IMAGE,
        "command": ["seq", "100000000000", "100000004999"],
        "network": "none",
    }
    result = tools.call("docker_run_container", args)
    assert result.ok, result.error
    assert result.content.splitlines()[-1] == "100000004999"
    assert "earlier lines omitted" in result.content
    assert len(result.data["output"]) <= 20_000
    assert len(tools.progress) == 1001 and "live lines stop here" in tools.progress[-1].message


def test_run_in_foreground_is_killed_at_its_timeout(tools: Tools, client: Any):
    args = {
        "image": TEST_IMAGE,
        "command": "sh -c 'echo started; sleep 600'",
        "name": "slow",
        "network": "none",
        "timeout": 1,
    }
    began = time.monotonic()
    result = tools.call("docker_run_container", args)
    assert time.monotonic() - began < 30
    assert not result.ok and "timed out" in result.error
    assert "started" in result.content
    assert state_of(client, "slow")["Status"] == "exited"


def test_cancelling_a_foreground_run_kills_the_container(tools: Tools, client: Any):
    cancel = threading.Event()

    def cancel_once_ready(progress: Progress) -> None:
        if progress.message == "ready":
            cancel.set()  # what the UI's Stop button does

    ctx = tools.context(cancel_event=cancel, progress_sink=cancel_once_ready)
    args = {
        "image": TEST_IMAGE,
        "command": "sh -c 'echo ready; sleep 600'",
        "name": "cancelme",
        "network": "none",
    }
    result = tools.call("docker_run_container", args, ctx)
    assert not result.ok and result.error == "cancelled"
    assert state_of(client, "cancelme")["Status"] == "exited"


def test_run_preview_shows_the_full_command_line(tools: Tools):
    args = {
        "image": TEST_IMAGE,
        "command": ["echo", "hello world"],
        "name": "demo",
        "env": {"MODE": "prod", "DB_PASSWORD": "hunter2"},
        "ports": ["8080:80"],
        "volumes": ["/srv/data:/data:ro"],
        "remove": True,
    }
    preview = tools.preview("docker_run_container", args)
    assert preview.splitlines()[0] == (
        "docker run --rm --name demo -e MODE=prod -e 'DB_PASSWORD=[redacted]' -p 8080:80 "
        f"-v /srv/data:/data:ro {TEST_IMAGE} echo 'hello world'"
    )
    assert "in the foreground" in preview and tools.account.fields["host"] in preview
    bad = tools.preview("docker_run_container", {**args, "ports": ["eighty"]})
    assert bad.startswith("(this call will fail: cannot read the port 'eighty'")


def test_run_with_an_image_that_is_not_local_says_to_pull_it(tools: Tools):
    args = {"image": "deskhand-test/busybx:latest", "network": "none"}
    result = tools.call("docker_run_container", args)
    assert not result.ok
    assert "is not present locally" in result.error and "docker_pull_image" in result.error
    assert f"Did you mean '{TEST_IMAGE}'" in result.error
    assert "docker_pull_image" in tools.preview("docker_run_container", args)


def test_run_on_a_missing_network_says_so_and_leaves_nothing_behind(tools: Tools, client: Any):
    args = {"image": TEST_IMAGE, "name": "lost", "network": "dh-missing-net", "detach": True}
    result = tools.call("docker_run_container", args)
    assert not result.ok
    assert "dh-missing-net" in result.error and "not found" in result.error
    assert "not present locally" not in result.error and "No container" not in result.error
    assert not client.containers.list(all=True, filters={"name": "lost"})


def test_exec_returns_exit_code_and_output(tools: Tools, client: Any):
    start(client, "box")
    shell = tools.call(
        "docker_exec",
        {"container": "box", "command": "echo $GREETING; exit 4", "env": {"GREETING": "hi"}},
    )
    assert shell.ok, shell.error
    assert shell.data["exit_code"] == 4 and shell.data["output"] == "hi"
    argv = tools.call("docker_exec", {"container": "box", "command": ["cat", "/etc/passwd"]})
    assert argv.data["exit_code"] == 0 and "root:x:0:0" in argv.content
    assert "docker exec box cat /etc/passwd" in tools.preview(
        "docker_exec", {"container": "box", "command": ["cat", "/etc/passwd"]}
    )


def test_exec_gives_up_at_its_timeout(tools: Tools, client: Any):
    start(client, "box")
    began = time.monotonic()
    result = tools.call(
        "docker_exec", {"container": "box", "command": "echo waiting; sleep 600", "timeout": 1}
    )
    assert time.monotonic() - began < 20
    assert not result.ok and "timed out" in result.error
    assert "did not finish within 1 s" in result.content and "waiting" in result.content
    assert "the command was ended in box" in result.content


def test_exec_in_a_stopped_container_says_to_start_it(tools: Tools, client: Any):
    finished(client, "done", "true")
    result = tools.call("docker_exec", {"container": "done", "command": "ls"})
    assert not result.ok and "docker_start_container" in result.error


# ---- credentials under innocent names ------------------------------------------------------------

GHP = "ghp_" + "Zq8Xw2Lk9Mn4Pv7Rt1Ys5Ub3Ce6Df0Gh2Jk4"
DB_URL = "postgres://app:pg-s3cret-99@db:5432/shop"


def test_credential_shaped_values_are_masked_under_innocent_names(tools: Tools, client: Any):
    """A token in `NOTE`, a password in a URL or on the command line: none reaches the model."""
    client.containers.run(
        TEST_IMAGE,
        ["sh", "-c", "sleep 600", "app", "--password=hunter2-pw", "--token", "t0k-77aa", GHP],
        name="leaky",
        detach=True,
        network_mode="none",
        environment={"NOTE": GHP, "DATABASE": DB_URL, "MODE": "prod"},
        labels={"contact": "ops", "backup-url": DB_URL},
    )
    leaks = (GHP, "pg-s3cret-99", "hunter2-pw", "t0k-77aa")
    summary = tools.call("docker_inspect_container", {"container": "leaky"})
    full = tools.call("docker_inspect_container", {"container": "leaky", "full": True})
    listing = tools.call("docker_list_containers")
    for result in (summary, full, listing):
        assert result.ok, result.error
        shown = result.content + json.dumps(result.data)
        assert not [leak for leak in leaks if leak in shown], result.content
    info = summary.data["container"]
    assert "NOTE=[redacted]" in info["env"] and "MODE=prod" in info["env"]
    assert "DATABASE=postgres://app:[redacted]@db:5432/shop" in info["env"]
    assert "--password=[redacted]" in info["command"] and "--token" in info["command"]
    assert info["labels"] == {
        "contact": "ops",
        "backup-url": "postgres://app:[redacted]@db:5432/shop",
    }
    config = full.data["container"]["Config"]
    assert "NOTE=[redacted]" in config["Env"] and "[redacted]" in config["Cmd"]
    assert "sleep 600" in summary.content  # the rest of the command line is still shown


def test_run_and_exec_previews_mask_credentials_in_env_and_command(tools: Tools, client: Any):
    args = {
        "image": TEST_IMAGE,
        "command": ["app", "--password", "hunter2-pw", f"--url={DB_URL}"],
        "env": {"NOTE": GHP, "MODE": "prod"},
    }
    preview = tools.preview("docker_run_container", args)
    assert GHP not in preview and "hunter2-pw" not in preview and "pg-s3cret-99" not in preview
    assert "-e 'NOTE=[redacted]' -e MODE=prod" in preview
    assert "app --password '[redacted]' '--url=postgres://app:[redacted]@db:5432/shop'" in preview
    start(client, "box")
    exec_preview = tools.preview(
        "docker_exec", {"container": "box", "command": f"curl -u bob:x https://h -H 'X: {GHP}'"}
    )
    assert GHP not in exec_preview and "[redacted]" in exec_preview


# ---- stopping docker_exec ---------------------------------------------------------------------


def processes(client: Any, name: str) -> list[str]:
    """The command lines running in a container, as the engine lists them (`docker top`)."""
    top = client.api.top(name)
    column = top["Titles"].index("CMD")
    return [row[column] for row in top["Processes"]]


def cancel_when_running(client: Any, name: str, command: str, cancel: threading.Event) -> Watch:
    """Sets `cancel` once `command` shows up in the container (what Stop does mid-call),
    polling the engine's real process list; `.check()` fails if it never showed up."""
    return Watch(
        lambda: command in processes(client, name),
        cancel.set,
        f"{command!r} to run in {name}",
        every=0.05,
    )


def test_cancelled_exec_ends_the_command_and_its_children_in_the_container(
    tools: Tools, client: Any
):
    box = start(client, "box", "sleep 700")
    cancel = threading.Event()

    def on_progress(progress: Progress) -> None:
        if progress.message == "started":
            cancel.set()

    ctx = tools.context(cancel_event=cancel, progress_sink=on_progress)
    args = {"container": "box", "command": "echo started; sleep 600"}
    result = tools.call("docker_exec", args, ctx)
    assert not result.ok and result.error == "cancelled", result.content
    assert "the command was ended in box" in result.content
    assert result.data["stopped"] is True
    assert result.data["output"] == "started"  # the PID line never shows
    listing = box.exec_run(["ps", "-o", "pid,args"]).output.decode()
    assert "sleep 600" not in listing and "sleep 700" in listing
    # a list command, cancelled while it runs: the same
    cancel = threading.Event()
    running = cancel_when_running(client, "box", "sleep 650", cancel)
    args = {"container": "box", "command": ["sleep", "650"]}
    argv = tools.call("docker_exec", args, tools.context(cancel_event=cancel))
    running.check()
    assert argv.error == "cancelled" and argv.data["stopped"] is True
    assert "sleep 650" not in box.exec_run(["ps", "-o", "args"]).output.decode()


def test_exec_that_times_out_is_ended_too(tools: Tools, client: Any):
    box = start(client, "box", "sleep 700")
    args = {"container": "box", "command": ["sleep", "640"], "timeout": 1}
    result = tools.call("docker_exec", args)
    assert not result.ok and "timed out" in result.error
    assert "the command was ended in box" in result.content
    assert "sleep 640" not in box.exec_run(["ps", "-o", "args"]).output.decode()


def shell_less_container(client: Any, name: str, applets: tuple[str, ...]) -> Any:
    """A running container from an image with only `applets` (no /bin/sh)."""
    reference = f"deskhand-test/{name}:latest"
    client.api.import_image_from_data(
        busybox_tar(BUSYBOX, applets), repository=reference.split(":")[0], tag="latest"
    )
    return client.containers.run(
        reference, ["sleep", "700"], name=name, detach=True, network_mode="none"
    )


def test_exec_without_a_shell_is_ended_through_its_pid_on_a_local_engine(tools: Tools, client: Any):
    shell_less_container(client, "minimal", ("sleep", "kill"))
    cancel = threading.Event()
    running = cancel_when_running(client, "minimal", "sleep 600", cancel)
    args = {"container": "minimal", "command": ["sleep", "600"]}
    result = tools.call("docker_exec", args, tools.context(cancel_event=cancel))
    running.check()
    assert result.error == "cancelled" and result.data["stopped"] is True, result.content
    assert "sleep 600" not in processes(client, "minimal")
    assert "sleep 700" in processes(client, "minimal")


def test_exec_that_cannot_be_ended_says_so_plainly(tools: Tools, client: Any):
    """No shell and no `kill` in the image: Deskhand cannot end the command and says so."""
    shell_less_container(client, "distroless", ("sleep",))
    cancel = threading.Event()
    running = cancel_when_running(client, "distroless", "sleep 600", cancel)
    args = {"container": "distroless", "command": ["sleep", "600"]}
    result = tools.call("docker_exec", args, tools.context(cancel_event=cancel))
    running.check()
    assert not result.ok and result.data["stopped"] is False
    assert result.error.startswith("cancelled; the command may still be running in distroless")
    assert "may still be running in distroless" in result.content
    assert "sleep 600" in processes(client, "distroless")  # the message tells the truth


# ---- approval: host and one-line summary --------------------------------------------------------


def test_changing_tools_name_their_host_and_summarise_the_call(tools: Tools):
    registry = tools.registry
    manifests = {m.name: m for m in registry.manifests() if m.category == "docker"}
    for name in CHANGES:
        assert manifests[name].subject and manifests[name].summary_line, name
    for name in READS:
        assert manifests[name].summary_line is None, name
    ctx = tools.context(account=Account("work", "docker", "work", {"host": "tcp://10.0.0.9:2376"}))

    def hooks(tool: str, args: dict[str, Any]) -> tuple[Any, str]:
        _, params = tools.runner.validate(tool, args)
        subject = registry.resolve_hook(tool, "subject")(params, ctx)
        return subject, registry.resolve_hook(tool, "summary_line")(params, ctx)

    subject, line = hooks("docker_remove_container", {"container": "web-1"})
    assert subject.account == "Docker · work" and subject.target == "Docker · work"
    assert line == "Delete container web-1 on host work"
    _, stop = hooks("docker_stop_container", {"container": "db", "timeout": 5})
    assert stop == "Stop container db on host work (killed after 5 s)"
    _, run = hooks(
        "docker_run_container",
        {"image": "nginx:1.27", "name": "web", "command": ["app", f"--token={GHP}"], "detach": 1},
    )
    assert run == (
        "Run image nginx:1.27 as container web with command `app '--token=[redacted]'` "
        "on host work, in the background"
    )
    _, prune = hooks("docker_prune", {"targets": ["containers", "volumes"]})
    assert prune == (
        "Remove stopped containers and unused volumes (their data is lost) on host work"
    )
    _, pull = hooks("docker_pull_image", {"image": "library/nginx"})
    assert pull == "Download image library/nginx:latest to host work"


def test_approval_hooks_do_not_contact_the_engine(tools: Tools, tmp_path: Path):
    """Hooks run before the user decides: they must work (and change nothing) even when the
    host is unreachable."""
    gone = Account("gone", "docker", "Gone host", {"host": f"unix://{tmp_path}/none.sock"})
    ctx = tools.context(account=gone)
    command = f"ls /data; export T={GHP}"
    _, params = tools.runner.validate("docker_exec", {"container": "x", "command": command})
    line = tools.registry.resolve_hook("docker_exec", "summary_line")(params, ctx)
    assert line == "Run `ls /data; export T=[redacted]` in container x on host Gone host"
    subject = tools.registry.resolve_hook("docker_exec", "subject")(params, ctx)
    assert subject.target == "Docker · Gone host"


# ---- images, volumes, networks, prune ------------------------------------------------------------


def test_list_and_remove_images(tools: Tools, client: Any):
    import docker.errors

    client.images.get(TEST_IMAGE).tag("deskhand-test/extra", "1")
    listed = tools.call("docker_list_images")
    assert listed.ok, listed.error
    tags = [i["tag"] for i in listed.data["images"]]
    assert TEST_IMAGE in tags and "deskhand-test/extra:1" in tags
    preview = tools.preview("docker_remove_image", {"image": "deskhand-test/extra:1"})
    assert "Delete image deskhand-test/extra:1" in preview and "only this tag goes" in preview
    removed = tools.call("docker_remove_image", {"image": "deskhand-test/extra:1"})
    assert removed.ok, removed.error
    assert removed.data["untagged"] == ["deskhand-test/extra:1"] and removed.data["deleted"] == []
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get("deskhand-test/extra:1")
    assert client.images.get(TEST_IMAGE)
    missing = tools.call("docker_remove_image", {"image": "deskhand-test/busybx"})
    assert not missing.ok and "not present locally" in missing.error
    assert f"Did you mean '{TEST_IMAGE}'" in missing.error


def test_removing_an_image_in_use_names_the_container(tools: Tools, client: Any):
    image_id = import_image(client, "deskhand-test/used:1")
    user = client.containers.create(
        "deskhand-test/used:1", ["true"], name="user-of-image", network_mode="none"
    )
    preview = tools.preview("docker_remove_image", {"image": image_id})
    assert "used by: user-of-image (created)" in preview
    result = tools.call("docker_remove_image", {"image": image_id})
    assert not result.ok and "user-of-image" in result.error and "force=true" in result.error
    assert client.images.get(image_id)
    user.remove()
    client.images.remove(image_id)


def test_pull_without_network_is_a_clear_error(tools: Tools):
    result = tools.call("docker_pull_image", {"image": "registry.invalid/deskhand/nothing:1"})
    assert not result.ok
    assert "registry.invalid/deskhand/nothing:1" in result.error
    assert "Could not reach the registry" in result.error
    assert (
        tools.progress
        and "pulling registry.invalid/deskhand/nothing:1" in tools.progress[0].message
    )


def test_pull_progress_follows_the_layer_stream(tmp_path: Path):
    """The engine's pull events (offline here, so replayed in its shape) become progress."""
    from tools.docker.images import LayerProgress

    seen: list[Progress] = []
    progress = LayerProgress(ToolContext(home=tmp_path, progress_sink=seen.append), "demo:1")
    events = [
        {"status": "Pulling from library/demo", "id": "1"},
        {"status": "Pulling fs layer", "id": "aaa"},
        {"status": "Pulling fs layer", "id": "bbb"},
        {"status": "Downloading", "progressDetail": {"current": 50, "total": 100}, "id": "aaa"},
        {"status": "Downloading", "progressDetail": {"current": 100, "total": 300}, "id": "bbb"},
        {"status": "Download complete", "id": "aaa"},
        {"status": "Downloading", "progressDetail": {"current": 300, "total": 300}, "id": "bbb"},
        {"status": "Download complete", "id": "bbb"},
        {"status": "Pull complete", "id": "aaa"},
        {"status": "Pull complete", "id": "bbb"},
        {"status": "Status: Downloaded newer image for demo:1"},
    ]
    for event in events:
        progress.update(event)
    messages = [p.message for p in seen]
    assert messages[0] == "Pulling from library/demo"
    assert "Download complete aaa (400 B in 2 layers)" in messages
    assert seen[-1].message.startswith("Status: Downloaded newer image")
    fractions = [p.fraction for p in seen if p.fraction is not None]
    assert fractions[0] == 0.5 and fractions[-1] == 1.0
    assert all(0 <= f <= 1 for f in fractions)


def test_volumes_and_networks_are_listed_with_their_users(tools: Tools, client: Any):
    client.volumes.create("dh-data")
    start(client, "db", volumes={"dh-data": {"bind": "/data", "mode": "rw"}})
    volumes = tools.call("docker_list_volumes")
    assert volumes.ok, volumes.error
    row = next(v for v in volumes.data["volumes"] if v["name"] == "dh-data")
    assert row["used_by"] == ["db"] and row["driver"] == "local"
    networks = tools.call("docker_list_networks")
    assert networks.ok, networks.error
    by_name = {n["name"]: n for n in networks.data["networks"]}
    assert {"host", "none"} <= set(by_name)
    assert "db" in by_name["none"]["containers"]


def test_prune_preview_lists_what_would_go_and_prune_removes_exactly_that(
    tools: Tools, client: Any
):
    import docker.errors

    keeper = start(client, "keeper")
    finished(client, "old-job", "echo bye")
    client.volumes.create("dh-orphan")
    # A dangling image: two imports under one tag; the first loses its name.
    first = import_image(client, "deskhand-test/dangle:1", label="one")
    assert import_image(client, "deskhand-test/dangle:1", label="two") != first
    preview = tools.preview("docker_prune", {})
    assert preview.startswith("Prune on Local Docker")
    assert "old-job (exited" in preview and "keeper" not in preview
    assert first.removeprefix("sha256:")[:12] in preview
    assert "volumes: not included" in preview and "Estimated space freed" in preview
    result = tools.call("docker_prune", {})
    assert result.ok, result.error
    assert result.data["removed"]["containers"] and "Space reclaimed" in result.content
    with pytest.raises(docker.errors.NotFound):
        client.containers.get("old-job")
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(first)
    keeper.reload()
    assert keeper.status == "running"
    assert client.volumes.get("dh-orphan")  # volumes were not asked for
    volumes_preview = tools.preview("docker_prune", {"targets": ["volumes"]})
    assert "dh-orphan" in volumes_preview and "containers: not included" in volumes_preview
    assert tools.call("docker_prune", {"targets": ["volumes"]}).ok
    with pytest.raises(docker.errors.NotFound):
        client.volumes.get("dh-orphan")


# ---- hosts and errors --------------------------------------------------------------------------


def test_the_active_account_decides_the_host_and_results_name_it(
    tools: Tools, dockerd: DockerDaemon, tmp_path: Path
):
    build = Account("build", "docker", "Build server", {"host": dockerd.url})
    named = tools.call("docker_list_images", ctx=tools.context(build))
    assert named.ok and named.content.startswith(f"Docker host: Build server ({dockerd.url})")
    assert named.data["host"] == "Build server" and named.data["address"] == dockerd.url
    dead = Account("dead", "docker", "Old laptop", {"host": f"unix://{tmp_path}/gone.sock"})
    failed = tools.call("docker_list_images", ctx=tools.context(dead))
    assert not failed.ok
    assert failed.error.startswith(f"Docker is not running at unix://{tmp_path}/gone.sock")
    assert "sudo systemctl start docker" in failed.error and "Docker Desktop" in failed.error


def test_without_an_account_directory_the_local_engine_from_the_environment_is_used(
    docker_env: DockerDaemon, runner_home: Path, monkeypatch: pytest.MonkeyPatch
):
    from integrations.docker_client import forget_clients

    monkeypatch.setenv("DOCKER_HOST", docker_env.url)
    forget_clients()
    harness = Tools(runner_home)
    try:
        ctx = ToolContext(call_id="t", home=runner_home, integration="docker")
        result = harness.call("docker_list_images", ctx=ctx)
    finally:
        harness.runner.shutdown()
        forget_clients()
    assert result.ok, result.error
    assert result.content.startswith(f"Docker host: Local Docker ({docker_env.url})")


def test_daemon_not_running_also_shows_in_approval_previews(tools: Tools, tmp_path: Path):
    tools.account = Account("x", "docker", "Gone", {"host": f"unix://{tmp_path}/none.sock"})
    preview = tools.preview("docker_remove_container", {"container": "web"})
    assert preview.startswith("(this call will fail: Docker is not running at")


def test_no_such_container_suggests_near_matches(tools: Tools, client: Any):
    start(client, "web-frontend")
    finished(client, "worker", "true")
    for tool in ("docker_inspect_container", "docker_restart_container", "docker_container_logs"):
        result = tools.call(tool, {"container": "web-fronted"})
        assert not result.ok
        assert result.error.startswith("No container 'web-fronted' on Local Docker")
        assert "Did you mean 'web-frontend'?" in result.error
        assert "docker_list_containers with all=true" in result.error
    nothing_close = tools.call("docker_inspect_container", {"container": "zzzz"})
    assert "Did you mean" not in nothing_close.error


def test_permission_denied_on_the_socket_explains_the_docker_group(dockerd: DockerDaemon):
    """A forked child drops to `nobody` and calls a tool against the root-owned socket."""
    registry = ToolRegistry.default(None, entry_points=False)
    list_containers = registry.resolve("docker_list_containers")  # SDK loaded before the drop
    params = registry.get("docker_list_containers").params()
    account = Account("as-nobody", "docker", "Local Docker", {"host": dockerd.url})
    ctx = ToolContext(home=Path("/tmp"), account_resolver=lambda _: account, integration="docker")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            try:
                outcome = f"ok: {list_containers(params, ctx)}"
            except ToolError as exc:
                outcome = f"error: {exc}"
            os.write(write_end, outcome.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        outcome = pipe.read().decode()
    os.waitpid(pid, 0)
    assert outcome.startswith(f"error: Permission denied on the Docker socket at {dockerd.url}")
    assert "docker group" in outcome


# ---- end to end: deskhand ask ---------------------------------------------------------------


def _ask_restart(llm: ScriptedLLM, daemon: DockerDaemon, home: Path, *flags: str) -> list[dict]:
    llm.add(tool_calls(("r1", "docker_restart_container", {"container": "web", "timeout": 0})))
    llm.add(text("Done."))
    proc = deskhand(
        "--home",
        str(home),
        "ask",
        "restart the container named web",
        "--base-url",
        llm.openai_base_url,
        "--model",
        "m",
        "--json",
        *flags,
        env=deskhand_env(**daemon.env),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return events_of(proc.stdout)


def test_ask_with_yes_restarts_the_container_on_the_real_daemon(
    llm: ScriptedLLM, docker_env: DockerDaemon, client: Any, tmp_path: Path
):
    start(client, "web")
    before = state_of(client, "web")["StartedAt"]
    events = _ask_restart(llm, docker_env, tmp_path, "--yes")
    assert [e["decision"] for e in events if e["type"] == "approval"] == ["allow_once"]
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["ok"], result
    assert "Restarted web" in result["content"] and docker_env.url in result["content"]
    after = state_of(client, "web")
    assert after["Running"] and after["StartedAt"] != before


def test_ask_without_yes_is_denied_and_the_container_is_untouched(
    llm: ScriptedLLM, docker_env: DockerDaemon, client: Any, tmp_path: Path
):
    start(client, "web")
    before = state_of(client, "web")
    events = _ask_restart(llm, docker_env, tmp_path)
    assert [e["decision"] for e in events if e["type"] == "approval"] == ["deny"]
    result = next(e for e in events if e["type"] == "tool_result")
    assert not result["ok"] and "declined" in result["content"]
    after = state_of(client, "web")
    assert after["StartedAt"] == before["StartedAt"] and after["Running"]
