#!/usr/bin/env bash
# Benchmarks the triage page (samples.html + data/samples.js) on synthetic runs/ trees
# (examples/synth.rs): the page's weight (HTML, script and data bytes) and Chromium's time to
# first render (navigation start to the first page of matching rows on screen, as the page
# itself records it in #count's data-render-ms), unfiltered and filtered to failures of one
# model. A benchmark, not a test: it prints figures next to their goal and checks nothing.
#
#   bench/samples.sh                     # 100,000 and 300,000 samples
#   SAMPLES="10000" bench/samples.sh     # other sizes; BENCH_DIR=/path keeps the trees elsewhere
#
# Goals on the 2-core reference machine: data/samples.js <= 8 bytes per sample (2.4 MB at
# 300,000), first render <= 3 s at 300,000 samples.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin callcheck --example synth
bin=target/release
base=${BENCH_DIR:-/tmp/callcheck-bench}
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$chrome" ]; then echo "chromium not found (apt-get install -y chromium)" >&2; exit 1; fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT

render_ms() { # the page's own data-render-ms after Chromium loaded it
  "$chrome" --headless --no-sandbox --disable-gpu --user-data-dir="$profile" --virtual-time-budget=60000 \
    --dump-dom "$1" 2>/dev/null | grep -o 'data-render-ms="[0-9]*"' | grep -o '[0-9]*' || echo "-"
}

printf '%-8s %12s %14s %10s %16s %16s\n' samples page_bytes data_bytes B_per_smp first_render_ms filtered_ms
for n in ${SAMPLES:-100000 300000}; do
  dir=$base/$n
  if [ ! -d "$dir/runs" ]; then
    "$bin/examples/synth" --samples "$n" --out "$dir" 2>/dev/null
  fi
  if [ ! -f "$dir/site/data/samples.js" ]; then
    rm -rf "$dir/site"
    "$bin/callcheck" build --tasks "$dir/tasks" --runs "$dir/runs" --out "$dir/site" 2>/dev/null
  fi
  page=$(( $(stat -c %s "$dir/site/samples.html") + $(stat -c %s "$dir/site/samples.js") ))
  data=$(stat -c %s "$dir/site/data/samples.js")
  model=$(grep -o '"models":\["[^"]*"' "$dir/site/data/samples.js" | sed 's/.*\["//; s/"$//')
  all=$(render_ms "file://$dir/site/samples.html")
  filtered=$(render_ms "file://$dir/site/samples.html#outcome=fail&model=$model")
  awk -v n="$n" -v p="$page" -v d="$data" -v a="$all" -v f="$filtered" \
    'BEGIN { printf "%-8s %12d %14d %10.2f %16s %16s\n", n, p, d, d / n, a, f }'
done
echo "goals: data <= 8 B per sample; first render <= 3000 ms at 300000 samples"
