"""Images reach a model that takes them, in its provider's own format: a tool result's
images inside the Anthropic tool_result, in a user message after the `tool` messages for
OpenAI-compatible servers; only in the request right after the result; read only from the
files Deskhand saved for that call; a model without images gets a text note instead.

Real providers over HTTP to the scripted server, the real pipeline and store, the real
browser (Chromium) and a real MCP server (tests/mcp_servers.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from app.core.agent import Agent, Conversation, TurnSetup
from app.core.approval import allow_all
from app.core.attachments import MAX_IMAGE_BYTES, build_user_message
from app.core.events import Notice, ToolCallFinished
from app.core.pipeline import CallPipeline, ToolEnvironment
from app.core.providers import make_provider, vision
from app.core.providers.base import ProviderConfig
from app.core.rules import RuleBook
from app.core.settings import Settings
from app.core.sources import TrustStore
from app.core.store import Store
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.fixtures_browser import BrowserDriver, LocalSite
from tools.redact import TRIPWIRE, Tripwire
from tools.registry import ToolRegistry
from tools.runner import ToolRunner
from tools.session import ToolSession
from tools.spec import Operation, ToolContext, ToolManifest, ToolResult

#: A 1×1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


class Drawn(BaseModel):
    #: Which saved files the test tool returns (names the test chose, never the model).
    which: str = "one"


class Named(BaseModel):
    path: str


class Env:
    """An agent on the scripted server whose test tools return image attachments."""

    def __init__(self, llm: ScriptedLLM, home: Path, kind: str, model: str, **config: Any):
        self.llm = llm
        self.home = home
        self.files: dict[str, list[str]] = {}
        self.registry = ToolRegistry.default(None, entry_points=False)
        self.registry.add(
            [
                ToolManifest(
                    name="test_draw",
                    category="test",
                    description="Draw a picture.",
                    params=Drawn,
                    impl=self._draw,
                    operations=frozenset({Operation.READ}),
                ),
                ToolManifest(  # a tool that wrongly hands back a path the model named
                    name="test_show",
                    category="test",
                    description="Show a file.",
                    params=Named,
                    impl=lambda args, ctx: ToolResult(True, "Shown.", attachments=[args.path]),
                    operations=frozenset({Operation.READ}),
                ),
            ]
        )
        self.tripwire = Tripwire(set())
        self.runner = ToolRunner(self.registry, tripwire=self.tripwire)
        self.store = Store(home / "deskhand.db")
        self.settings = Settings()
        base = llm.openai_base_url if kind == "openai" else llm.anthropic_base_url
        self.provider = make_provider(
            ProviderConfig(kind=kind, base_url=base, model=model, max_retries=0, **config)  # type: ignore[arg-type]
        )
        self.loop = asyncio.new_event_loop()

    def _draw(self, args: Drawn, ctx: ToolContext) -> ToolResult:
        return ToolResult(True, "Drew it.", attachments=self.files[args.which])

    def saved(self, name: str, data: bytes = PNG, folder: str = "screenshots") -> str:
        place = self.home / folder
        place.mkdir(exist_ok=True)
        (place / name).write_bytes(data)
        return str(place / name)

    def agent(self, registry: ToolRegistry | None = None, settings: Any = None) -> Agent:
        runner = self.runner if registry is None else ToolRunner(registry, tripwire=self.tripwire)
        pipeline = CallPipeline(
            runner,
            ToolEnvironment(home=self.home, settings=settings or self.settings),
            rules=RuleBook(None, []),
            trust=TrustStore(None),
            approver=allow_all,
            recorder=self.store,
            tripwire=self.tripwire,
        )
        setup = TurnSetup(system_prompt="You are a test.", settings=settings or self.settings)
        return Agent(
            self.provider, pipeline, tripwire=self.tripwire, recorder=self.store, setup=setup
        )

    def conversation(self, registry: ToolRegistry | None = None) -> Conversation:
        return Conversation(
            ToolSession(registry or self.registry), self.store.create_conversation()
        )

    def turn(self, agent: Agent, conv: Conversation, message: Any) -> list[Any]:
        async def collect() -> list[Any]:
            return [event async for event in agent.run(conv, message)]

        return self.loop.run_until_complete(collect())

    def close(self) -> None:
        self.loop.run_until_complete(self.provider.aclose())
        self.loop.close()
        self.runner.shutdown()
        self.store.close()


@pytest.fixture
def make_env(llm: ScriptedLLM, tmp_path: Path) -> Iterator[Any]:
    made: list[Env] = []

    def make(kind: str = "openai", model: str = "gpt-4o", **config: Any) -> Env:
        home = tmp_path / f"home-{len(made)}"
        home.mkdir()
        made.append(Env(llm, home, kind, model, **config))
        return made[-1]

    yield make
    for env in made:
        env.close()


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def draw_then_answer(llm: ScriptedLLM, call_id: str = "d1", which: str = "one") -> None:
    llm.add(tool_calls((call_id, "test_draw", {"which": which})))
    llm.add(text("It is a dot."))


def image_parts(body: dict[str, Any]) -> list[str]:
    """Every image in a request body, either dialect, as a data URL."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("type") == "image_url":
                found.append(value["image_url"]["url"])
            elif value.get("type") == "image":
                source = value["source"]
                found.append(f"data:{source['media_type']};base64,{source['data']}")
            else:
                for item in value.values():
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(body)
    return found


def texts(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"], ensure_ascii=False)


# ---- which models take images -------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "model", "takes"),
    [
        ("anthropic", "claude-sonnet-4-20250514", True),
        ("anthropic", "claude-3-5-haiku-latest", True),
        ("anthropic", "claude-2.1", False),
        ("anthropic", "claude-instant-1.2", False),
        ("anthropic", "deepseek-chat", False),  # a server speaking Anthropic's API
        ("openai", "us.anthropic.claude-3-5-sonnet-20241022-v2:0", True),
        ("openai", "anthropic/claude-3.5-sonnet", True),
        ("openai", "gpt-4o-mini", True),
        ("openai", "openai/gpt-4.1", True),
        ("openai", "gpt-5-nano", True),
        ("openai", "o3", True),
        ("openai", "o4-mini", True),
        ("openai", "o3-mini", False),
        ("openai", "o1-mini", False),
        ("openai", "gpt-4o-audio-preview", False),
        ("openai", "gpt-4", False),
        ("openai", "gpt-3.5-turbo", False),
        ("openai", "gpt-oss:20b", False),
        ("openai", "google/gemini-2.5-flash", True),
        ("openai", "llava:13b", True),
        ("openai", "bakllava", True),
        ("openai", "llama3.2-vision:11b", True),
        ("openai", "llama4:scout", True),
        ("openai", "llama3.1:8b", False),
        ("openai", "qwen2.5vl:7b", True),
        ("openai", "Qwen/Qwen2-VL-7B-Instruct", True),
        ("openai", "qwen3-vl:8b", True),
        ("openai", "qwen3:8b", False),
        ("openai", "gemma3:12b", True),
        ("openai", "gemma3", True),
        ("openai", "gemma3:1b", False),
        ("openai", "gemma3n:e4b", False),
        ("openai", "minicpm-v", True),
        ("openai", "moondream:1.8b", True),
        ("openai", "pixtral-12b", True),
        ("openai", "mistral-small3.1:24b", True),
        ("openai", "mistral-small3.2", True),
        ("openai", "mistral:7b", False),
        ("openai", "granite3.2-vision", True),
        ("openai", "granite3.3:8b", False),
        ("openai", "deepseek-r1:14b", False),
        ("openai", "", False),
        ("openai", "some-new-model", False),
    ],
)
def test_models_known_to_take_images(kind: str, model: str, takes: bool) -> None:
    assert vision.takes_images(kind, model) is takes


@pytest.mark.parametrize(
    ("model", "choice", "takes"),
    [
        ("llama3.1:8b", "auto", False),
        ("llama3.1:8b", "on", True),
        ("gpt-4o", "auto", True),
        ("gpt-4o", "off", False),
    ],
)
def test_the_account_setting_overrides_the_list(model: str, choice: str, takes: bool) -> None:
    config = ProviderConfig("openai", "http://127.0.0.1:9/v1", model, images=choice)  # type: ignore[arg-type]
    assert vision.model_takes_images(config) is takes


def test_the_setting_travels_from_the_account_to_the_request(runtime: Any) -> None:
    account = runtime.settings.providers[0]
    assert account.images == "auto"
    account.images = "on"
    assert runtime.account_provider_config(None).images == "on"
    assert runtime.provider_config().images == "on"


def test_a_bad_setting_is_named_and_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    account = {"id": "a", "kind": "openai", "label": "Odd", "base_url": "http://x/v1"}
    with caplog.at_level(logging.WARNING, logger="app.core.settings"):
        settings = Settings.model_validate({"providers": [account | {"images": "sometimes"}]})

    assert settings.providers[0].images == "auto"
    warned = [r.getMessage() for r in caplog.records]
    assert any("'Odd'" in m and "images" in m and "default" in m for m in warned), warned


# ---- tool images in each dialect ------------------------------------------------------------


def test_openai_gets_the_tool_image_in_a_user_message_after_the_tool_messages(
    make_env: Any,
) -> None:
    env = make_env("openai", "gpt-4o")
    env.files["one"] = [env.saved("browser-1.png")]
    draw_then_answer(env.llm)
    conv = env.conversation()

    events = env.turn(env.agent(), conv, "Draw a dot")

    _first, second = env.llm.wait_for_requests(2)
    messages = second.body["messages"]
    tool, images = messages[-2], messages[-1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "d1"
    assert "[image given to the model with this result: browser-1.png]" in tool["content"]
    assert images["role"] == "user"
    kinds = [part["type"] for part in images["content"]]
    assert kinds == ["text", "text", "image_url", "text"]
    head, opening, image, closing = images["content"]
    assert head["text"].startswith("Images from the tool results above (untrusted data")
    assert "Untrusted data from the images of the result of tool call d1" in opening["text"]
    assert closing["text"].startswith("</untrusted_data id=")
    assert image["image_url"]["url"] == data_url(PNG)
    # the card says it too, and the history keeps the text, never the image
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.result.content.endswith(
        "[image given to the model with this result: browser-1.png]"
    )
    stored = env.store.load_messages(conv.id)
    assert [m.images for m in stored] == [[], [], [], []]


def test_anthropic_gets_the_tool_image_inside_the_tool_result(make_env: Any) -> None:
    env = make_env("anthropic", "claude-sonnet-4-5")
    env.files["one"] = [env.saved("photo.jpg", b"\xff\xd8\xff\xe0" + b"\0" * 64, "attachments")]
    draw_then_answer(env.llm)

    env.turn(env.agent(), env.conversation(), "Draw a dot")

    _first, second = env.llm.wait_for_requests(2)
    last = second.body["messages"][-1]
    assert last["role"] == "user"
    (result,) = last["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "d1"
    kinds = [block["type"] for block in result["content"]]
    assert kinds == ["text", "text", "image", "text"]
    assert "[image given to the model with this result: photo.jpg]" in result["content"][0]["text"]
    assert result["content"][1]["text"].startswith("[Untrusted data from the images")
    source = result["content"][2]["source"]
    assert source == {
        "type": "base64",
        "media_type": "image/jpeg",  # from its bytes
        "data": base64.b64encode(b"\xff\xd8\xff\xe0" + b"\0" * 64).decode("ascii"),
    }


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_tool_image_is_sent_once_then_a_note_stands_for_it(make_env: Any, kind: str) -> None:
    env = make_env(kind, "gpt-4o" if kind == "openai" else "claude-opus-4-1")
    env.files["one"] = [env.saved("a.png")]
    draw_then_answer(env.llm)
    env.llm.add(text("Still a dot."))
    conv = env.conversation()
    agent = env.agent()

    env.turn(agent, conv, "Draw a dot")
    env.turn(agent, conv, "What was it again?")

    _first, second, third = env.llm.wait_for_requests(3)
    assert image_parts(second.body) == [data_url(PNG)]
    assert image_parts(third.body) == []
    said = texts(third.body)
    assert "[image given to the model earlier: a.png; not sent again]" in said
    assert "given to the model with this result" not in said
    assert "Images from the tool results above" not in said


def test_only_the_last_round_of_images_goes_with_a_request(make_env: Any) -> None:
    env = make_env("openai", "gpt-4o")
    env.files["one"] = [env.saved("first.png")]
    env.files["two"] = [env.saved("second.png", PNG + b"2")]
    env.llm.add(tool_calls(("d1", "test_draw", {"which": "one"})))
    env.llm.add(tool_calls(("d2", "test_draw", {"which": "two"})))
    env.llm.add(text("Two dots."))

    env.turn(env.agent(), env.conversation(), "Draw twice")

    _first, second, third = env.llm.wait_for_requests(3)
    assert image_parts(second.body) == [data_url(PNG)]
    assert image_parts(third.body) == [data_url(PNG + b"2")]
    assert "[image given to the model earlier: first.png; not sent again]" in texts(third.body)


# ---- a model without images ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_model_without_images_gets_a_note_and_no_image(make_env: Any, kind: str) -> None:
    env = make_env(kind, "llama3.1:8b" if kind == "openai" else "claude-2.1")
    env.files["one"] = [env.saved("shot.png")]
    draw_then_answer(env.llm)
    conv = env.conversation()

    events = env.turn(env.agent(), conv, "Draw a dot")

    _first, second = env.llm.wait_for_requests(2)
    assert image_parts(second.body) == []
    note = "[image not given to the model: this model does not take images (shot.png)]"
    assert note in texts(second.body)
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.result.content.endswith(f"\n{note}")  # what the card shows


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_attached_images_are_not_sent_to_a_model_without_images(
    make_env: Any, tmp_path: Path, kind: str
) -> None:
    env = make_env(kind, "deepseek-r1:14b" if kind == "openai" else "claude-instant-1.2")
    picture = tmp_path / "cat.png"
    picture.write_bytes(PNG)
    message, problems = build_user_message("What is this?", [str(picture)])
    assert not problems and message.images
    env.llm.add(text("I cannot see it."))
    conv = env.conversation()

    events = env.turn(env.agent(), conv, message)

    (request,) = env.llm.wait_for_requests(1)
    assert image_parts(request.body) == []
    assert vision.NOT_SHOWN in texts(request.body)
    (notice,) = [e for e in events if isinstance(e, Notice)]
    assert notice.kind == vision.IMAGES_NOT_SENT and "does not take images" in notice.message
    assert env.store.load_messages(conv.id)[0].images == message.images  # kept for later


def test_the_setting_turns_images_on_and_off(make_env: Any, tmp_path: Path) -> None:
    picture = tmp_path / "cat.png"
    picture.write_bytes(PNG)
    message, _ = build_user_message("What is this?", [str(picture)])

    on = make_env("openai", "my-finetune", images="on")
    on.llm.add(text("A cat."))
    on.turn(on.agent(), on.conversation(), message)
    off = make_env("openai", "gpt-4o", images="off")
    off.llm.add(text("No idea."))
    off.turn(off.agent(), off.conversation(), message)

    sent_on, sent_off = on.llm.wait_for_requests(2)
    assert image_parts(sent_on.body) == [data_url(PNG)]
    assert image_parts(sent_off.body) == [] and vision.NOT_SHOWN in texts(sent_off.body)


# ---- what is never sent ----------------------------------------------------------------------


def test_an_oversized_image_is_not_sent_and_says_why(make_env: Any) -> None:
    env = make_env("openai", "gpt-4o")
    big = PNG + b"\0" * MAX_IMAGE_BYTES
    env.files["one"] = [env.saved("huge.png", big), env.saved("small.png")]
    draw_then_answer(env.llm)

    events = env.turn(env.agent(), env.conversation(), "Draw")

    _first, second = env.llm.wait_for_requests(2)
    assert image_parts(second.body) == [data_url(PNG)]
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.result.content.splitlines()[-2:] == [
        "[image not given to the model: huge.png is larger than 5 MB]",
        "[image given to the model with this result: small.png]",
    ]


def test_a_file_that_is_no_image_is_not_sent(make_env: Any) -> None:
    env = make_env("openai", "gpt-4o")
    env.files["one"] = [env.saved("fake.png", b"#!/bin/sh\necho not a picture\n")]
    draw_then_answer(env.llm)

    env.turn(env.agent(), env.conversation(), "Draw")

    _first, second = env.llm.wait_for_requests(2)
    assert image_parts(second.body) == []
    assert "fake.png is not a PNG, JPEG, GIF or WebP image" in texts(second.body)


def test_a_path_outside_the_tools_own_saved_files_is_never_read(
    make_env: Any, tmp_path: Path
) -> None:
    env = make_env("openai", "gpt-4o")
    private = tmp_path / "private.png"
    private.write_bytes(PNG + b"private")
    (env.home / "screenshots").mkdir()
    (env.home / "screenshots" / "link.png").symlink_to(private)
    nested = env.home / "screenshots" / "deeper"
    nested.mkdir()
    (nested / "inner.png").write_bytes(PNG + b"private")
    env.files["one"] = [
        str(env.home / "screenshots" / "link.png"),  # a link out of the folder
        str(nested / "inner.png"),  # not where tools save
        "screenshots/relative.png",
    ]
    env.llm.add(tool_calls(("s1", "test_show", {"path": str(private)}), ("d1", "test_draw", {})))
    env.llm.add(text("Nothing to see."))

    env.turn(env.agent(), env.conversation(), "Show me")

    _first, second = env.llm.wait_for_requests(2)
    assert image_parts(second.body) == []
    said = texts(second.body)
    for name in ("private.png", "link.png", "inner.png", "relative.png"):
        assert f"{name} is not a file Deskhand saved for this call" in said
    assert base64.b64encode(PNG + b"private").decode("ascii") not in json.dumps(second.body)


def test_one_round_of_images_stays_within_one_requests_allowance(make_env: Any) -> None:
    env = make_env("openai", "gpt-4o")
    env.files["one"] = [env.saved(f"{n}.png") for n in range(vision.MAX_ROUND_IMAGES + 2)]
    draw_then_answer(env.llm)

    env.turn(env.agent(), env.conversation(), "Draw many")

    _first, second = env.llm.wait_for_requests(2)
    assert len(image_parts(second.body)) == vision.MAX_ROUND_IMAGES
    assert "left out: this round's images already fill one request" in texts(second.body)


# ---- real tools: the browser's screenshot, an MCP server's image ------------------------------


def test_a_browser_screenshot_reaches_the_next_request(
    make_env: Any, browser: BrowserDriver, site: LocalSite
) -> None:
    env = make_env("anthropic", "claude-sonnet-4-5")
    env.home = browser.home  # the browser's own Deskhand home
    env.llm.add(tool_calls(("n1", "browser_navigate", {"url": site.url("/")})))
    env.llm.add(tool_calls(("s1", "browser_screenshot", {})))
    env.llm.add(text("I see the test site."))
    agent = env.agent(browser.registry, browser.settings)

    events = env.turn(agent, env.conversation(browser.registry), "Look at the site")

    (shot,) = [
        e for e in events if isinstance(e, ToolCallFinished) and e.name == "browser_screenshot"
    ]
    saved = Path(shot.result.attachments[0])
    assert saved.parent == browser.home / "screenshots"
    assert f"[image given to the model with this result: {saved.name}]" in shot.result.content
    _first, after_navigate, after_shot = env.llm.wait_for_requests(3)
    assert image_parts(after_navigate.body) == []
    assert image_parts(after_shot.body) == [data_url(saved.read_bytes())]
    (result,) = after_shot.body["messages"][-1]["content"]
    assert result["tool_use_id"] == "s1" and result["content"][2]["type"] == "image"


def test_an_mcp_image_reaches_the_next_request(make_env: Any, markers: Path) -> None:
    from app.core.mcp.manager import McpManager

    env = make_env("openai", "qwen2.5vl:7b")
    server = str(Path(__file__).with_name("mcp_servers.py"))
    config = env.home / "mcp.json"
    entry = {"command": sys.executable, "args": [server, "stdio"]}
    config.write_text(
        json.dumps({"mcpServers": {"test": entry | {"env": {"MCP_TEST_MARKERS": str(markers)}}}})
    )
    manager = McpManager(config, home=env.home)
    try:
        registry = ToolRegistry.default(None, entry_points=False)
        registry.add(manager.tool_manifests(wait=30), "mcp")
        env.llm.add(tool_calls(("p1", "mcp__test__picture", {})))
        env.llm.add(text("A tiny picture."))

        events = env.turn(env.agent(registry), env.conversation(registry), "Show the picture")
    finally:
        manager.shutdown()

    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    saved = Path(finished.result.attachments[0])
    assert saved.parent == env.home / "attachments"
    assert f"[image given to the model with this result: {saved.name}]" in finished.result.content
    _first, second = env.llm.wait_for_requests(2)
    assert image_parts(second.body) == [data_url(saved.read_bytes())]
    assert second.body["messages"][-2]["role"] == "tool"
    assert second.body["messages"][-1]["role"] == "user"


def test_the_request_redactor_leaves_image_bytes_alone(make_env: Any) -> None:
    """Every known secret is masked in a request's text at the one exit to the model, but
    never inside image bytes (they would no longer be an image)."""
    env = make_env("openai", "gpt-4o")
    image = PNG + bytes(range(256)) * 4
    encoded = base64.b64encode(image).decode("ascii")
    lookalike = encoded[40:80]  # a "secret" that happens to be in the bytes' base64
    env.files["one"] = [env.saved("a.png", image)]
    env.llm.add(tool_calls(("d1", "test_draw", {})))
    env.llm.add(text("A dot."))
    TRIPWIRE.remember([lookalike])
    try:
        env.turn(env.agent(), env.conversation(), f"Draw; the key is {lookalike}")
    finally:
        TRIPWIRE.forget(lookalike)

    _first, second = env.llm.wait_for_requests(2)
    assert image_parts(second.body) == [f"data:image/png;base64,{encoded}"]
    assert lookalike not in texts(second.body).replace(encoded, "")


# ---- the window: the user message says its images were not sent --------------------------------


def test_the_message_says_its_images_were_not_sent(qtbot: Any) -> None:
    from app.ui.chat.model import UserMessage
    from app.ui.chat.view import ChatView

    view = ChatView()
    qtbot.addWidget(view)
    view.add_user_message("What is this?", ["/tmp/cat.png"])
    view.handle_event(Notice("The attached images were not sent…", kind=vision.IMAGES_NOT_SENT))

    (message,) = [i for i in view.chat_model.items if isinstance(i, UserMessage)]
    assert message.attachments_note == "images not sent: this model does not take images"


def test_the_providers_page_sets_images_for_an_account(qtbot: Any, runtime: Any) -> None:
    from app.ui.settings.providers_page import ProvidersPage

    page = ProvidersPage(runtime)
    qtbot.addWidget(page)
    runtime.settings.providers[0].images = "off"
    page.load(runtime.settings)
    combo = page.images_combo
    assert combo.currentData() == "off"  # what the account says is shown
    combo.setCurrentIndex(combo.findData("on"))

    settings = runtime.settings.model_copy(deep=True)
    page.patch()(settings)
    assert settings.providers[0].images == "on"
