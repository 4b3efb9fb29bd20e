"""`LocalModels`: the one owner of what a user does with the built-in engine's models —
list them with their state, pull one (from the catalogue or any Hugging Face GGUF), add a
file they already have, remove one, describe one, and make one the model Deskhand talks
to. The window and `deskhand models` both call this; neither holds its own copy.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.core.engine.catalogue import CatalogueModel, Machine
    from app.core.engine.download import DownloadProgress
    from app.core.engine.store import LocalModel, ModelStore
    from app.core.settings import ProviderAccount, Settings

#: "owner/repo/file.gguf" or "owner/repo:file.gguf": a Hugging Face GGUF not in the catalogue.
_HF_REF = re.compile(
    r"^(?P<repo>[\w.-]+/[\w.-]+)[:/](?P<file>[^/\\:\x00-\x1f]+\.gguf)$", re.IGNORECASE
)
ENGINE_LABEL = "Built-in engine"


class ModelError(ValueError):
    """What the user asked for cannot be done; the message says why, in plain words."""


#: What installs the built-in engine (an optional part of Deskhand).
ENGINE_EXTRA = "pip install 'deskhand[engine]'"


def engine_missing() -> str | None:
    """Why the built-in engine cannot run or download here (its packages are not installed:
    a minimal install), or None."""
    import importlib.util

    absent = [n for n in ("llama_cpp", "huggingface_hub") if importlib.util.find_spec(n) is None]
    if not absent:
        return None
    return (
        f"the built-in engine is not installed ({' and '.join(absent)} missing): "
        f"install it with {ENGINE_EXTRA}"
    )


@dataclass(frozen=True)
class ModelState:
    """A local model and what the engine is doing with it."""

    model: LocalModel
    loaded: bool
    rss_bytes: int
    #: What the engine chose when it loaded it ("CPU; context 8,192 tokens …"), or "".
    choice: str
    #: Why it stopped the last time, if it died (a stop on request or when idle is not shown).
    last_exit: str | None


@dataclass(frozen=True)
class CatalogueOffer:
    """A catalogue model as the user chooses from it."""

    model: CatalogueModel
    #: Its memory needed is within this computer's.
    fits: bool
    recommended: bool
    downloaded: bool
    #: Part of it was downloaded before (kept after a cancel or a cut connection).
    partial: bool


@dataclass(frozen=True)
class HubRef:
    repo: str
    file: str
    revision: str = "main"


class LocalModels:
    def __init__(
        self,
        home: Path,
        *,
        update_settings: Callable[[Callable[[Settings], None]], Settings],
        settings: Callable[[], Settings] | None = None,
        endpoint: Callable[[], str | None] = lambda: None,
        catalogue: Callable[[], tuple[CatalogueModel, ...]] | None = None,
    ) -> None:
        """`update_settings`: changes and saves the settings (the runtime's, so that they
        take effect); `endpoint`: the download URL base the settings ask for (None:
        $HF_ENDPOINT, else Hugging Face); `catalogue`: the models offered (the shipped
        list unless given)."""
        self.home = home
        self._update_settings = update_settings
        self._current = settings
        self._endpoint = endpoint
        self._catalogue = catalogue

    @property
    def store(self) -> ModelStore:
        from app.core.engine.store import ModelStore

        return ModelStore(self.home)

    # ------------------------------------------------------------------ reading

    def states(self) -> list[ModelState]:
        from app.core.engine.engine import engine

        running = {loaded.model_id: loaded for loaded in engine().loaded()}
        states = []
        for model in self.store.models():
            loaded = running.get(model.id)
            states.append(
                ModelState(
                    model=model,
                    loaded=loaded is not None,
                    rss_bytes=loaded.rss_bytes if loaded else 0,
                    choice=loaded.choice.why if loaded else "",
                    last_exit=engine().crashed(model.id),
                )
            )
        return states

    def catalogue(self) -> tuple[CatalogueModel, ...]:
        from app.core.engine.catalogue import catalogue

        return (self._catalogue or catalogue)()

    def recommended(self, machine: Machine | None = None) -> CatalogueModel | None:
        from app.core.engine.catalogue import recommend, this_machine

        return recommend(machine or this_machine(), models=self.catalogue())

    def offers(
        self, machine: Machine | None = None, *, purpose: str | None = None
    ) -> list[CatalogueOffer]:
        """The catalogue (of one `purpose`, or all) as the window and `deskhand models list
        --available` show it: the recommended model first, then chat models before
        embedding ones, each by memory needed (blocking: reads the models folder)."""
        from app.core.engine.catalogue import this_machine

        machine = machine or this_machine()
        best = self.recommended(machine)
        have = {m.id for m in self.store.models()}
        chosen = [m for m in self.catalogue() if purpose is None or m.purpose == purpose]
        chosen.sort(key=lambda m: (best is None or m.id != best.id, m.purpose, m.ram_bytes))
        return [
            CatalogueOffer(
                model=m,
                fits=m.ram_bytes <= machine.ram_total,
                recommended=best is not None and m.id == best.id,
                downloaded=m.id in have,
                partial=self.has_partial(m.file),
            )
            for m in chosen
        ]

    def _entry(self, ref: str) -> CatalogueModel | None:
        wanted = ref.strip().lower()
        return next((m for m in self.catalogue() if m.id == wanted), None)

    def find(self, name: str) -> LocalModel:
        model = self.store.resolve(name)
        if model is None:
            raise ModelError(f"no downloaded model is named {name!r}: see `deskhand models list`")
        return model

    def _settings(self) -> Settings:
        if self._current is not None:
            return self._current()
        return self._update_settings(lambda _: None)  # loads (and saves as it was)

    def has_partial(self, file: str) -> bool:
        """Whether part of `file` was downloaded and is kept for a resume."""
        from app.core.engine.download import partial_files

        partial_dir = self.store.download_dir()
        return bool(partial_files(partial_dir.parent / file, partial_dir))

    # ------------------------------------------------------------------ changing

    def pull(
        self,
        ref: str,
        *,
        progress: Callable[[DownloadProgress], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> LocalModel:
        """Download a catalogue model (by id) or a Hugging Face GGUF ("owner/repo/file.gguf"),
        check it, and add it. One already downloaded is returned as it is."""
        missing = engine_missing()
        if missing:
            raise ModelError(missing)
        from app.core.engine.download import download_model

        entry = self._entry(ref)
        store = self.store
        if entry is not None:
            existing = store.get(entry.id)
            if existing is not None and existing.path.is_file():
                return existing
            hub = HubRef(entry.repo, entry.file, entry.revision or "main")
            sha256, size, name, model_id = entry.sha256, entry.size, entry.name, entry.id
            source = "catalogue"
        else:
            hub = parse_hub_ref(ref)
            sha256, size, name, model_id = None, None, hub.file.removesuffix(".gguf"), None
            source = "huggingface"
        dest = store.download_dir().parent / hub.file
        if sha256 is None and dest.exists():
            # nothing to check it against: only Deskhand's download of this very file is it
            there = next((m for m in store.models() if m.path == dest), None)
            if there is None or (there.repo, there.file) != (hub.repo, hub.file):
                where = f"`deskhand models rm {there.id}`" if there else f"move {dest} away"
                raise ModelError(
                    f"another model file named {hub.file} is already in the models folder: "
                    f"{where} first"
                )
        path = download_model(
            repo=hub.repo,
            file=hub.file,
            revision=hub.revision,
            sha256=sha256,
            size=size,
            dest=dest,
            partial_dir=store.download_dir(),
            endpoint=self._endpoint(),
            progress=progress,
            cancel=cancel,
        )
        from app.core.engine.gguf import GgufError, read_gguf_info

        try:
            read_gguf_info(path)
        except GgufError as exc:
            path.unlink(missing_ok=True)
            raise ModelError(str(exc)) from exc
        return store.add_downloaded(
            model_id or _slug(name), name, path, source, hub.repo, hub.file, sha256
        )

    def add_file(self, path: Path) -> LocalModel:
        from app.core.engine.gguf import GgufError

        try:
            return self.store.add_file(path)
        except GgufError as exc:
            raise ModelError(str(exc)) from exc

    def remove(self, name: str) -> LocalModel:
        """Stop the engine for it and forget it; a file Deskhand downloaded is deleted, a
        file of the user's own is left where it is."""
        from app.core.engine.engine import engine

        model = self.find(name)
        engine().stop(model.id)
        removed = self.store.remove(model.id)
        store = self.store
        if any(
            a.kind == "engine" and store.resolve(a.model) is None
            for a in self._settings().providers
        ):
            left = [m.id for m in store.models()]

            def another(settings: Settings) -> None:
                """The engine's account was on that model: the next one, or none."""
                for account in settings.providers:
                    if account.kind == "engine" and store.resolve(account.model) is None:
                        account.model = left[0] if left else ""

            self._update_settings(another)
        return removed

    def use(self, model: LocalModel) -> ProviderAccount:
        """Make `model` the one Deskhand talks to: the built-in engine's account (made the
        first time) with this model, as the active account."""
        from app.core.providers.kinds import ENGINE_URL
        from app.core.settings import ProviderAccount

        made: list[ProviderAccount] = []

        def change(settings: Settings) -> None:
            account = next((p for p in settings.providers if p.kind == "engine"), None)
            if account is None:
                account = ProviderAccount(
                    kind="engine", label=ENGINE_LABEL, base_url=ENGINE_URL, model=model.id
                )
                settings.providers.append(account)
            else:
                account.model = model.id
            settings.active_provider = account.id
            made.append(account)

        self._update_settings(change)
        return made[0]


def parse_hub_ref(ref: str) -> HubRef:
    """ "owner/repo/file.gguf" or "owner/repo:file.gguf", optionally "@revision" at the end."""
    text, _, revision = ref.strip().partition("@")
    found = _HF_REF.match(text)
    if found is None:
        raise ModelError(
            f"{ref!r} is neither a model of the catalogue (see `deskhand models list "
            "--available`) nor a Hugging Face GGUF written as owner/repository/file.gguf"
        )
    return HubRef(found["repo"], found["file"], revision.strip() or "main")


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-") or "model"
