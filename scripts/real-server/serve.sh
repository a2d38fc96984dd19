#!/usr/bin/env bash
# Start llama-server (built by setup.sh) on 127.0.0.1 with the Hermes-style ChatML tools
# template and SmolLM2-135M-Instruct, wait until it answers, and print its pid.
#
#   PID=$(scripts/real-server/serve.sh [--port 8088] [--repack] [-- extra llama-server args...])
#   ...
#   scripts/real-server/stop.sh "$PID"
#
# Progress goes to stderr; stdout carries only the pid (the last and only line), so
# `PID=$(serve.sh)` or `serve.sh | tail -1` captures it. The server keeps running after
# this script exits; its log is $CACHE/logs/llama-server-<port>.log.
#
# Environment: CALLCHECK_CACHE (see setup.sh), CTX (total context, default 8192: with
# --parallel 2 each slot gets 4096 tokens), PARALLEL (slots, default 2), THREADS (default 2),
# ALIAS (served model id, default smollm2), WAIT_SECS (default 60), CALLCHECK_LLAMA_REPACK.
#
# Weight repacking is off by default (llama-server --no-repack). The build is tuned to the
# building CPU (-march=native), and on a host whose CPU advertises AMX and AVX-512 the server
# crashed while repacking the weights at load (a general protection fault / segmentation
# fault, exit 139, right after its thread pool starts); with --no-repack the same binary is
# healthy after 1 s. Repacking only speeds up some quantisation types on some CPUs; for a
# 135M model the difference is small. `--repack` (or CALLCHECK_LLAMA_REPACK=1) restores it.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE="${CALLCHECK_CACHE:-$HOME/.cache/callcheck}/real-server"
BIN="$CACHE/bin/llama-server"
MODEL="$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
TEMPLATE="$HERE/chatml-tools.jinja"
PORT=8088
CTX="${CTX:-8192}"
PARALLEL="${PARALLEL:-2}"
THREADS="${THREADS:-2}"
ALIAS="${ALIAS:-smollm2}"
WAIT_SECS="${WAIT_SECS:-60}"
EXTRA=()
REPACK="${CALLCHECK_LLAMA_REPACK:-0}"

say() { printf 'serve.sh: %s\n' "$*" >&2; }
die() { printf 'serve.sh: error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --port) [ $# -ge 2 ] || die "--port needs a value"; PORT="$2"; shift 2 ;;
        --port=*) PORT="${1#--port=}"; shift ;;
        --repack) REPACK=1; shift ;;
        --) shift; EXTRA=("$@"); break ;;
        -h|--help) sed -n '2,23p' "$0" >&2; exit 0 ;;
        *) die "unknown argument: $1 (usage: serve.sh [--port N] [--repack] [-- llama-server args])" ;;
    esac
done
case "$PORT" in ''|*[!0-9]*) die "--port must be a number, got '$PORT'" ;; esac
case "$REPACK" in
    1) REPACK_ARGS=() ;;
    0|'') REPACK_ARGS=(--no-repack) ;;
    *) die "CALLCHECK_LLAMA_REPACK must be 1 (repack the weights) or 0 (the default, --no-repack), got '$REPACK'" ;;
esac

[ -x "$BIN" ] || die "$BIN not found: run scripts/real-server/setup.sh first"
[ -s "$MODEL" ] || die "$MODEL not found: run scripts/real-server/setup.sh first"
[ -f "$TEMPLATE" ] || die "$TEMPLATE not found"

BASE="http://127.0.0.1:$PORT"
if curl -s -o /dev/null --max-time 2 "$BASE/health"; then
    die "something already answers on $BASE: stop it first, or pick another --port"
fi

mkdir -p "$CACHE/logs"
LOG="$CACHE/logs/llama-server-$PORT.log"
ARGS=(
    --host 127.0.0.1 --port "$PORT"
    -m "$MODEL" --alias "$ALIAS"
    --jinja --chat-template-file "$TEMPLATE"
    -c "$CTX" --parallel "$PARALLEL" -t "$THREADS"
    --no-webui
    "${REPACK_ARGS[@]}"
    "${EXTRA[@]}"
)
say "starting $BIN ${ARGS[*]}"
say "log: $LOG"
# nohup execs the server, so $! is the llama-server pid itself.
nohup "$BIN" "${ARGS[@]}" >"$LOG" 2>&1 </dev/null &
PID=$!

start=$(date +%s)
while :; do
    if ! kill -0 "$PID" 2>/dev/null; then
        say "llama-server (pid $PID) exited during startup; last log lines:"
        tail -n 30 "$LOG" >&2 || true
        if [ ${#REPACK_ARGS[@]} -eq 0 ]; then
            say "weight repacking was on (--repack / CALLCHECK_LLAMA_REPACK=1): it crashes on some AMX/AVX-512 CPUs; try without it"
        fi
        exit 1
    fi
    if curl -sf -o /dev/null --max-time 2 "$BASE/health" \
       && curl -sf -o /dev/null --max-time 2 "$BASE/v1/models"; then
        break
    fi
    if [ $(( $(date +%s) - start )) -ge "$WAIT_SECS" ]; then
        say "no answer from $BASE/health within ${WAIT_SECS}s; stopping pid $PID; last log lines:"
        tail -n 30 "$LOG" >&2 || true
        kill "$PID" 2>/dev/null || true
        exit 1
    fi
    sleep 0.5
done
say "ready after $(( $(date +%s) - start ))s at $BASE/v1 (model id: $(curl -s "$BASE/v1/models" | python3 -c 'import json,sys; print(",".join(m["id"] for m in json.load(sys.stdin)["data"]))' 2>/dev/null || echo '?'))"
say "stop it with: scripts/real-server/stop.sh $PID"
echo "$PID"
