#!/usr/bin/env bash
# collect's peak memory and user time on issue 46's shape: the mock answering instantly on
# loopback, 59 tasks (the first 59 of the corpus by path, the corpus's size when the issue's
# earlier figures were taken), 4 rows of mock-good, --jobs 64, k = 60 (14,160 samples) and
# k = 200 (47,200), printed beside the earlier figures and the floor. A benchmark, not a test:
# it checks nothing.
#
#   bench/collect-memory.sh                    # k = 60 and k = 200, the release build
#   KS="60" bench/collect-memory.sh            # one k
#   BINS="/path/old/callcheck" bench/collect-memory.sh   # other binaries too (each its own mock)
#   ROUNDS=3 bench/collect-memory.sh           # collections per binary and k (default 2)
#
# Figures to compare (issue 46, measured on a 2-core VM): commit ad88b06 peaked at 40 MB at
# k = 60 (user 1.15 s); the version the issue was filed against at 199-219 MB (user 1.41 s),
# 420 MB at k = 200. Floor: peak <= 60 MB at k = 60, and no growth with k beyond what one cell's
# samples need. Wall time is dominated by the kernel's file work (every run is synced) and, on a
# shared machine, by the load: the load average is printed beside each figure.
#
# What the issue's figures came from: the writes of samples run on tokio's blocking pool, which
# grew to 130-150 threads under --jobs 64, and since mimalloc became the allocator (after
# ad88b06) each thread's heap sat on transparent huge pages, 2 MiB at a time. The same code with
# glibc's allocator peaked at 40 MB. collect now caps the pool at 16 threads and turns huge pages
# off for its process (src/cmd/collect.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin callcheck
bins=("$PWD/target/release/callcheck")
for b in ${BINS:-}; do bins+=("$b"); done
ks=(${KS:-60 200})
rounds=${ROUNDS:-2}
rows=4
ntasks=59
work=$(mktemp -d)
mock_pid=
# Finished trees are moved aside and deleted at the end: deleting 190,000 files takes minutes on
# a busy VM, and creating files right after deleting thousands is slower (see bench/build.sh).
trap '[ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/trash"
mkdir -p "$work/tasks"
find tasks -name '*.json' | sort | head -n "$ntasks" | while read -r f; do cp "$f" "$work/tasks/"; done
echo "collect's memory: $rows rows x $ntasks tasks, --jobs 64, the mock on loopback, $(nproc) cores"
echo "earlier (issue 46): ad88b06 40 MB at k = 60 (user 1.15 s); before the fix 199-219 MB at k = 60 (user 1.41 s), 420 MB at k = 200"
echo "floor: peak <= 60 MB at k = 60; the same peak at k = 200 within one cell's samples"
for bin in "${bins[@]}"; do
  "$bin" mock --port 0 --tasks "$work/tasks" >"$work/mock.out" 2>/dev/null &
  mock_pid=$!
  for _ in $(seq 100); do [ -s "$work/mock.out" ] && break; sleep 0.1; done
  url=$(head -1 "$work/mock.out" | awk '{print $NF}')
  cfg="$work/bench.toml"
  : >"$cfg"
  for i in $(seq "$rows"); do
    printf '[[model]]\nname = "bench-%d"\nbase_url = "%s"\nmodel = "mock-good"\nconcurrency = 64\n[model.params]\nmax_tokens = 512\n\n' "$i" "$url" >>"$cfg"
  done
  echo "== $bin"
  for k in "${ks[@]}"; do
    for r in $(seq "$rounds"); do
      runs="$work/runs"
      /usr/bin/time -v "$bin" collect --config "$cfg" --tasks "$work/tasks" --runs "$runs" --k "$k" --jobs 64 --quiet 2>"$work/time.txt" || { cat "$work/time.txt"; exit 1; }
      written=$(find "$runs" -name meta.json | wc -l)
      rss=$(awk '/Maximum resident set size/ {print $NF}' "$work/time.txt")
      user=$(awk -F': ' '/User time/ {print $2}' "$work/time.txt")
      sys=$(awk -F': ' '/System time/ {print $2}' "$work/time.txt")
      wall=$(awk '/Elapsed \(wall clock\)/ {print $NF}' "$work/time.txt")
      floor=$([ "$k" -le 60 ] && echo "floor 60 MB" || echo "floor: k = 60's peak")
      awk -v k="$k" -v r="$r" -v w="$written" -v rss="$rss" -v u="$user" -v s="$sys" -v wall="$wall" -v f="$floor" -v load="$(cut -d' ' -f1 /proc/loadavg)" \
        'BEGIN { printf "k = %3d round %d: %6d samples, peak RSS %6.1f MB (%s), user %5.2f s, sys %5.2f s, wall %s, load %s\n", k, r, w, rss/1024, f, u, s, wall, load }'
      mv "$runs" "$work/trash/runs-$k-$r-$RANDOM"
    done
  done
  kill "$mock_pid" 2>/dev/null || true
  wait "$mock_pid" 2>/dev/null || true
  mock_pid=
done
