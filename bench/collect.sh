#!/usr/bin/env bash
# Collect throughput and memory against the mock answering instantly on loopback.
# Usage: bench/collect.sh [SAMPLES...]   (default: 5000 20000)
#
# Each size collects 4 model rows × 250 tasks (copies of the corpus's first task under new ids,
# so the figure does not depend on the corpus) × k = SAMPLES / 1000, with 64 requests in flight,
# from the release binary, and prints samples/s and peak RSS (/usr/bin/time -v). The mock runs as
# its own process on the same 2 cores, so the figure is for both together. Every file is fsynced.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(5000 20000)
cargo build --release --quiet
bin=$PWD/target/release/callcheck
work=$(mktemp -d)
mock_pid=
trap '[ -n "$mock_pid" ] && kill $mock_pid 2>/dev/null; rm -rf "$work"' EXIT
rows=4
copies=250
first=$(find tasks -name '*.json' | sort | head -1)
id=$(sed -n 's/^ *"id": *"\([^"]*\)".*/\1/p' "$first" | head -1)
mkdir -p "$work/tasks"
for i in $(seq "$copies"); do
  sed "s/\"id\": *\"$id\"/\"id\": \"$id-bench$i\"/" "$first" >"$work/tasks/$id-bench$i.json"
done
"$bin" mock --port 0 --tasks "$work/tasks" >"$work/mock.out" 2>/dev/null &
mock_pid=$!
for _ in $(seq 100); do [ -s "$work/mock.out" ] && break; sleep 0.1; done
url=$(head -1 "$work/mock.out" | awk '{print $NF}')
cfg="$work/bench.toml"
for i in $(seq "$rows"); do
  printf '[[model]]\nname = "bench-%d"\nbase_url = "%s"\nmodel = "mock-good"\nconcurrency = 64\n[model.params]\nmax_tokens = 512\n\n' "$i" "$url" >>"$cfg"
done
for n in "${sizes[@]}"; do
  k=$(( (n + rows * copies - 1) / (rows * copies) ))
  total=$((rows * copies * k))
  runs="$work/runs-$n"
  ${BENCH_WRAP:-} /usr/bin/time -v "$bin" collect --config "$cfg" --tasks "$work/tasks" --runs "$runs" --k "$k" --jobs 64 --quiet --allow-anecdote 2>"$work/time-$n.txt" || { cat "$work/time-$n.txt"; exit 1; }
  secs=$(grep 'Elapsed (wall clock)' "$work/time-$n.txt" | awk '{print $NF}' | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  rss=$(grep 'Maximum resident set size' "$work/time-$n.txt" | awk '{print $NF}')
  written=$(find "$runs" -name meta.json | wc -l)
  errors=$( (grep -l '"error"' -r "$runs" --include meta.json || true) | wc -l)
  awk -v n="$total" -v w="$written" -v e="$errors" -v k="$k" -v s="$secs" -v r="$rss" 'BEGIN { printf "%d samples (k=%d, %d written, %d errors) in %.2f s: %.0f samples/s, peak RSS %.1f MB\n", n, k, w, e, s, n/s, r/1024 }'
  grep -E "User time|System time|Percent of CPU" "$work/time-$n.txt"
  rm -rf "$runs"
done
