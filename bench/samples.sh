#!/usr/bin/env bash
# Benchmarks the triage page (samples.html + samples.js + data/samples.js): its weight and
# Chromium's time to first render (navigation start to the first page of rows on screen, as the
# page itself records it in #count's data-render-ms), unfiltered and filtered to one model's
# failures. The page is written by examples/samples_page.rs from a synthetic matrix with the
# encoder `build` uses, so no runs/ tree is needed (a 300,000-sample tree takes gigabytes).
# A benchmark, not a test: it prints figures next to their goal and checks nothing.
#
#   bench/samples.sh                    # 100,000 and 300,000 samples
#   SAMPLES="10000" bench/samples.sh    # other sizes
#
# Goals on the 2-core reference machine, at 300,000 samples: data/samples.js <= 10 MB (most of
# it is the table of distinct details, which real runs have as many of as these), first render
# <= 3 s.
set -euo pipefail
cd "$(dirname "$0")/.."
# The debug profile: the figures are the page's (bytes, Chromium's time), not the generator's,
# and a release build of the crate costs many minutes.
cargo build --quiet --example samples_page
bin=${CARGO_TARGET_DIR:-target}/debug/examples/samples_page
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$chrome" ]; then echo "chromium not found (apt-get install -y chromium)" >&2; exit 1; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

render_ms() { # the page's own data-render-ms after Chromium loaded it
  "$chrome" --headless --no-sandbox --disable-gpu --user-data-dir="$work/profile" \
    --dump-dom "$1" 2>/dev/null |
    grep -o 'data-render-ms="[0-9]*"' | grep -o '[0-9]*' || echo "-"
}

printf '%-8s %11s %12s %10s %16s %14s\n' samples page_bytes data_bytes B_per_smp first_render_ms filtered_ms
for n in ${SAMPLES:-100000 300000}; do
  dir=$work/$n
  "$bin" --samples "$n" --out "$dir" 2>/dev/null
  page=$(( $(stat -c %s "$dir/samples.html") + $(stat -c %s "$dir/samples.js") + $(stat -c %s "$dir/style.css") ))
  data=$(stat -c %s "$dir/data/samples.js")
  all=$(render_ms "file://$dir/samples.html")
  filtered=$(render_ms "file://$dir/samples.html#outcome=fail&model=model-00")
  awk -v n="$n" -v p="$page" -v d="$data" -v a="$all" -v f="$filtered" \
    'BEGIN { printf "%-8s %11d %12d %10.2f %16s %14s\n", n, p, d, d / n, a, f }'
done
echo "goals at 300000 samples: data_bytes <= 10000000; first render <= 3000 ms"
