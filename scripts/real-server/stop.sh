#!/usr/bin/env bash
# Stop the llama-server started by serve.sh: exactly the given pid, after checking that it
# is a llama-server process. SIGTERM first, SIGKILL after 10 s.
#
#   scripts/real-server/stop.sh PID
set -euo pipefail

die() { printf 'stop.sh: error: %s\n' "$*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: stop.sh PID"
PID="$1"
case "$PID" in ''|*[!0-9]*) die "PID must be a number, got '$PID'" ;; esac

[ -d "/proc/$PID" ] || die "no process with pid $PID"
COMM=$(cat "/proc/$PID/comm" 2>/dev/null || true)
EXE=$(readlink "/proc/$PID/exe" 2>/dev/null || true)
if [ "$COMM" != "llama-server" ] && [ "$(basename "${EXE% (deleted)}")" != "llama-server" ]; then
    die "pid $PID is not a llama-server process (comm='$COMM', exe='$EXE'); not stopping it"
fi

echo "stop.sh: sending SIGTERM to llama-server pid $PID ($EXE)"
kill -TERM "$PID"
for _ in $(seq 1 20); do
    kill -0 "$PID" 2>/dev/null || { echo "stop.sh: pid $PID stopped"; exit 0; }
    sleep 0.5
done
echo "stop.sh: pid $PID still running after 10s, sending SIGKILL"
kill -KILL "$PID" 2>/dev/null || true
sleep 0.5
if kill -0 "$PID" 2>/dev/null; then die "pid $PID survived SIGKILL"; fi
echo "stop.sh: pid $PID killed"
