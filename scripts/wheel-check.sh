#!/usr/bin/env bash
# Builds callcheck's wheel from a clean checkout of HEAD, installs it into a fresh virtual
# environment and runs it there as a Python user would: `callcheck --version`, then
# `callcheck demo` in an empty folder (the binary brings its own task corpus). Prints the time
# of each step and the total.
#
#   scripts/wheel-check.sh            # everything in a temporary folder, removed at the end
#   KEEP=1 scripts/wheel-check.sh     # keep it (its path is printed)
#
# Needs git, python3 with venv, a Rust toolchain (maturin compiles with cargo) and PyPI (maturin
# is installed from there into the build's own venv). Nothing outside the temporary folder is
# written except cargo's download cache.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON="${PYTHON:-python3}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/callcheck-wheel.XXXXXX")
if [ -z "${KEEP:-}" ]; then
  trap 'rm -rf "$WORK"' EXIT
fi
started=$SECONDS
last=$SECONDS
step() {
  last=$SECONDS
  printf '\n==> [%ss] %s\n' "$((SECONDS - started))" "$*"
}
took() { printf '    (%ss)\n' "$((SECONDS - last))"; }

step "clean checkout of HEAD ($(git -C "$REPO" rev-parse --short HEAD)) into $WORK/src"
git clone --quiet --no-hardlinks "$REPO" "$WORK/src"
git -C "$WORK/src" checkout --quiet "$(git -C "$REPO" rev-parse HEAD)"
took

step "maturin from PyPI into a build venv"
"$PYTHON" -m venv "$WORK/build-venv"
"$WORK/build-venv/bin/python" -m pip install --quiet "maturin>=1.9,<2"
"$WORK/build-venv/bin/maturin" --version
took

step "build the wheel (release, from scratch: its own target folder)"
(cd "$WORK/src" && CARGO_TARGET_DIR="$WORK/target" \
  "$WORK/build-venv/bin/maturin" build --release --locked --out "$WORK/dist")
ls -l "$WORK/dist"
took

step "install it into a fresh venv"
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet "$WORK"/dist/callcheck-*.whl
took

step "callcheck --version"
got=$("$WORK/venv/bin/callcheck" --version)
want="callcheck $(sed -n 's/^version = "\(.*\)"$/\1/p' "$WORK/src/Cargo.toml" | head -n1)"
echo "$got"
[ "$got" = "$want" ] || { echo "expected '$want'" >&2; exit 1; }
took

step "callcheck demo in an empty folder, with the venv's bin/ on PATH"
mkdir "$WORK/try"
(cd "$WORK/try" && PATH="$WORK/venv/bin:$PATH" callcheck demo --quiet)
[ -f "$WORK/try/site/index.html" ] || { echo "the demo wrote no site/index.html" >&2; exit 1; }
echo "site: $(find "$WORK/try/site" -type f | wc -l) files; tasks: $(find "$WORK/try/tasks" -name '*.json' | wc -l) task files"
took

printf '\nwheel-check: ok in %ss\n' "$((SECONDS - started))"
[ -n "${KEEP:-}" ] && echo "kept: $WORK"
exit 0
