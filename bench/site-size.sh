#!/usr/bin/env bash
# The built site's size per sample, by part, against issue 45's goals: <= 3.3 KB per sample on the
# 20-row synthetic bench (examples/synth, k = 10) at >= 100k samples, and a 300k-sample site
# <= 1 GB (GitHub Pages' limit on a published site). A benchmark, not a test: it checks nothing.
#
#   bench/site-size.sh                      # 20k and 100k samples, 300k extrapolated from them
#   SAMPLES="100000 300000" bench/site-size.sh   # 300k measured (about 1 GB of site, written once)
#   TREE=/work/ref/s100k bench/site-size.sh # an existing runs/ + tasks/ tree instead
#   BENCH_DIR=/path bench/site-size.sh      # where trees and sites go (default /tmp/callcheck-size)
#
# The site is built with --no-cache into an empty folder and deleted after measuring (trees are
# kept only when BENCH_DIR held them already). Sizes are apparent file bytes, everything included.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet --bin callcheck --example synth
bin=$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)
base=${BENCH_DIR:-/tmp/callcheck-size}
mkdir -p "$base"

# KB per sample of the whole site and of its parts: run pages, permalinks (stubs), and each
# top-level folder or file.
measure() { # site, samples
  local site=$1 n=$2
  (cd "$site" && find . -type f -printf '%P %s\n') | awk -v n="$n" '
    { split($1, p, "/"); part = p[1]
      if (part == "t") part = ($1 ~ /\/index\.html$/) ? "t/ run pages" : "t/ permalinks"
      s[part] += $2; total += $2 }
    END {
      printf "  site               %8.1f MB = %.3f KB/sample     goal <= 3.3 KB/sample (%s)\n", total / 1e6, total / n / 1000, (total / n / 1000 <= 3.3) ? "met" : "NOT met"
      printf "  at 300k samples    %8.1f MB (this rate x 300,000) goal <= 1 GB (%s)\n", total / n * 300000 / 1e6, (total / n * 300000 <= 1e9) ? "met" : "NOT met"
      for (k in s) printf "    %-16s %.3f KB/sample\n", k, s[k] / n / 1000 | "sort -k2 -nr"
    }'
}

build() { # tree, samples, name
  local tree=$1 n=$2 name=$3 site="$base/site-$3"
  rm -rf "$site"
  local t0=$(date +%s.%N)
  (cd "$tree" && "$bin/callcheck" build --no-cache --out "$site" >/dev/null 2>"$base/build-$name.log")
  local t1=$(date +%s.%N)
  printf "%s: %d samples, built in %.1f s (load average %s)\n" "$name" "$n" "$(echo "$t1 - $t0" | bc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
  measure "$site" "$n"
  rm -rf "$site"
}

if [ -n "${TREE:-}" ]; then
  n=$(find "$TREE/runs" -mindepth 5 -maxdepth 5 -type d -path '*/samples/*' | wc -l)
  build "$TREE" "$n" "$(basename "$TREE")"
  exit 0
fi
for n in ${SAMPLES:-20000 100000}; do
  dir="$base/synth-$n"
  made=
  if [ ! -d "$dir/runs" ]; then "$bin/examples/synth" --samples "$n" --out "$dir" >/dev/null 2>&1; made=1; fi
  build "$dir" "$n" "synth-$n"
  [ -n "$made" ] && rm -rf "$dir"
done
