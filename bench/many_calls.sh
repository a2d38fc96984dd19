#!/usr/bin/env bash
# Memory and page size for answers of very many tool calls (issue 40): `check` of one answer of
# CALLS calls (default 300,000: about 24 MB, as in the issue), and `build` of a run of SAMPLES
# such answers (default 6). Prints each peak RSS (/usr/bin/time -v) beside its floor (300 MB)
# and the largest page of the site beside its floor (2 MB). A benchmark, not a test: it checks
# nothing (tests/it/destroy_nothing.rs asserts the labels and the page bound).
#
#   bench/many_calls.sh [BINARY]            # default: the release build of this checkout
#   CALLS=1000000 SAMPLES=10 bench/many_calls.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet --bin callcheck
  bin="$PWD/target/release/callcheck"
fi
calls=${CALLS:-300000}
samples=${SAMPLES:-6}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
task=tasks/basic/basic-weather-city.json
mkdir -p "$work/tasks"
cp "$task" "$work/tasks/"
# The answer and the run folder, as collect writes them (python3: only to write the files).
python3 - "$work" "$task" "$calls" "$samples" <<'PY'
import hashlib, json, os, sys
work, task_path, calls, samples = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
raw = open(task_path, "rb").read()
task = json.loads(raw)
call = '{"id":"chatcmpl-tool-%08x","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\": \\"Paris\\"}"}}'
body = ('{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":['
        + ",".join(call % i for i in range(calls))
        + ']},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":50,"completion_tokens":9}}')
open(os.path.join(work, "response.json"), "w").write(body)
run = os.path.join(work, "runs", "m", task["id"], "r0001")
for i in range(samples):
    d = os.path.join(run, "samples", "%03d" % i)
    os.makedirs(d)
    json.dump({"model": "m", "messages": task["messages"], "tools": task.get("tools", [])}, open(os.path.join(d, "request.json"), "w"))
    open(os.path.join(d, "response.json"), "w").write(body)
    open(os.path.join(d, "meta.json"), "w").write('{"status": 200, "headers": {}, "streamed": false}')
json.dump({"format_version": 1, "callcheck_version": "0.1.0",
           "model": {"name": "m", "base_url": "http://127.0.0.1:8000/v1"},
           "task": {"id": task["id"], "sha256": hashlib.sha256(raw).hexdigest()},
           "k": samples, "run_id": "r0001"}, open(os.path.join(run, "cell.json"), "w"))
PY
peak() { awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$1"; }
wall() { awk -F': ' '/Elapsed \(wall clock\)/ { print $2 }' "$1"; }
size=$(du -m "$work/response.json" | cut -f1)
/usr/bin/time -v "$bin" check --task "$task" --response "$work/response.json" >"$work/verdict.json" 2>"$work/time-check.txt" || true
/usr/bin/time -v "$bin" build --no-cache --tasks "$work/tasks" --runs "$work/runs" --out "$work/site" >/dev/null 2>"$work/time-build.txt"
largest=$(find "$work/site" -type f -printf '%s %P\n' | sort -n | tail -1)
printf 'an answer of %d tool calls (%d MB); a run of %d of them\n' "$calls" "$size" "$samples"
printf '  check   peak RSS %5d MB   (floor 300 MB)   wall %s   verdict %d bytes\n' "$(peak "$work/time-check.txt")" "$(wall "$work/time-check.txt")" "$(wc -c <"$work/verdict.json")"
printf '  build   peak RSS %5d MB   (floor 300 MB)   wall %s\n' "$(peak "$work/time-build.txt")" "$(wall "$work/time-build.txt")"
printf '  largest file of the site %s bytes: %s   (floor 2,000,000)\n' "${largest%% *}" "${largest#* }"
