#!/usr/bin/env bash
# Benchmarks `callcheck build` on synthetic runs/ trees (examples/synth.rs): wall time, peak
# memory (/usr/bin/time -v), site size per sample, and the "floor" (examples/floor.rs: read and
# parse every file of the tree once) with build's ratio to it. A benchmark, not a test: it
# prints figures and checks nothing.
#
#   bench/build.sh                 # 10,000 and 100,000 samples
#   SAMPLES="1000" bench/build.sh  # other sizes; BENCH_DIR=/path to keep the trees elsewhere
#
# Floors on the 2-core reference machine: 10,000 samples <= 3 s; 100,000 <= 30 s with peak
# memory <= 1 GB; site size <= 10 KB per sample. "rebuild" replaces an existing site (atomic swap:
# identical pages are hard-linked, then the previous tree is removed); on ext4 that removal is
# most of its time (about 5.6 of 7.9 s at 10,000 samples on the reference machine).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin callcheck --example synth --example floor
bin=target/release
base=${BENCH_DIR:-/tmp/callcheck-bench}

wall() { # seconds from /usr/bin/time -v's "Elapsed (wall clock)" line (h:mm:ss or m:ss.cc)
  awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$1"
}
peak() { awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$1"; }

# Old sites are moved aside and deleted only at the end: ext4 avoids reusing the inodes of
# recently deleted files (ialloc's recently_deleted(), a window of up to minutes), and creating
# files right after deleting thousands is several times slower. Builds run back to back after
# an `rm -rf` would measure that, not callcheck.
trash=$base/.trash
mkdir -p "$trash"
trap 'rm -rf "$trash"' EXIT

printf '%-8s %-10s %9s %9s %9s %8s %10s %12s %12s\n' samples build time_s floor_s ratio peak_MB site_MB KB_per_sample files
for n in ${SAMPLES:-10000 100000}; do
  dir=$base/$n
  if [ ! -d "$dir/runs" ]; then
    "$bin/examples/synth" --samples "$n" --out "$dir" 2>/dev/null
  fi
  if [ -d "$dir/site" ]; then mv "$dir/site" "$trash/site-$n-$$"; fi
  sync
  floor=$("$bin/examples/floor" "$dir/runs" 2>/dev/null)
  for kind in fresh rebuild; do
    # "fresh" writes into an empty place; "rebuild" replaces the previous site (and writes
    # changes.html), the usual case after a collect.
    /usr/bin/time -v "$bin/callcheck" build --tasks "$dir/tasks" --runs "$dir/runs" --out "$dir/site" \
      2> "$dir/time-$kind.txt" >/dev/null
    t=$(wall "$dir/time-$kind.txt")
    bytes=$(du -sb --apparent-size "$dir/site" | cut -f1)
    files=$(find "$dir/site" -type f | wc -l)
    awk -v n="$n" -v k="$kind" -v t="$t" -v f="$floor" -v p="$(peak "$dir/time-$kind.txt")" \
      -v b="$bytes" -v files="$files" \
      'BEGIN { printf "%-8s %-10s %9.2f %9.2f %9.2f %8s %10.1f %12.2f %12s\n", n, k, t, f, t / f, p, b / 1e6, b / n / 1000, files }'
  done
done
