#!/usr/bin/env bash
# Installs everything the tests need (system packages, .venv) and runs lint + the test suite.
# Test services (D-Bus + gnome-keyring, the scripted model server, ...) are started by the
# test fixtures themselves.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
ensure_apt python3-venv git gnome-keyring dbus dbus-x11 docker.io busybox-static iptables chromium build-essential "${QT_RUNTIME_PACKAGES[@]}"
ensure_venv gui,test
cd "$ROOT"
echo "== ruff"
"$VENV/bin/ruff" check .
echo "== package test (build the Linux bundle and .deb, install, start, remove)"
./scripts/package-test.sh
echo "== pytest"
export QT_QPA_PLATFORM=offscreen
set +e
"$VENV/bin/python" -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$status"
