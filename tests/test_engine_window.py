"""The built-in engine in the window: the first-run card downloads a model (from a fake
Hugging Face endpoint serving the real SmolLM2 GGUF over HTTP) or takes a model file, and
Settings → Providers lists the engine's models with their state and Remove."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox

from app.core.engine.models import ENGINE_LABEL, ModelState
from app.core.engine.store import LocalModel, ModelStore
from app.core.runtime import Runtime
from app.core.settings import ProviderAccount
from app.ui.engine_models import Offer, progress_text, size_text, state_text
from app.ui.main_window import MainWindow
from app.ui.settings.providers_page import ProvidersPage
from app.ui.setup_card import SetupCard
from tests.fixtures_qt import wait_until
from tests.hf_endpoint import SMOLLM_FILE, SMOLLM_REPO, HFEndpoint, smollm_path

pytestmark = pytest.mark.gui

SMOLLM_REF = f"{SMOLLM_REPO}/{SMOLLM_FILE}"
#: Where the fake endpoint holds a response until released: part-way through the file.
STALL_AT = 40 * 2**20


@pytest.fixture
def hub() -> Iterator[HFEndpoint]:
    with HFEndpoint() as endpoint:
        yield endpoint


@pytest.fixture
def rt(home: Path, hub: HFEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    """A first run: no provider; models are downloaded from the fake endpoint."""
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    runtime = Runtime(home, entry_points=False)

    def point(settings):
        settings.engine.endpoint = hub.url

    runtime.update_settings(point)
    yield runtime
    runtime.close()


def smollm_offer(hub: HFEndpoint) -> Offer:
    return Offer(SMOLLM_REF, "SmolLM2 135M Instruct", hub.size())


async def first_run_window(qtbot, rt: Runtime) -> MainWindow:
    """The window with no provider and no server answering, its card showing the model
    the catalogue recommends for this computer (replaced by SmolLM2, served by `hub`)."""
    win = MainWindow(rt)
    qtbot.addWidget(win)
    win.local_candidates = [("Ollama", "http://127.0.0.1:9/v1")]
    win.show()
    win.activateWindow()
    card = win.setup_card
    recommended = rt.local_models.recommended()
    assert recommended is not None, "the test machine has too little memory for the catalogue"
    await wait_until(lambda: card.download.button.isVisible(), what="the download button")
    assert card.download.button.text() == (
        f"Download {recommended.name} ({size_text(recommended.size)})"
    )
    assert "stays on this computer" in card.local_note.text()
    await wait_until(lambda: "No local server answered" in card.status.text())
    return win


def test_the_card_downloads_a_model_then_the_composer_is_ready(qtbot, qloop, rt, hub):
    hub.stall_at(STALL_AT)

    async def body():
        win = await first_run_window(qtbot, rt)
        card = win.setup_card
        card.show_offer(smollm_offer(hub))
        assert (
            card.download.button.text()
            == f"Download SmolLM2 135M Instruct ({size_text(hub.size())})"
        )
        qtbot.mouseClick(card.download.button, Qt.MouseButton.LeftButton)
        await wait_until(hub.stalled.is_set, timeout=30, what="the download part-way")
        await wait_until(lambda: " of " in card.download.status.text(), what="progress")
        assert card.download.progress_row.isVisible() and card.download.bar.value() > 0
        assert re.fullmatch(r"[\d,]+ of [\d,]+ MB( · .*)?", card.download.status.text())
        hub.release.set()
        await wait_until(lambda: win.chat_stack.currentIndex() == 0, timeout=60, what="done")
        account = rt.settings_store.load().active_provider_account()
        assert account is not None and account.kind == "engine"
        assert account.label == ENGINE_LABEL
        model = ModelStore(rt.home).resolve(account.model)
        assert model is not None and model.path.is_file() and model.owned
        assert QApplication.focusWidget() is win.composer.edit
        # and the real engine answers in the window
        win.composer.edit.setPlainText("Say hello in one word.")
        qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)

        def answered() -> bool:
            conversation = win.controller.conversation
            return (
                not win.controller.busy
                and conversation is not None
                and bool(conversation.messages)
                and conversation.messages[-1].role == "assistant"
            )

        await wait_until(answered, timeout=120, what="the engine's answer")
        conversation = win.controller.conversation
        assert conversation is not None
        answer = conversation.messages[-1]
        assert answer.role == "assistant" and answer.content.strip()
        from app.core.engine.engine import engine

        assert [m.model_id for m in engine().loaded()] == [model.id]
        engine().stop_all()
        win.stop_background_work()

    qloop.run_until_complete(body())


def test_cancel_keeps_the_partial_download_and_offers_to_resume(qtbot, qloop, rt, hub):
    hub.stall_at(STALL_AT)

    async def body():
        win = await first_run_window(qtbot, rt)
        control = win.setup_card.download
        win.setup_card.show_offer(smollm_offer(hub))
        qtbot.mouseClick(control.button, Qt.MouseButton.LeftButton)
        await wait_until(hub.stalled.is_set, timeout=30, what="the download part-way")
        qtbot.mouseClick(control.cancel_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: control.button.isVisible(), timeout=30, what="the stop")
        assert control.button.text() == "Resume download"
        assert not control.error.isVisible()
        partial = list(ModelStore(rt.home).download_dir().glob("*.part"))
        assert len(partial) == 1
        kept = partial[0].stat().st_size
        assert 0 < kept < hub.size()
        assert rt.local_models.has_partial(SMOLLM_FILE)  # offered as a resume next time
        assert win.chat_stack.currentIndex() == 1  # still the card: nothing to run yet
        hub.release.set()
        qtbot.mouseClick(control.button, Qt.MouseButton.LeftButton)  # resumes from there
        await wait_until(lambda: win.chat_stack.currentIndex() == 0, timeout=60, what="done")
        assert f"bytes={kept}-" in hub.ranges()  # only the rest came
        win.stop_background_work()

    qloop.run_until_complete(body())


def test_a_file_that_is_not_gguf_is_refused_under_its_button(qtbot, rt, tmp_path, monkeypatch):
    not_a_model = tmp_path / "notes.gguf"
    not_a_model.write_text("shopping list: milk, eggs\n" * 40)
    monkeypatch.setattr(
        QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(not_a_model), ""))
    )
    card = SetupCard()
    qtbot.addWidget(card)
    card.set_models_source(lambda: rt.local_models)
    card.show()
    qtbot.mouseClick(card.file_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(card.file_error.isVisible, timeout=10_000)
    assert "notes.gguf is not a GGUF model file" in card.file_error.text()
    assert card.file_button.isEnabled()
    assert ModelStore(rt.home).models() == []


def test_a_model_file_of_ones_own_is_used_from_the_card(qtbot, qloop, rt, tmp_path, monkeypatch):
    own = tmp_path / "mine" / SMOLLM_FILE
    own.parent.mkdir()
    shutil.copyfile(smollm_path(), own)
    monkeypatch.setattr(
        QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(own), ""))
    )

    async def body():
        win = await first_run_window(qtbot, rt)
        qtbot.mouseClick(win.setup_card.file_button, Qt.MouseButton.LeftButton)
        await wait_until(lambda: win.chat_stack.currentIndex() == 0, what="the model in use")
        account = rt.settings.active_provider_account()
        assert account is not None and account.kind == "engine"
        model = ModelStore(rt.home).resolve(account.model)
        assert model is not None and model.path == own and not model.owned
        assert QApplication.focusWidget() is win.composer.edit
        win.stop_background_work()

    qloop.run_until_complete(body())


def test_the_providers_page_lists_the_engine_models_and_removes_one(
    qtbot, qloop, rt, hub, tmp_path, monkeypatch
):
    downloaded = rt.local_models.pull(SMOLLM_REF)
    own = tmp_path / "mine" / "my-model.gguf"
    own.parent.mkdir()
    shutil.copyfile(smollm_path(), own)
    mine = rt.local_models.add_file(own)
    rt.local_models.use(downloaded)
    page = ProvidersPage(rt)
    qtbot.addWidget(page)
    page.show()
    item = page.account_list.item(page._index_of(rt.settings.active_provider))
    assert item.text() == "Built-in engine"
    assert page.details.currentWidget() is page.engine_panel
    assert page.engine_panel.active_note.isVisible()
    panel = page.engine_panel
    qtbot.waitUntil(lambda: len(panel.rows) == 2, timeout=10_000)
    by_id = {row.state.model.id: row for row in panel.rows}
    assert by_id[downloaded.id].state_label.text() == "Downloaded"
    assert by_id[downloaded.id].chosen_note.isVisible()
    assert by_id[mine.id].use_button.isVisible()
    assert str(own) in by_id[mine.id].source.text()

    asked: list[str] = []

    def answer(box: QMessageBox) -> int:
        asked.append(f"{box.text()} {box.informativeText()}")
        return int(QMessageBox.StandardButton.Yes)

    monkeypatch.setattr(QMessageBox, "exec", answer)
    qtbot.mouseClick(by_id[mine.id].remove_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(panel.rows) == 1, timeout=10_000)
    assert "Your file stays where it is" in asked[0]
    assert own.is_file()  # the user's own file is kept
    qtbot.mouseClick(panel.rows[0].remove_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.rows and panel.empty.isVisible(), timeout=10_000)
    assert "is deleted" in asked[1]
    assert not downloaded.path.exists()  # Deskhand's download is deleted
    assert ModelStore(rt.home).models() == []
    assert page.engine_account() is not None and page.engine_account().model == ""


def test_use_on_the_providers_page_makes_the_engine_active_on_save(qtbot, rt, tmp_path):
    other = ProviderAccount(kind="openai", label="Server", base_url="http://127.0.0.1:9/v1")

    def add(settings):
        settings.providers.append(other)
        settings.active_provider = other.id

    rt.update_settings(add)
    own = tmp_path / "my-model.gguf"
    shutil.copyfile(smollm_path(), own)
    mine = rt.local_models.add_file(own)
    page = ProvidersPage(rt)
    qtbot.addWidget(page)
    page.show()
    page.add_button.menu().actions()[-1].trigger()  # Add → Built-in engine
    assert page.details.currentWidget() is page.engine_panel
    qtbot.waitUntil(lambda: len(page.engine_panel.rows) == 1, timeout=10_000)
    qtbot.mouseClick(page.engine_panel.rows[0].use_button, Qt.MouseButton.LeftButton)
    assert page.problem() is None
    saved = rt.settings_store.update(page.patch())
    account = saved.active_provider_account()
    assert account is not None and account.kind == "engine" and account.model == mine.id


def test_a_model_state_is_said_in_words():
    model = LocalModel("m", "M", Path("m.gguf"), "catalogue", None, None, 10**8, None, True)
    loaded = ModelState(model, True, 1_234_000_000, "CPU; context 8,192 tokens", None)
    assert state_text(loaded) == "Loaded · 1.2 GB in use · CPU; context 8,192 tokens"
    died = ModelState(model, False, 0, "", "it ran out of memory")
    assert state_text(died) == "Downloaded\nStopped last time: it ran out of memory"


def test_download_progress_is_said_in_megabytes_speed_and_time_left():
    from app.core.engine.download import DownloadProgress

    progress = DownloadProgress(412_000_000, 1_117_320_736, 18_000_000, 39.2)
    assert progress_text(progress) == "412 of 1,117 MB · 18 MB/s · about 39 s left"
    assert progress_text(DownloadProgress(0, 1_117_320_736, 0.0, None)) == "0 of 1,117 MB"


def test_a_computer_with_too_little_memory_is_told_so_plainly(qtbot, rt):
    from app.core.engine.catalogue import Machine

    small = Machine(ram_total=256 * 2**20, ram_available=128 * 2**20, vram=0, gpu=None)
    assert rt.local_models.recommended(small) is None
    card = SetupCard()
    qtbot.addWidget(card)
    card.show()
    card.show_offer(None)
    assert card.download.button.isHidden()
    assert card.local_note.text().startswith("This computer has too little memory")
    assert card.file_button.isVisible()  # a smaller file of one's own can still be used


def test_download_a_model_lists_the_catalogue_recommended_first(qtbot, rt):
    page = ProvidersPage(rt)
    qtbot.addWidget(page)
    page.show()
    page.add_engine()
    panel = page.engine_panel
    qtbot.mouseClick(panel.download_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.catalogue_combo.count() > 0, timeout=10_000)
    chat = [m for m in rt.local_models.catalogue() if m.purpose == "chat"]
    assert panel.catalogue_combo.count() == len(chat)
    best = rt.local_models.recommended()
    assert best is not None
    assert panel.catalogue_combo.itemText(0).startswith(f"{best.name} — ")
    assert panel.catalogue_combo.itemText(0).endswith("(recommended)")
    assert panel.download.button.text() == f"Download {best.name} ({size_text(best.size)})"
