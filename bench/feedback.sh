#!/usr/bin/env bash
# Peak memory of the feedback round (`collect --feedback`) on a tree of many failures with large
# requests, so the figure shows whether planning holds every follow-up body at once.
# Usage: bench/feedback.sh [BINARY...]   (default: the release build of this checkout)
#
# The first round collects 1 row × COPIES tasks (copies of the corpus's first task, each user
# message padded with PAD_KB KiB of text) × k = 5 from a mock model that never calls a tool,
# so every sample fails; then each BINARY runs `collect --feedback` (3 styles) on its own copy
# of that tree. All follow-up bodies together are about 3 × COPIES × 5 × PAD_KB KiB; a round that
# builds each cell's bodies when it sends the cell holds a few cells' worth. Prints, per binary,
# the follow-ups written, the wall time and the peak RSS (/usr/bin/time -v).
set -euo pipefail
cd "$(dirname "$0")/.."
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  cargo build --release --quiet
  bins=("$PWD/target/release/callcheck")
fi
copies=${COPIES:-100}
pad_kb=${PAD_KB:-64}
work=$(mktemp -d)
mock_pid=
trap '[ -n "$mock_pid" ] && kill $mock_pid 2>/dev/null; rm -rf "$work"' EXIT
first=$(find tasks -name '*.json' | sort | head -1)
id=$(sed -n 's/^ *"id": *"\([^"]*\)".*/\1/p' "$first" | head -1)
pad=$(head -c $((pad_kb * 1024)) /dev/zero | tr '\0' 'x')
mkdir -p "$work/tasks"
for i in $(seq "$copies"); do
  sed -e "s/\"id\": *\"$id\"/\"id\": \"$id-bench$i\"/" \
    -e "0,/\"content\": \"/s//\"content\": \"$pad /" "$first" >"$work/tasks/$id-bench$i.json"
done
printf 'seed = 1\n[[model]]\nname = "mute"\n[model.labels]\nno_call = 1.0\n' >"$work/mock.toml"
"${bins[0]}" mock --port 0 --tasks "$work/tasks" --config "$work/mock.toml" >"$work/mock.out" 2>/dev/null &
mock_pid=$!
for _ in $(seq 100); do [ -s "$work/mock.out" ] && break; sleep 0.1; done
url=$(head -1 "$work/mock.out" | awk '{print $NF}')
cfg="$work/bench.toml"
printf '[[model]]\nname = "mute"\nbase_url = "%s"\nmodel = "mute"\nconcurrency = 16\n' "$url" >"$cfg"
"${bins[0]}" collect --config "$cfg" --tasks "$work/tasks" --runs "$work/runs" --k 5 --quiet --no-preflight
echo "first round: $(find "$work/runs" -name meta.json | wc -l) samples, $(du -sm "$work/runs" | cut -f1) MB"
for bin in "${bins[@]}"; do
  rm -rf "$work/runs-fb"
  cp -r "$work/runs" "$work/runs-fb"
  /usr/bin/time -v "$bin" collect --config "$cfg" --tasks "$work/tasks" --runs "$work/runs-fb" --feedback --quiet 2>"$work/time.txt" || { cat "$work/time.txt"; exit 1; }
  secs=$(grep 'Elapsed (wall clock)' "$work/time.txt" | awk '{print $NF}' | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  rss=$(grep 'Maximum resident set size' "$work/time.txt" | awk '{print $NF}')
  written=$(( $(find "$work/runs-fb" -name meta.json | wc -l) - $(find "$work/runs" -name meta.json | wc -l) ))
  bodies=$(find "$work/runs-fb" -path '*-error/*' -name request.json -o -path '*-checklist/*' -name request.json -o -path '*-retry/*' -name request.json | xargs cat | wc -c)
  awk -v b="$bin" -v w="$written" -v s="$secs" -v r="$rss" -v t="$bodies" 'BEGIN { printf "%s: %d follow-ups (%.1f MB of request bodies) in %.1f s, peak RSS %.1f MB\n", b, w, t/1048576, s, r/1024 }'
done
