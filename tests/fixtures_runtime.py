"""The one way tests build a Runtime: a temporary home whose model accounts point at the
scripted model server (tests/fakellm.py).

`make_runtime(...)` builds one (each is closed after the test); `runtime` is the default one,
changed for a module or a test with `@pytest.mark.runtime(...)` (the same options) or with
`@pytest.mark.parametrize("runtime", [{...}], indirect=True)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from app.core.runtime import Runtime
from app.core.secrets import SecretStore
from app.core.settings import ProviderAccount, Settings
from tests.fakellm import ScriptedLLM
from tests.fixtures_keyring import MemoryKeyring

#: `roots=HOME`: the runtime's home is the one folder the file tools may use.
HOME = "<home>"

Keyring = Literal["null", "memory"]


@dataclass
class RuntimeFactory:
    """Builds runtimes for one test; see `__call__`."""

    home: Path
    llm: ScriptedLLM
    monkeypatch: pytest.MonkeyPatch
    made: list[Runtime] = field(default_factory=list)

    def __call__(
        self,
        *models: str,
        llm: ScriptedLLM | bool | None = True,
        kind: str = "openai",
        label: str = "Scripted",
        accounts: Sequence[ProviderAccount] | None = None,
        active: int = 0,
        roots: Sequence[str | Path] | None = None,
        keyring: Keyring = "null",
        configure: Callable[[Settings], None] | None = None,
        home: Path | None = None,
    ) -> Runtime:
        """A runtime in `home` (the test's by default), closed after the test.

        Model accounts: `accounts` as given (the `active`-th one in use); otherwise one per
        model name (default "scripted-model"), labelled `label`, all on `llm` (True: the
        test's `llm` fixture; None or False: no account at all), speaking `kind`.
        `roots`: the folders file tools may use (`HOME` for the home itself); None leaves
        the default. `keyring`: "null" (no keyring, no OPENAI_API_KEY from the machine) or
        "memory" (an in-memory keyring; the environment's keys stay). `configure` changes
        the settings last."""
        where = home or self.home
        self.monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
        if keyring == "null":
            self.monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        rt = Runtime(where, entry_points=False)
        self.made.append(rt)
        if keyring == "memory":
            rt.secrets = SecretStore(backend=MemoryKeyring(), home=where)
        chosen = self._accounts(models, llm, kind, label) if accounts is None else list(accounts)
        folders = None if roots is None else [str(where if r == HOME else r) for r in roots]
        if accounts is None and not chosen and folders is None and configure is None:
            return rt

        def change(settings: Settings) -> None:
            if accounts is not None:
                settings.providers = list(chosen)
                settings.active_provider = chosen[active].id if chosen else None
            elif chosen:
                settings.providers.extend(chosen)
                settings.active_provider = chosen[active].id
            if folders is not None:
                settings.files.allowed_roots = folders
            if configure is not None:
                configure(settings)

        rt.settings = rt.settings_store.update(change)
        return rt

    def _accounts(
        self, models: Sequence[str], llm: ScriptedLLM | bool | None, kind: str, label: str
    ) -> list[ProviderAccount]:
        if llm is None or llm is False:
            return []
        server = self.llm if llm is True else llm
        base = server.openai_base_url if kind == "openai" else server.base_url
        names = models or ("scripted-model",)
        return [
            ProviderAccount(
                kind=kind,
                label=label if len(names) == 1 else f"{label} {n}",
                base_url=base,
                model=model,
            )
            for n, model in enumerate(names, start=1)
        ]

    def close(self) -> None:
        for rt in self.made:
            rt.close()


@pytest.fixture
def make_runtime(
    home: Path, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RuntimeFactory]:
    """Builds runtimes on the scripted model server; all are closed after the test, before
    the server stops (as the app's runtime is gone before a model server would be)."""
    factory = RuntimeFactory(home, llm, monkeypatch)
    yield factory
    factory.close()


@pytest.fixture
def runtime(make_runtime: RuntimeFactory, request: pytest.FixtureRequest) -> Runtime:
    """The default runtime: one account on the test's scripted model server, no keyring."""
    options: dict[str, Any] = {}
    marker = request.node.get_closest_marker("runtime")
    if marker is not None:
        options.update(marker.kwargs)
        models = marker.args
    else:
        models = ()
    options.update(getattr(request, "param", None) or {})
    return make_runtime(*models, **options)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "runtime(*models, **options): how the `runtime` fixture is built"
    )
