#!/usr/bin/env bash
# Benchmarks `callcheck build` on synthetic runs/ trees (examples/synth.rs) against the issues'
# goals, printing each figure beside its goal and the load average beside each measurement (the
# machine may be shared: ratios are less sensitive to load than times). A benchmark, not a
# test: it checks nothing.
#
#   bench/build.sh                          # 10k and 100k samples (20 models, k = 10)
#   SAMPLES="10000 100000 300000" bench/build.sh
#   SHAPES="200x3" bench/build.sh           # 200 models x 59 tasks x k = 3 (35,400 samples)
#   SHAPES="10x3500x3" bench/build.sh       # BFCL's ~3,500 questions, 10 rows, k = 3 (105,000)
#   SHAPES="20x59x85@3" bench/build.sh      # 20 rows serving 3 model ids, k = 85 (100,300): the
#                                           # rows of one id are compared (17 comparison pages)
#   SAMPLES= SHAPES="20x59x85@3" bench/build.sh   # that shape alone
#   BENCH_DIR=/path bench/build.sh          # where the trees go (default /tmp/callcheck-bench)
#   ROUNDS=3 bench/build.sh                 # full builds (and floors) per tree (default 2)
#   REBUILDS=9 bench/build.sh               # rounds of the incremental rebuilds (default 5)
#   KEEP=1 bench/build.sh                   # keep the generated trees (default: deleted after
#                                           # measuring, they take gigabytes)
#
# For each tree, ROUNDS times (each figure printed per round):
# - floor: examples/floor.rs reads and parses every file once on all cores (wall and CPU);
# - floor + permalinks: the same while one thread creates one stub-sized file per sample, the
#   least any build that keeps every sample's permalink must do;
# - full: a plain `callcheck build` run in the tree's folder (its default cache,
#   ./.callcheck-cache, absent) into an empty place, one run folder held back (wall, CPU = user+sys,
#   peak RSS from /usr/bin/time -v), and its ratios to the floors;
# then once:
# - copy: `cp -r` of the built site, the cost of creating its files by themselves (on ext4 in a
#   VM, creating 110,000 small files costs more CPU than reading and parsing 100,000 samples),
#   and build's ratio to the floor plus that copy;
# - incremental: the held-back run folder is put back and the same command runs again (the
#   verdicts of every other sample come from the cache; unchanged pages are not rewritten),
#   then once more with nothing changed (the cost of proving every sample unchanged); REBUILDS
#   rounds (default 5), the median printed with the range and its share of the full build;
# - fresh: the same runs built with --no-cache into another folder (untimed), compared with
#   `diff -r` to the incrementally built site, and the site searched for the cache's files;
# - the site: bytes per sample (apparent size, everything included), files per sample, the
#   largest file, index.html and data/manifest.json, and the share of compare/ in its bytes and
#   files.
# Goals: issue 32, a full build <= 1.5x the floor with permalinks at 100k (synthetic shape and
# 20x59x85@3), a rebuild after one new run <= 10 % of the full build, byte-identical to
# --no-cache, no cache in the site; issue 28, on 20x59x85@3, compare/ <= 10 % of the site's bytes
# and files and peak RSS <= 300 MB; issue 15, peak RSS <= 500 MB at 300k, site <= 3.3 KB per
# sample, no file over 50 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin callcheck --example synth --example floor
# An absolute path: the builds run in the tree's folder (env -C), and CARGO_TARGET_DIR may be
# relative or absolute.
bin=$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)
base=${BENCH_DIR:-/tmp/callcheck-bench}
rounds=${ROUNDS:-2}

# Old sites are moved aside and deleted only at the end: ext4 avoids reusing the inodes of
# recently deleted files for a while, and creating files right after deleting thousands is
# several times slower; builds right after an `rm -rf` would measure that, not callcheck.
trash=$base/.trash
mkdir -p "$trash"
trap 'rm -rf "$trash"' EXIT

field() { # a /usr/bin/time -v field
  case "$2" in
    wall) awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$1" ;;
    cpu) awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { print u + s }' "$1" ;;
    peak) awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$1" ;;
  esac
}

load() { cut -d' ' -f1-3 /proc/loadavg; }

# Moves the built site and the default cache out of the way (into the trash, deleted at the end).
aside() { # dir, tag
  local dir=$1 tag=$2
  [ -d "$dir/site" ] && mv "$dir/site" "$trash/site-$tag-$$"
  [ -d "$dir/site-fresh" ] && mv "$dir/site-fresh" "$trash/site-fresh-$tag-$$"
  [ -d "$dir/cache" ] && mv "$dir/cache" "$trash/cache-$tag-$$"
  [ -d "$dir/.callcheck-cache" ] && mv "$dir/.callcheck-cache" "$trash/callcheck-cache-$tag-$$"
  return 0
}

one() { # name, dir (holding tasks/ and runs/), samples
  local name=$1 dir=$2 n=$3
  aside "$dir" "$name-0"
  # Hold one run folder back: the incremental rebuild adds it. Its place is written down first,
  # so that a run interrupted before putting it back restores it next time.
  if [ -f "$dir/held/path" ]; then mv "$dir/held/run" "$dir/runs/$(cat "$dir/held/path")"; rm -r "$dir/held"; fi
  local held
  held=$(cd "$dir/runs" && find . -mindepth 3 -maxdepth 3 -type d | LC_ALL=C sort | tail -1)
  mkdir -p "$dir/held"
  printf '%s' "$held" > "$dir/held/path"
  mv "$dir/runs/$held" "$dir/held/run"
  sync
  printf '== %s: %d samples\n' "$name" "$n"
  # The command as a user types it in the collection's folder: the cache is the default one.
  local cmd=(env -C "$dir" "$bin/callcheck" build --tasks tasks --runs runs --out site)
  # The floor is read once more before the first round and that reading dropped: the builds
  # read a warm page cache, so the floor must too (a cold first pass measures the disk).
  "$bin/examples/floor" "$dir/runs" >/dev/null 2>&1
  # So is the floor with permalinks, untimed: on this kind of VM the first pass that creates
  # 100,000 files after a tree is set up took 8.7-9.3 s where the next ones took 4-5 s, and
  # round 1's ratio was then 0.6, a figure of the file system's warming, not of callcheck.
  "$bin/examples/floor" "$dir/runs" "$trash/floor-$name-warm-$$" >/dev/null 2>&1
  local r fw fc pw pc bw bc bp
  for ((r = 1; r <= rounds; r++)); do
    if ((r > 1)); then aside "$dir" "$name-$r"; sync; fi
    read -r fw fc < <("$bin/examples/floor" "$dir/runs" 2>/dev/null)
    # The floor of a site that keeps every permalink: the same reading and parsing while one
    # thread creates one stub-sized file per sample. Its files are kept until the end (deleting
    # them now would slow the build's own file creation, see above).
    read -r pw pc < <("$bin/examples/floor" "$dir/runs" "$trash/floor-$name-$r-$$" 2>/dev/null)
    local before
    before=$(load)
    /usr/bin/time -v "${cmd[@]}" 2> "$dir/time-full.txt" >/dev/null
    bw=$(field "$dir/time-full.txt" wall); bc=$(field "$dir/time-full.txt" cpu); bp=$(field "$dir/time-full.txt" peak)
    awk -v r="$r" -v fw="$fw" -v fc="$fc" -v pw="$pw" -v pc="$pc" -v bw="$bw" -v bc="$bc" -v bp="$bp" -v n="$n" -v before="$before" -v after="$(load)" '
      BEGIN {
        printf "  round %d (load average %s before the build, %s after)\n", r, before, after
        printf "    floor (read+parse)   wall %7.2f s   cpu %7.2f s\n", fw, fc
        printf "    floor + permalinks   wall %7.2f s   cpu %7.2f s   (the floor while one thread writes a stub-sized file per sample)\n", pw, pc
        printf "    full build           wall %7.2f s   cpu %7.2f s\n", bw, bc
        printf "    ratio to the floor   wall %7.2f      cpu %7.2f\n", bw / fw, bc / fc
        printf "    ratio to floor+perm. wall %7.2f      cpu %7.2f      goal <= 1.5\n", bw / pw, bc / pc
        printf "    peak RSS             %7d MB (%.0f B/sample)        goal <= 300 MB (20x59x85@3), <= 500 MB at 300k\n", bp, bp * 1048576 / n
      }'
  done
  # What creating the site's files costs by itself: a copy of the built site (reading it back
  # from the page cache, creating every folder and file). Build must pay this beside the floor.
  sync
  /usr/bin/time -f "%e %U %S" -o "$dir/time-copy.txt" cp -r "$dir/site" "$trash/copy-$name-$$"
  local cw cu cs cc
  read -r cw cu cs < "$dir/time-copy.txt"
  cc=$(awk -v u="$cu" -v s="$cs" 'BEGIN { print u + s }')
  mv "$dir/held/run" "$dir/runs/$held"
  rm -r "$dir/held"
  sync
  # The rebuild after one new run, then once more with nothing changed (what proving every
  # sample unchanged costs by itself); each REBUILDS times (default 5: a rebuild takes well
  # under a second, and this VM's times vary by half from one to the next), the run held back
  # and rebuilt without it (untimed) between rounds. The median is printed, with the range.
  local incs=() uns=() i
  local inc_load
  inc_load=$(load)
  for ((i = 0; i < ${REBUILDS:-5}; i++)); do
    if ((i > 0)); then
      mkdir -p "$dir/held"
      printf '%s' "$held" > "$dir/held/path"
      mv "$dir/runs/$held" "$dir/held/run"
      "${cmd[@]}" >/dev/null 2>&1
      mv "$dir/held/run" "$dir/runs/$held"
      rm -r "$dir/held"
    fi
    /usr/bin/time -v "${cmd[@]}" 2> "$dir/time-incremental.txt" >/dev/null
    incs+=("$(field "$dir/time-incremental.txt" wall)")
    /usr/bin/time -v "${cmd[@]}" 2> "$dir/time-unchanged.txt" >/dev/null
    uns+=("$(field "$dir/time-unchanged.txt" wall)")
  done
  median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)], v[1], v[NR] }'; }
  local iw imin imax uw umin umax
  read -r iw imin imax < <(median "${incs[@]}")
  read -r uw umin umax < <(median "${uns[@]}")
  # The same runs built fresh, without a cache: the incremental site must be the same bytes.
  # (--out site-fresh: the default cache stays untouched, --no-cache neither reads nor writes it.)
  env -C "$dir" "$bin/callcheck" build --tasks tasks --runs runs --out site-fresh --no-cache >/dev/null 2>&1
  local same cached_files
  if diff -r -q "$dir/site" "$dir/site-fresh" >/dev/null 2>&1; then same="byte-identical"; else same="DIFFERENT ($(diff -r -q "$dir/site" "$dir/site-fresh" 2>&1 | wc -l) files differ)"; fi
  cached_files=$(find "$dir/site" \( -name 'CACHEDIR.TAG' -o -name '.callcheck-cache' -o -name '*cache*' \) | wc -l)
  local bytes files biggest index manifest dirbytes cbytes cfiles cbiggest
  bytes=$(find "$dir/site" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
  dirbytes=$(du -sb --apparent-size "$dir/site" | cut -f1)
  files=$(find "$dir/site" -type f | wc -l)
  biggest=$(find "$dir/site" -type f -printf '%s %P\n' | sort -n | tail -1)
  index=$(stat -c %s "$dir/site/index.html")
  manifest=$(stat -c %s "$dir/site/data/manifest.json")
  if [ -d "$dir/site/compare" ]; then
    cbytes=$(find "$dir/site/compare" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
    cfiles=$(find "$dir/site/compare" -type f | wc -l)
    cbiggest=$(find "$dir/site/compare" -type f -printf '%s %P\n' | sort -n | tail -1)
  else
    cbytes=0 cfiles=0 cbiggest="0 -"
  fi
  awk -v n="$n" -v cw="$cw" -v cc="$cc" -v bw="$bw" -v bc="$bc" -v fw="$fw" -v fc="$fc" -v iw="$iw" -v imin="$imin" -v imax="$imax" -v uw="$uw" -v umin="$umin" -v umax="$umax" -v inc_load="$inc_load" -v same="$same" -v cached="$cached_files" \
      -v bytes="$bytes" -v dirbytes="$dirbytes" -v files="$files" -v biggest="$biggest" -v idx="$index" -v manifest="$manifest" -v cbytes="$cbytes" -v cfiles="$cfiles" -v cbiggest="$cbiggest" '
    BEGIN {
      printf "  copying the site     wall %7.2f s   cpu %7.2f s   (cp -r: creating its files alone)\n", cw, cc
      printf "  ratio to floor+copy  wall %7.2f      cpu %7.2f      (last round)\n", bw / (fw + cw), bc / (fc + cc)
      printf "  incremental (+1 run) wall %7.2f s = %.1f %% of the last full build    goal <= 10 %%  (median; %.2f-%.2f s; load average %s)\n", iw, 100 * iw / bw, imin, imax, inc_load
      printf "  rebuild, no change   wall %7.2f s = %.1f %% of the last full build    (median; %.2f-%.2f s)\n", uw, 100 * uw / bw, umin, umax
      printf "  against --no-cache   %s; cache files in the site: %d    goal: byte-identical, 0\n", same, cached
      printf "  site (file bytes)    %7.1f MB = %.2f KB/sample         goal <= 3.3 KB/sample\n", bytes / 1e6, bytes / n / 1000
      printf "  at 300k samples      %7.1f MB (this rate)              goal <= 1 GB (bench/site-size.sh measures one)\n", bytes / n * 300000 / 1e6
      printf "  site (du, with dirs) %7.1f MB = %.2f KB/sample\n", dirbytes / 1e6, dirbytes / n / 1000
      printf "  files                %7d = %.3f per sample\n", files, files / n
      split(biggest, b, " ")
      printf "  largest file         %7.1f MB (%s)        goal <= 50 MB\n", b[1] / 1e6, b[2]
      printf "  index.html           %7.1f KB;  data/manifest.json %.1f KB\n", idx / 1000, manifest / 1000
      split(cbiggest, c, " ")
      printf "  compare/             %7.1f MB = %.1f %% of the bytes, %d files = %.2f %% of the files    goal <= 10 %%\n", cbytes / 1e6, 100 * cbytes / bytes, cfiles, 100 * cfiles / files
      printf "  largest compare page %7.1f KB (%s)\n", c[1] / 1000, c[2]
    }'
  aside "$dir" "$name-end"
}

# A tree is generated unless present, and deleted after it is measured unless KEEP=1 (moved to
# the trash first, so that the next tree's builds are not slowed by its deletion).
done_with() { # dir
  if [ -z "${KEEP:-}" ]; then mv "$1" "$trash/tree-$(basename "$1")-$$"; fi
}

for n in ${SAMPLES-10000 100000}; do
  dir=$base/$n
  [ -d "$dir/runs" ] || "$bin/examples/synth" --samples "$n" --out "$dir" 2>/dev/null
  one "$n" "$dir" "$n"
  done_with "$dir"
done
for shape in ${SHAPES:-}; do # MODELSxK over 59 tasks, or MODELSxTASKSxK; @IDS: the rows serve IDS model ids
  ids=${shape#*@}
  [ "$ids" = "$shape" ] && ids=
  IFS=x read -r -a dims <<< "${shape%@*}"
  if ((${#dims[@]} == 3)); then models=${dims[0]} tasks=${dims[1]} k=${dims[2]}; else models=${dims[0]} tasks=59 k=${dims[1]}; fi
  n=$((models * tasks * k))
  dir=$base/shape-$shape
  [ -d "$dir/runs" ] || "$bin/examples/synth" --samples "$n" --models "$models" --k "$k" ${ids:+--served "$ids"} --out "$dir" 2>/dev/null
  one "$models models${ids:+ serving $ids model ids} x $tasks tasks x k=$k" "$dir" "$n"
  done_with "$dir"
done
