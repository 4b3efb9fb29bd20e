"""Deskhand's client entry for the official MCP conformance suite
(`@modelcontextprotocol/conformance`, pinned in tests/conformance/package.json).

The suite starts a mock server for one scenario and runs this file as
`python tests/conformance/client.py <server URL>`, with the scenario's name in
`MCP_CONFORMANCE_SCENARIO` and, for some scenarios, a JSON `MCP_CONFORMANCE_CONTEXT`
(client credentials and the like). The scenario's checks are made by the mock server from
what this client sends; the exit status says whether the client itself thinks it managed.

Everything goes through Deskhand's own MCP code, as the app uses it: the server is written
to a fresh home's `mcp.json` (`app.core.paths.mcp_path`), read and checked by
`app.core.mcp.config`, started by `McpManager` (which runs `ServerConnection` on its MCP
thread), its tools are the manager's `ToolManifest`s, and calls go through each manifest's
parameter model and `impl` with a `ToolContext`, so the results pass through
`app.core.mcp.results` as well. Nothing calls the SDK directly: that would test the SDK.

Sign-in (`auth/*`) goes the way a user's does: what the scenario's context gives (a client
id, a secret, a private key) is written where a user would put it — the entry's `auth` in
`mcp.json`, the secret in the keyring (here the encrypted-file keyring of the fresh home),
the key in a file — and when the server needs a sign-in, `McpManager.sign_in` runs with a
"browser" that loads the sign-in page and follows its redirect to Deskhand's loopback
listener, as a browser would after the user agreed. Elicitation requests are answered by a
handler that accepts each form with its defaults, as a user pressing Accept would.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script by the suite, from any folder
    sys.path.insert(0, str(ROOT))
#: The fresh home's encrypted-file keyring is opened with this (read once, then removed
#: from the environment by app.core.keyring_fallback).
os.environ.setdefault("DESKHAND_KEYRING_PASSPHRASE", "conformance-" + os.urandom(16).hex())

from app.core.mcp.config import keyring_key  # noqa: E402
from app.core.mcp.elicitation import ElicitationAnswer, ElicitationRequest  # noqa: E402
from app.core.mcp.manager import McpManager  # noqa: E402
from app.core.mcp.manifests import tool_name  # noqa: E402
from app.core.mcp.secret_access import SecretAccess  # noqa: E402
from app.core.mcp.status import Status  # noqa: E402
from app.core.paths import mcp_path  # noqa: E402
from app.core.secrets import SecretStore  # noqa: E402
from tools.spec import ToolContext, ToolError, ToolManifest, ToolResult  # noqa: E402

SERVER = "conformance"
#: How long the server may take to be ready (the suite gives a scenario 30 s in all).
READY_WAIT = 15.0

log = logging.getLogger("deskhand.conformance")


class ScenarioFailed(Exception):
    """The client could not do what the scenario asks; the message says why."""


#: Where a user would host Deskhand's OAuth client metadata document (used only when the
#: authorization server supports client ID metadata documents).
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def accept_defaults(request: ElicitationRequest) -> ElicitationAnswer:
    """A user who presses Accept on the form as shown: every field keeps its default."""
    content = {f.name: f.default for f in request.fields if f.default is not None}
    return ElicitationAnswer("accept", content)


def browser(url: str) -> bool:
    """A browser whose user agrees to sign in: load the page, follow its redirects (the
    last one lands on Deskhand's loopback listener)."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=20) as page:
        log.info("sign-in page ended at %s (%s)", page.url.split("?")[0], page.status)
    return True


def issuer_of(url: str) -> str:
    """The authorization server the MCP server names in its protected-resource metadata —
    what an administrator tells a user to put in `auth.issuer` for client credentials."""
    import urllib.error
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource"
    for where in (base + parts.path, base):
        try:
            with urllib.request.urlopen(where, timeout=10) as answer:
                return str(json.loads(answer.read())["authorization_servers"][0])
        except (urllib.error.URLError, KeyError, IndexError, ValueError):
            continue
    raise ScenarioFailed(f"no protected-resource metadata for {url}")


def auth_entry(
    scenario: str, context: dict[str, Any], home: Path, secrets: SecretStore, url: str
) -> Any:
    """The entry's `auth` a user would write for this scenario's server."""
    secret = context.get("client_secret")
    if secret:  # a user keeps it in the keyring, referred to from mcp.json
        secrets.set(keyring_key(SERVER, "client_secret"), secret)
        secret = "${keyring:" + keyring_key(SERVER, "client_secret") + "}"
    if scenario.startswith("auth/client-credentials"):
        entry: dict[str, Any] = {
            "type": "client_credentials",
            "client_id": context["client_id"],
            "issuer": issuer_of(url),
        }
        if context.get("private_key_pem"):
            key = home / "client-key.pem"
            key.write_text(context["private_key_pem"], "utf-8")
            key.chmod(0o600)
            entry |= {
                "private_key_file": str(key),
                "signing_algorithm": context.get("signing_algorithm", "ES256"),
            }
        else:
            entry |= {"client_secret": secret, "token_endpoint_auth_method": "client_secret_basic"}
        return entry
    entry = {"type": "oauth", "client_metadata_url": CLIENT_METADATA_URL}
    if context.get("client_id"):  # registered beforehand, with its authorization server
        entry |= {"client_id": context["client_id"], "client_secret": secret}
        if secret:
            entry["issuer"] = issuer_of(url)
    return entry


class Session:
    """One Deskhand MCP manager with the scenario's server as its only `mcp.json` entry."""

    def __init__(self, url: str, home: Path, scenario: str = "") -> None:
        self.home = home
        self.scenario = scenario
        store = SecretStore(home=home, mode="encrypted_file")
        entry: dict[str, Any] = {"type": "http", "url": url}
        if scenario.startswith("auth/"):
            context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
            entry["auth"] = auth_entry(scenario, context, home, store, url)
        mcp_path(home).write_text(json.dumps({"mcpServers": {SERVER: entry}}), "utf-8")
        self.manager = McpManager(
            mcp_path(home),
            home=home,
            backoff_start=30.0,
            get_secret=store.get,
            open_url=browser,
            secrets=SecretAccess(get=store.get, set=store.set, delete=store.delete),
        )
        self.manager.set_elicitation_handler(accept_defaults)

    def connect(self) -> None:
        problems = [p.message for p in self.manager.config_problems]
        self.manager.start(wait=READY_WAIT)
        problems += [p.message for p in self.manager.config_problems]
        if self.manager.config_error or problems:
            raise ScenarioFailed(f"mcp.json: {self.manager.config_error or problems}")
        state = self.manager.status(SERVER)
        if state is not None and state.status is Status.NEEDS_SIGN_IN:
            log.info("the server needs a sign-in: %s", state.error)
            state = self.manager.sign_in(SERVER, timeout=READY_WAIT)
        if state is None or state.status is not Status.READY:
            why = state.error if state is not None else "not configured"
            raise ScenarioFailed(f"the server did not become ready: {why}")
        log.info("ready; tools: %s", state.tools)

    def tools(self) -> dict[str, ToolManifest]:
        return {m.name: m for m in self.manager.tools(SERVER)}

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Call the server's `tool` the way the runner does: validate the arguments with the
        manifest's model, then run its `impl`."""
        manifest = self.tools().get(tool_name(SERVER, tool))
        if manifest is None:
            raise ScenarioFailed(f"the server has no tool {tool!r} (tools: {list(self.tools())})")
        params = manifest.params.model_validate(arguments)
        result = self._run(manifest, params, tool)
        state = self.manager.status(SERVER)
        if state is not None and state.status is Status.NEEDS_SIGN_IN:
            # the server asked for more access during the call: the user presses Sign in
            # again (Deskhand never opens a page on its own), then asks again
            log.info("the call needs more access: %s", state.error)
            self.manager.sign_in(SERVER, timeout=READY_WAIT)
            manifest = self.tools().get(tool_name(SERVER, tool), manifest)
            result = self._run(manifest, params, tool)
        return result

    def _run(self, manifest: ToolManifest, params: Any, tool: str) -> ToolResult:
        try:
            result = manifest.impl(
                params, ToolContext(call_id=f"conformance-{tool}", home=self.home)
            )
        except ToolError as exc:
            result = ToolResult.failure(str(exc))
        log.info("%s -> ok=%s %s", tool, result.ok, result.content[:200])
        return result

    def close(self) -> None:
        self.manager.shutdown()


def _call_must_succeed(tool: str, arguments: dict[str, Any]) -> Callable[[Session], None]:
    def run(session: Session) -> None:
        result = session.call(tool, arguments)
        if not result.ok:
            raise ScenarioFailed(f"{tool} failed: {result.error}")

    return run


def _first_tool(session: Session) -> None:
    """The flow of every other scenario (the `auth/*` ones): connect, list, call the first
    tool with no arguments (whatever it answers)."""
    tools = session.manager.status(SERVER)
    names = tools.tools if tools is not None else []
    if names:
        session.call(names[0], {})


#: What each scenario does once connected (connecting lists the tools).
SCENARIOS: dict[str, Callable[[Session], None]] = {
    "initialize": lambda session: None,
    "tools_call": _call_must_succeed("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": _call_must_succeed("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": _call_must_succeed(
        "test_client_elicitation_defaults", {}
    ),
}


def run(scenario: str, url: str) -> None:
    with tempfile.TemporaryDirectory(prefix="deskhand-conformance-") as folder:
        home = Path(folder)
        session = Session(url, home, scenario)
        try:
            session.connect()
            SCENARIOS.get(scenario, _first_tool)(session)
        finally:
            session.close()


def main(argv: list[str]) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    if len(argv) < 2:
        print(f"usage: {argv[0]} <server URL> (scenario in MCP_CONFORMANCE_SCENARIO)",
              file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    try:
        run(scenario, argv[-1])
    except ScenarioFailed as exc:
        print(f"scenario {scenario!r}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
