#!/usr/bin/env bash
# Capture real llama-server exchanges as fixtures for callcheck's scorer tests.
#
#   PID=$(scripts/real-server/serve.sh)
#   scripts/real-server/capture.sh [--port 8088] [--out tests/fixtures/real/llama-server] [--only NAME,NAME]
#   scripts/real-server/stop.sh "$PID"
#
# For every case it writes <out>/<case>/request.json (the exact bytes POSTed to
# /v1/chat/completions), response.json or response.sse (the exact body bytes received,
# after HTTP de-chunking: what an HTTP client library hands its caller) and notes.md
# (status line, response headers, timings, the curl command). It also saves the server's
# /props and /v1/models answers. Re-running overwrites the cases it captures; the model's
# output may differ between builds even with a fixed seed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PORT=8088
OUT="$ROOT/tests/fixtures/real/llama-server"
ONLY=""
MODEL_ID="${MODEL_ID:-smollm2}"

die() { printf 'capture.sh: error: %s\n' "$*" >&2; exit 1; }
while [ $# -gt 0 ]; do
    case "$1" in
        --port) PORT="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --only) ONLY="$2"; shift 2 ;;
        *) die "unknown argument: $1" ;;
    esac
done
BASE="http://127.0.0.1:$PORT"
curl -sf -o /dev/null --max-time 5 "$BASE/health" || die "no llama-server answering on $BASE (start scripts/real-server/serve.sh)"
mkdir -p "$OUT"

# Server facts, pretty-printed for reading (these two are not wire fixtures).
curl -sS "$BASE/props" | python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("chat_template",None); d.pop("chat_template_tool_use",None); print(json.dumps(d,indent=2,ensure_ascii=False))' > "$OUT/server-props.json"
curl -sS "$BASE/v1/models" | python3 -m json.tool > "$OUT/server-models.json"

# ---------------------------------------------------------------------------------------
# Tools shared by the cases.
WEATHER='{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}'
TIME='{"type": "function", "function": {"name": "get_time", "description": "Get the current local time in an IANA time zone.", "parameters": {"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA zone, e.g. Europe/Paris"}}, "required": ["timezone"]}}}'
NOARGS='{"type": "function", "function": {"name": "get_server_time", "description": "Get the server clock time. Takes no arguments.", "parameters": {"type": "object", "properties": {}}}}'
# The sampling of examples/llama-server.toml. Seed 7 gives SmolLM2's typical answer (prose);
# the *-call cases use seeds found by probing that make it emit <tool_call> blocks.
SAMPLING='"temperature": 0.7, "top_p": 0.95, "seed": 7'
sampling() { printf '"temperature": 0.7, "top_p": 0.95, "seed": %s' "$1"; }
PARIS='"messages": [{"role": "user", "content": "What is the weather in Paris right now?"}]'

# case NAME DESCRIPTION BODY
case_() {
    local name="$1" desc="$2" body="$3"
    if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]]; then return 0; fi
    local dir="$OUT/$name"
    mkdir -p "$dir"
    rm -f "$dir"/response.json "$dir"/response.sse
    # Normalise the request to pretty JSON once; these bytes are then sent verbatim.
    # (A body that is not JSON on purpose is written as it is.)
    printf '%s' "$body" | python3 -c '
import json, sys
raw = sys.stdin.read()
try:
    print(json.dumps(json.loads(raw), indent=2, ensure_ascii=False))
except ValueError:
    sys.stdout.write(raw)' > "$dir/request.json"
    local resp="response.json"
    if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("stream") else 1)' "$dir/request.json" 2>/dev/null; then
        resp="response.sse"
    fi
    local cmd=(curl -sS -N -X POST "$BASE/v1/chat/completions"
        -H 'Content-Type: application/json' --data-binary @request.json
        -D headers.txt -o "$resp"
        -w '%{http_code} %{time_starttransfer} %{time_total}')
    local w
    w=$(cd "$dir" && "${cmd[@]}")
    local code ttfb total
    read -r code ttfb total <<<"$w"
    {
        echo "# $name"
        echo
        echo "$desc"
        echo
        echo "- captured: $(date -u +%Y-%m-%dT%H:%M:%SZ) from llama-server $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("build_info","?"))' "$OUT/server-props.json") (scripts/real-server/capture.sh)"
        echo "- HTTP status: $code"
        echo "- time to first byte: ${ttfb} s, total: ${total} s"
        echo "- body: \`$resp\` ($(wc -c <"$dir/$resp") bytes)"
        echo
        echo "Command (run in this folder):"
        echo
        echo '```'
        printf '%q ' "${cmd[@]}" | sed "s|$BASE|http://127.0.0.1:8088|"
        echo
        echo '```'
        echo
        echo "Response headers:"
        echo
        echo '```'
        tr -d '\r' < "$dir/headers.txt"
        echo '```'
    } > "$dir/notes.md"
    rm -f "$dir/headers.txt"
    printf 'capture.sh: %-22s HTTP %s  %6.2fs  %s\n' "$name" "$code" "$total" "$resp"
}

case_ auto "One tool offered, tool_choice \"auto\", not streamed." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"auto\", \"max_tokens\": 256, $SAMPLING}"

case_ auto-stream "One tool offered, tool_choice \"auto\", streamed." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"auto\", \"stream\": true, \"max_tokens\": 256, $SAMPLING}"

case_ auto-call "One tool offered, tool_choice \"auto\", seed 20 (the model emits <tool_call> blocks), not streamed." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"auto\", \"max_tokens\": 128, $(sampling 20)}"

case_ auto-call-stream "One tool offered, tool_choice \"auto\", seed 20, streamed with stream_options.include_usage." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"auto\", \"stream\": true, \"stream_options\": {\"include_usage\": true}, \"max_tokens\": 128, $(sampling 20)}"

case_ auto-call-single "One tool offered, tool_choice \"auto\", seed 20, parallel_tool_calls: false." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"auto\", \"parallel_tool_calls\": false, \"max_tokens\": 128, $(sampling 20)}"

case_ required-call "One tool offered, tool_choice \"required\", seed 4 (the model emits <tool_call> blocks), not streamed." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"required\", \"max_tokens\": 128, $(sampling 4)}"

case_ required-call-stream "One tool offered, tool_choice \"required\", seed 4, streamed." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"required\", \"stream\": true, \"max_tokens\": 128, $(sampling 4)}"

case_ required "One tool offered, tool_choice \"required\", not streamed." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"required\", \"max_tokens\": 256, $SAMPLING}"

case_ required-stream "One tool offered, tool_choice \"required\", streamed with stream_options.include_usage." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"required\", \"stream\": true, \"stream_options\": {\"include_usage\": true}, \"max_tokens\": 256, $SAMPLING}"

case_ named "Two tools offered, tool_choice names get_time (object form), prompt asks for the weather." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER, $TIME], \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}, \"max_tokens\": 256, $SAMPLING}"

case_ named-stream "Two tools offered, tool_choice names get_time (object form), streamed." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER, $TIME], \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}, \"stream\": true, \"max_tokens\": 256, $SAMPLING}"

case_ none "One tool offered, tool_choice \"none\", not streamed." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"none\", \"max_tokens\": 256, $SAMPLING}"

case_ none-call "One tool offered, tool_choice \"none\", seed 20 (the seed that makes the model call under \"auto\")." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"none\", \"max_tokens\": 128, $(sampling 20)}"

case_ no-tools "Same prompt, no tools at all (compare usage.prompt_tokens with auto)." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"max_tokens\": 256, $SAMPLING}"

case_ no-tools-stream "Same prompt, no tools, streamed." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"stream\": true, \"max_tokens\": 256, $SAMPLING}"

case_ parallel-3 "Three cities, one tool, tool_choice \"required\", parallel_tool_calls not set (llama.cpp's default is off)." \
"{\"model\": \"$MODEL_ID\", \"messages\": [{\"role\": \"user\", \"content\": \"What is the weather in Paris, Tokyo and Lima? Call get_weather once for each city.\"}], \"tools\": [$WEATHER], \"tool_choice\": \"required\", \"max_tokens\": 256, $SAMPLING}"

case_ parallel-3-flag "Three cities, one tool, tool_choice \"required\", parallel_tool_calls: true." \
"{\"model\": \"$MODEL_ID\", \"messages\": [{\"role\": \"user\", \"content\": \"What is the weather in Paris, Tokyo and Lima? Call get_weather once for each city.\"}], \"tools\": [$WEATHER], \"tool_choice\": \"required\", \"parallel_tool_calls\": true, \"max_tokens\": 256, $SAMPLING}"

case_ parallel-3-stream "Three cities, tool_choice \"required\", parallel_tool_calls: true, streamed." \
"{\"model\": \"$MODEL_ID\", \"messages\": [{\"role\": \"user\", \"content\": \"What is the weather in Paris, Tokyo and Lima? Call get_weather once for each city.\"}], \"tools\": [$WEATHER], \"tool_choice\": \"required\", \"parallel_tool_calls\": true, \"stream\": true, \"max_tokens\": 256, $SAMPLING}"

case_ no-args "A tool without parameters, tool_choice \"required\", not streamed." \
"{\"model\": \"$MODEL_ID\", \"messages\": [{\"role\": \"user\", \"content\": \"What time is it on the server?\"}], \"tools\": [$NOARGS], \"tool_choice\": \"required\", \"max_tokens\": 64, $SAMPLING}"

case_ no-args-stream "A tool without parameters, tool_choice \"required\", streamed." \
"{\"model\": \"$MODEL_ID\", \"messages\": [{\"role\": \"user\", \"content\": \"What time is it on the server?\"}], \"tools\": [$NOARGS], \"tool_choice\": \"required\", \"stream\": true, \"max_tokens\": 64, $SAMPLING}"

case_ json-schema "Structured output: response_format json_schema (strict), no tools." \
"{\"model\": \"$MODEL_ID\", \"messages\": [{\"role\": \"user\", \"content\": \"Give the city and country of the Eiffel Tower as JSON.\"}], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"place\", \"strict\": true, \"schema\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"country\": {\"type\": \"string\"}}, \"required\": [\"city\", \"country\"], \"additionalProperties\": false}}}, \"max_tokens\": 128, $SAMPLING}"

case_ json-schema-stream "Structured output: response_format json_schema (strict), streamed." \
"{\"model\": \"$MODEL_ID\", \"messages\": [{\"role\": \"user\", \"content\": \"Give the city and country of the Eiffel Tower as JSON.\"}], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"place\", \"strict\": true, \"schema\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"country\": {\"type\": \"string\"}}, \"required\": [\"city\", \"country\"], \"additionalProperties\": false}}}, \"stream\": true, \"max_tokens\": 128, $SAMPLING}"

case_ truncated "tool_choice \"required\" with max_tokens 8: the call is cut off." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"required\", \"max_tokens\": 8, $SAMPLING}"

case_ truncated-stream "tool_choice \"required\" with max_tokens 8, streamed." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"required\", \"stream\": true, \"max_tokens\": 8, $SAMPLING}"

case_ truncated-call-name "tool_choice \"auto\", seed 20, max_tokens 12: cut inside the <tool_call> block, before the name is complete." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"auto\", \"max_tokens\": 12, $(sampling 20)}"

case_ truncated-call-args "tool_choice \"auto\", seed 20, max_tokens 18: cut inside the arguments of the first call." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"auto\", \"max_tokens\": 18, $(sampling 20)}"

case_ truncated-call-args-stream "tool_choice \"auto\", seed 20, max_tokens 18, streamed." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"auto\", \"stream\": true, \"max_tokens\": 18, $(sampling 20)}"

case_ truncated-auto "tool_choice \"auto\" with max_tokens 8." \
"{\"model\": \"$MODEL_ID\", $PARIS, \"tools\": [$WEATHER], \"tool_choice\": \"auto\", \"max_tokens\": 8, $SAMPLING}"

case_ tool-result "Second turn: earlier assistant tool_call and its tool result in the history, tool_choice \"auto\"." \
"{\"model\": \"$MODEL_ID\", \"messages\": [{\"role\": \"user\", \"content\": \"What is the weather in Paris right now?\"}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"{\\\"temperature_c\\\": 18, \\\"sky\\\": \\\"cloudy\\\"}\"}], \"tools\": [$WEATHER], \"tool_choice\": \"auto\", \"max_tokens\": 128, $SAMPLING}"

case_ system-hitec "tool_choice \"auto\" with the HiTEC checklist system prompt of examples/llama-server.toml." \
"$(python3 - "$MODEL_ID" "$ROOT/examples/llama-server.toml" "$WEATHER" <<'PY'
import json, sys, tomllib
model, cfg, weather = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
system = next(m["system"] for m in tomllib.load(open(cfg, "rb"))["model"] if "system" in m)
print(json.dumps({"model": model, "messages": [{"role": "system", "content": system},
    {"role": "user", "content": "What is the weather in Paris right now?"}],
    "tools": [weather], "tool_choice": "auto", "max_tokens": 256,
    "temperature": 0.7, "top_p": 0.95, "seed": 7}))
PY
)"

case_ bad-json "Malformed request body (not JSON): how llama-server reports a client error." \
'{"model": "smollm2", "messages": [}'

# ---------------------------------------------------------------------------------------
# What the template makes of some requests (POST /apply-template): evidence that the tools,
# earlier tool calls and tool results reach the prompt. Not wire fixtures, so kept apart.
RENDERED="$HERE/rendered-prompts"
mkdir -p "$RENDERED"
for name in auto none tool-result system-hitec no-tools; do
    if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]]; then continue; fi
    [ -f "$OUT/$name/request.json" ] || continue
    curl -sS -X POST "$BASE/apply-template" -H 'Content-Type: application/json' \
        --data-binary @"$OUT/$name/request.json" \
        | python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["prompt"])' > "$RENDERED/$name.txt"
    echo "capture.sh: rendered prompt of $name -> ${RENDERED#$ROOT/}/$name.txt"
done

echo "capture.sh: done; fixtures in $OUT"
