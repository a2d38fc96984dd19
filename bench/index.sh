#!/usr/bin/env bash
# Benchmarks the summary pages on the 200 models x 59 tasks x k = 3 shape (35,400 samples): the
# weight of index.html and its render time in headless Chromium, and the largest summary page
# (everything but the per-sample pages under t/ and the data exports), each beside its goal.
# A benchmark, not a test: it prints figures and checks nothing.
#
#   bench/index.sh                       # 200 models x 59 tasks x k = 3
#   SHAPES="200x3 20x10" bench/index.sh  # other MODELSxK shapes over the 59 tasks
#   BENCH_DIR=/path bench/index.sh       # where the trees go (default /tmp/callcheck-bench,
#                                        # shared with bench/build.sh: same trees, same names)
#   SITE=/path/to/site bench/index.sh    # measure a site already built (another version's)
#
# What "render" measures: a wrapper page (written next to the site) loads index.html in a
# 1440 x 900 iframe; when the iframe's load event fires, the wrapper forces a synchronous
# layout of the whole document (reading the height of the page and the position of its last
# element) and records the time from the iframe's navigation start to the end of that layout,
# i.e. fetch, parse, style and layout of the complete page, as a reader's browser must do before
# the matrix can be scrolled. Paint of the visible viewport is not included. The wrapper needs
# --allow-file-access-from-files to read the frame's timing from file://. Chromium is started
# once per measurement (`--dump-dom` prints the figure the wrapper wrote); the median of RUNS
# (default 5) is reported, with the minimum and maximum.
#
# Goals (issue 15): index.html <= 2 MB and renders in <= 1 s for 200 x 59 x 3; no summary page
# grows with k (a test, site_build's summary_pages_do_not_grow_with_k, checks that).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${SITE:-}" ] || cargo build --release --quiet --bin callcheck --example synth
bin=${CARGO_TARGET_DIR:-target}/release
base=${BENCH_DIR:-/tmp/callcheck-bench}
runs=${RUNS:-5}
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$chrome" ]; then echo "chromium not found (apt-get install -y chromium)" >&2; exit 1; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

render_ms() { # site dir -> ms from navigation start to the end of a forced full layout
  cat > "$1/.render-time.html" <<'EOF'
<!doctype html><meta charset="utf-8"><title>render time</title>
<p id="out">pending</p>
<iframe id="f" src="index.html" style="width:1440px;height:900px;border:0"></iframe>
<script>
document.getElementById("f").addEventListener("load", function () {
  var w = this.contentWindow, d = this.contentDocument;
  var h = d.documentElement.scrollHeight;
  var last = d.body.lastElementChild.getBoundingClientRect().bottom;
  var ms = w.performance.now(); // since the frame's navigation start
  document.getElementById("out").textContent = "render-ms=" + Math.round(ms) + " height=" + h + " last=" + Math.round(last);
});
</script>
EOF
  "$chrome" --headless --no-sandbox --disable-gpu --allow-file-access-from-files \
    --user-data-dir="$work/profile" --dump-dom "file://$1/.render-time.html" 2>/dev/null |
    grep -o 'render-ms=[0-9]*' | grep -o '[0-9]*' || echo "-"
}

stats() { # numbers on stdin -> "median min max"
  sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) { print "- - -"; exit } print v[int((NR + 1) / 2)], v[1], v[NR] }'
}

measure() { # title, site dir
  local site=$2 index med lo hi biggest
  index=$(stat -c %s "$site/index.html")
  read -r med lo hi < <(for _ in $(seq "$runs"); do render_ms "$site"; done | grep -v '^-$' | stats)
  biggest=$(cd "$site" && find . -name '*.html' -not -path './t/*' -not -name '.render-time.html' -printf '%s %P\n' | sort -n | tail -1)
  printf '== %s\n' "$1"
  awk -v idx="$index" -v med="$med" -v lo="$lo" -v hi="$hi" -v runs="$runs" -v biggest="$biggest" 'BEGIN {
    printf "  index.html            %8.2f MB                         goal <= 2 MB\n", idx / 1e6
    printf "  index render          %8s ms (min %s, max %s, %d runs)  goal <= 1000 ms\n", med, lo, hi, runs
    split(biggest, b, " ")
    printf "  largest summary page  %8.2f MB (%s)\n", b[1] / 1e6, b[2]
  }'
  (cd "$site" && find . -name '*.html' -not -path './t/*' -not -name '.render-time.html' -printf '%s %h\n' |
    awk '{ d = $2; sub(/^\.\/?/, "", d); if (d == "") d = "(root)"; if ($1 > m[d]) m[d] = $1 } END { for (d in m) printf "    largest in %-10s %8.1f KB\n", d, m[d] / 1000 }' | sort)
  rm -f "$site/.render-time.html"
}

if [ -n "${SITE:-}" ]; then
  measure "$SITE" "$(cd "$SITE" && pwd)"
  exit 0
fi
for shape in ${SHAPES:-200x3}; do
  models=${shape%x*}; k=${shape#*x}; n=$((models * 59 * k))
  dir=$base/shape-$shape
  [ -d "$dir/runs" ] || "$bin/examples/synth" --samples "$n" --models "$models" --k "$k" --out "$dir" 2>/dev/null
  site=$work/site-$shape
  "$bin/callcheck" build --no-cache --tasks "$dir/tasks" --runs "$dir/runs" --out "$site" >/dev/null 2>&1
  measure "$models models x 59 tasks x k=$k: $n samples" "$site"
done
