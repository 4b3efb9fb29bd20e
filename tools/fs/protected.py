"""Places the file tools never read or change, whatever the rules say: Deskhand's own home
and the usual credential stores. The catalogue is data; `protected_places` turns it into a
`Places` matcher (by name and by file identity) for the current user.

Entries start with a base:
  ~/…              the user's home
  $CONFIG/…        $XDG_CONFIG_HOME and ~/.config (both when they differ)
  $DATA/…          $XDG_DATA_HOME and ~/.local/share
  $STATE/…         $XDG_STATE_HOME and ~/.local/state
  $MAC/…           ~/Library/Application Support (macOS)
  $APPDATA/…       %APPDATA% and ~/AppData/Roaming (Windows)
  $LOCALAPPDATA/…  %LOCALAPPDATA% and ~/AppData/Local (Windows)
  ${NAME}          the value of environment variable NAME when it is set (a list for
                   KUBECONFIG-style variables); absent when unset
  /…               an absolute system path
Every platform's variants are always included: denying a path that does not exist costs
nothing, and a home synced between systems may hold any of them.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from tools.fs.places import Places

#: (what it is, where) — the label is shown in refusals ("…inside ~/.ssh (SSH and GPG keys)").
CATALOGUE: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "shell and console history",
        (
            "~/.bash_history",
            "~/.zsh_history",
            "~/.zhistory",
            "~/.histfile",
            "~/.sh_history",
            "~/.history",
            "$DATA/fish/fish_history",
            "~/.python_history",
            "$STATE/python_history",
            "~/.node_repl_history",
            "~/.psql_history",
            "~/.mysql_history",
            "~/.sqlite_history",
            "~/.rediscli_history",
            "~/.irb_history",
            "~/.pry_history",
            "~/.lesshst",
            "$STATE/lesshst",
            "~/.viminfo",
            "$STATE/nvim/shada",
            "~/.local/share/nvim/shada",
            "~/.dbshell",
            "~/.scala_history",
            "~/.Rhistory",
            "~/.julia/logs/repl_history.jl",
            "$APPDATA/Microsoft/Windows/PowerShell/PSReadLine",
            "${HISTFILE}",
            "${PSQL_HISTORY}",
            "${MYSQL_HISTFILE}",
            "${SQLITE_HISTORY}",
            "${NODE_REPL_HISTORY}",
            "${PYTHON_HISTORY}",
            "${LESSHISTFILE}",
        ),
    ),
    (
        "SSH and GPG keys",
        (
            "~/.ssh",
            "~/.gnupg",
            "$APPDATA/gnupg",
            "${GNUPGHOME}",
            "/etc/ssh",
        ),
    ),
    (
        "package manager tokens",
        (
            "~/.npmrc",
            "${NPM_CONFIG_USERCONFIG}",
            "~/.yarnrc",
            "~/.yarnrc.yml",
            "~/.bunfig.toml",
            "~/.pypirc",
            "~/.pip/pip.conf",
            "$CONFIG/pip/pip.conf",
            "$MAC/pip/pip.conf",
            "$APPDATA/pip/pip.ini",
            "~/.config/pypoetry/auth.toml",
            "$CONFIG/pypoetry/auth.toml",
            "$MAC/pypoetry/auth.toml",
            "~/.cargo/credentials",
            "~/.cargo/credentials.toml",
            "${CARGO_HOME}/credentials",
            "${CARGO_HOME}/credentials.toml",
            "~/.gem/credentials",
            "~/.local/share/gem/credentials",
            "~/.m2/settings.xml",
            "~/.m2/settings-security.xml",
            "~/.gradle/gradle.properties",
            "${GRADLE_USER_HOME}/gradle.properties",
            "~/.nuget",
            "$APPDATA/NuGet/NuGet.Config",
            "$CONFIG/NuGet",
            "~/.composer/auth.json",
            "$CONFIG/composer/auth.json",
            "$APPDATA/Composer/auth.json",
            "~/.docker/config.json",
            "${DOCKER_CONFIG}/config.json",
            "~/.gem/credentials",
            "~/.hex/hex.config",
            "~/.cabal/config",
            "~/.pub-cache/credentials.json",
            "$CONFIG/dart/pub-credentials.json",
        ),
    ),
    (
        "git and forge credentials",
        (
            "~/.git-credentials",
            "$CONFIG/git/credentials",
            "$CONFIG/gh",
            "$APPDATA/GitHub CLI",
            "$CONFIG/hub",
            "$CONFIG/glab-cli",
            "$CONFIG/tea",
            "~/.config/git/credentials",
        ),
    ),
    (
        "cloud and cluster credentials",
        (
            "~/.aws",
            "${AWS_SHARED_CREDENTIALS_FILE}",
            "${AWS_CONFIG_FILE}",
            "~/.azure",
            "${AZURE_CONFIG_DIR}",
            "$CONFIG/gcloud",
            "$APPDATA/gcloud",
            "${CLOUDSDK_CONFIG}",
            "~/.kube",
            "${KUBECONFIG}",
            "~/.oci",
            "$CONFIG/doctl",
            "$MAC/doctl",
            "~/.terraform.d/credentials.tfrc.json",
            "$APPDATA/terraform.d/credentials.tfrc.json",
            "~/.vault-token",
            "$CONFIG/helm",
            "$MAC/helm",
            "$APPDATA/helm",
            "~/.netrc",
            "~/_netrc",
            "${NETRC}",
            "~/.pgpass",
            "$APPDATA/postgresql/pgpass.conf",
            "${PGPASSFILE}",
            "~/.my.cnf",
            "~/.mylogin.cnf",
            "~/.s3cfg",
            "~/.boto",
            "~/.config/rclone",
            "$CONFIG/rclone",
            "~/.fly",
            "~/.config/heroku",
            "~/.netlify",
            "$CONFIG/netlify",
            "~/.vercel",
            "$CONFIG/vercel",
            "$DATA/com.vercel.cli",
            "~/.wrangler",
            "$CONFIG/.wrangler",
            "~/.ngrok2",
            "$CONFIG/ngrok",
            "~/.config/op",
            "~/.docker/contexts",
            "~/.minikube",
            "~/.talos",
            "~/.config/openstack",
        ),
    ),
    (
        "another AI app's settings and keys",
        (
            "$CONFIG/Claude",
            "$MAC/Claude",
            "$APPDATA/Claude",
            "~/.claude",
            "~/.claude.json",
            "~/.cursor",
            "$CONFIG/Cursor",
            "$MAC/Cursor",
            "$APPDATA/Cursor",
            "~/.codex",
            "$CONFIG/goose",
            "~/.continue",
            "~/.aider.conf.yml",
            "~/.aider",
            "~/.env.aider",
            "$CONFIG/github-copilot",
            "$LOCALAPPDATA/github-copilot",
            "~/.gemini",
            "$CONFIG/openai",
            "~/.openai",
            "$CONFIG/llm",
            "$MAC/io.datasette.llm",
            "~/.ollama",
            "$CONFIG/lm-studio",
            "~/.lmstudio",
            "$CONFIG/chatgpt",
            "$MAC/com.openai.chat",
            "~/.windsurf",
            "~/.codeium",
        ),
    ),
    (
        "password managers and keyrings",
        (
            "~/.password-store",
            "${PASSWORD_STORE_DIR}",
            "$DATA/keyrings",
            "~/.local/share/keyrings",
            "$DATA/kwalletd",
            "$CONFIG/KeePassXC",
            "$CACHE/keepassxc",
            "$APPDATA/KeePassXC",
            "$APPDATA/KeePass",
            "~/Library/Keychains",
            "$CONFIG/Bitwarden",
            "$CONFIG/Bitwarden CLI",
            "$MAC/Bitwarden",
            "$APPDATA/Bitwarden",
            "$CONFIG/1Password",
            "~/.1password",
            "~/.config/op",
            "$MAC/1Password",
            "$LOCALAPPDATA/1Password",
            "$APPDATA/Microsoft/Credentials",
            "$LOCALAPPDATA/Microsoft/Credentials",
            "$APPDATA/Microsoft/Protect",
            "~/Library/Group Containers/2BUA8C4S2C.com.1password",
        ),
    ),
    (
        "browser profiles (cookies and saved passwords)",
        (
            "~/.mozilla",
            "~/.librewolf",
            "~/.waterfox",
            "$CONFIG/google-chrome",
            "$CONFIG/google-chrome-beta",
            "$CONFIG/google-chrome-unstable",
            "$CONFIG/chromium",
            "$CONFIG/BraveSoftware",
            "$CONFIG/microsoft-edge",
            "$CONFIG/microsoft-edge-beta",
            "$CONFIG/vivaldi",
            "$CONFIG/opera",
            "~/snap/firefox",
            "~/snap/chromium",
            "~/.var/app/org.mozilla.firefox",
            "~/.var/app/com.google.Chrome",
            "~/.var/app/org.chromium.Chromium",
            "~/.var/app/com.brave.Browser",
            "~/.var/app/com.microsoft.Edge",
            "$MAC/Google/Chrome",
            "$MAC/Chromium",
            "$MAC/Firefox",
            "$MAC/BraveSoftware",
            "$MAC/Microsoft Edge",
            "$MAC/Vivaldi",
            "$MAC/com.operasoftware.Opera",
            "$MAC/Arc",
            "~/Library/Safari",
            "~/Library/Cookies",
            "~/Library/Containers/com.apple.Safari",
            "$APPDATA/Mozilla",
            "$APPDATA/Opera Software",
            "$LOCALAPPDATA/Google/Chrome/User Data",
            "$LOCALAPPDATA/Chromium/User Data",
            "$LOCALAPPDATA/Microsoft/Edge/User Data",
            "$LOCALAPPDATA/BraveSoftware",
            "$LOCALAPPDATA/Vivaldi",
        ),
    ),
    (
        "system passwords",
        (
            "/etc/shadow",
            "/etc/shadow-",
            "/etc/gshadow",
            "/etc/gshadow-",
            "/etc/master.passwd",
            "/etc/sudoers",
            "/etc/sudoers.d",
            "/etc/security/opasswd",
            "/var/db/sudo",
            "${SystemRoot}/System32/config",
        ),
    ),
)

#: File names refused wherever they are (copies of keys and vaults are still secrets).
NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    ("*.kdbx", "a password database"),
    ("*.kdb", "a password database"),
    ("*.psafe3", "a password database"),
    ("*.opvault", "a password database"),
    ("*.agilekeychain", "a password database"),
    ("*.keychain", "a keychain"),
    ("*.keychain-db", "a keychain"),
    (".git-credentials", "git credentials"),
    (".netrc", "saved logins"),
    ("_netrc", "saved logins"),
    (".pgpass", "saved logins"),
    (".vault-token", "a Vault token"),
    (".bash_history", "shell history"),
    (".zsh_history", "shell history"),
    ("fish_history", "shell history"),
    (".python_history", "console history"),
    (".node_repl_history", "console history"),
    (".psql_history", "console history"),
    (".mysql_history", "console history"),
    (".sqlite_history", "console history"),
)

DESKHAND_HOME_LABEL = "Deskhand's own folder (settings, rules, secrets, history)"

#: Catalogue variables whose value may be a list of paths.
_LIST_VARIABLES = frozenset({"KUBECONFIG"})


def _bases(home: Path, environ: Mapping[str, str]) -> dict[str, list[Path]]:
    def with_default(variable: str, default: Path) -> list[Path]:
        value = environ.get(variable)
        paths = [default]
        if value and Path(value).is_absolute() and Path(value) != default:
            paths.append(Path(value))
        return paths

    return {
        "~": [home],
        "$CONFIG": with_default("XDG_CONFIG_HOME", home / ".config"),
        "$DATA": with_default("XDG_DATA_HOME", home / ".local" / "share"),
        "$STATE": with_default("XDG_STATE_HOME", home / ".local" / "state"),
        "$CACHE": with_default("XDG_CACHE_HOME", home / ".cache"),
        "$MAC": [home / "Library" / "Application Support"],
        "$APPDATA": with_default("APPDATA", home / "AppData" / "Roaming"),
        "$LOCALAPPDATA": with_default("LOCALAPPDATA", home / "AppData" / "Local"),
    }


def expand(entry: str, home: Path, environ: Mapping[str, str]) -> list[Path]:
    """The absolute paths one catalogue entry stands for here (none for an unset variable)."""
    head, _, rest = entry.partition("/")
    if head.startswith("${") and head.endswith("}"):
        variable = head[2:-1]
        value = environ.get(variable)
        if not value:
            return []
        values = value.split(os.pathsep) if variable in _LIST_VARIABLES else [value]
        found = [Path(os.path.expanduser(v)) for v in values if v]
        return [p / rest if rest else p for p in found if p.is_absolute()]
    if head == "":
        return [Path(entry)]
    bases = _bases(home, environ).get(head)
    if bases is None:
        raise ValueError(f"unknown base {head!r} in protected catalogue entry {entry!r}")
    return [base / rest for base in bases]


def catalogue_paths(home: Path, environ: Mapping[str, str]) -> list[tuple[Path, str]]:
    """Every catalogue entry as (absolute path, label) for this user."""
    out: list[tuple[Path, str]] = []
    for label, entries in CATALOGUE:
        for entry in entries:
            out.extend((path, label) for path in expand(entry, home, environ))
    return out


def protected_places(
    home: Path,
    deskhand_home: Path | None,
    extra: Iterable[Path] = (),
    environ: Mapping[str, str] | None = None,
) -> Places:
    """The matcher for one tool call (shares the cached catalogue; its own deep index)."""
    env = os.environ if environ is None else environ
    variables = tuple((k, v) for k in _SORTED_VARIABLES if (v := env.get(k)) is not None)
    return _cached(home, deskhand_home, tuple(extra), variables).fresh()


def _catalogue_variables() -> frozenset[str]:
    names = {"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"}
    names |= {"APPDATA", "LOCALAPPDATA"}
    for _, entries in CATALOGUE:
        for entry in entries:
            head = entry.partition("/")[0]
            if head.startswith("${"):
                names.add(head[2:-1])
    return frozenset(names)


_VARIABLES = _catalogue_variables()
_SORTED_VARIABLES = tuple(sorted(_VARIABLES))


@functools.lru_cache(maxsize=16)
def _cached(
    home: Path,
    deskhand_home: Path | None,
    extra: tuple[Path, ...],
    variables: tuple[tuple[str, str], ...],
) -> Places:
    entries = catalogue_paths(home, dict(variables))
    if deskhand_home is not None:
        entries.insert(0, (deskhand_home, DESKHAND_HOME_LABEL))
    entries += [(path, "a folder you protected in Settings") for path in extra]
    return Places(entries, NAME_PATTERNS)
