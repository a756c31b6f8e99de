#!/usr/bin/env bash
# `kiln prepare bert --sampling reference` against tinygrad's port of the reference
# (extra/datasets/wikipedia.py) on one part file at the MLPerf settings (S 512, P 76, dupe 10,
# seed 12345): wall time, CPU time (user + system; steadier on a shared machine) and peak RSS of
# each from /usr/bin/time -v, and whether the samples agree.
# Usage: TINYGRAD_DIR=~/tinygrad bench/prepare_reference.sh PART VOCAB
#   PART: a part file (one sentence per line, a blank line between documents); to make one from
#   WikiText (one paragraph per line, articles headed " = Title = "):
#   bench/prepare_reference.sh --from-wikitext wiki.valid.tokens > part.txt
# tinygrad's port needs python3 with numpy and tqdm (Debian: python3-numpy python3-tqdm).
set -euo pipefail
if [[ ${1:-} == --from-wikitext ]]; then
  # A document per article; headings dropped; sentences split at " . ".
  exec awk '/^ = [^=]/ { if (n++) print ""; next } /^ = = / { next }
            NF { sub(/^ +/, ""); sub(/ +$/, ""); gsub(/ \. /, " .\n"); print }' "$2"
fi
root=$(cd "$(dirname "$0")/.." && pwd)
part=$(realpath "$1")
vocab=$(realpath "$2")
: "${TINYGRAD_DIR:?set TINYGRAD_DIR to a tinygrad checkout}"
python=${PYTHON:-/usr/bin/python3}
ninja -C "$root/build" kiln >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

measure() {  # name command...: prints "name: wall S s, CPU C s, peak RSS M MB"
  local name=$1
  shift
  /usr/bin/time -v "$@" >"$out/$name.log" 2>&1 || { cat "$out/$name.log" >&2; exit 1; }
  awk -v name="$name" '/Elapsed \(wall clock\)/ { n = split($NF, t, ":"); s = 0; for (i = 1; i <= n; ++i) s = s * 60 + t[i] }
       /(User|System) time \(seconds\)/ { cpu += $NF } /Maximum resident set size/ { kb = $NF }
       END { printf "%s: wall %.2f s, CPU %.2f s, peak RSS %.0f MB\n", name, s, cpu, kb / 1024 }' "$out/$name.log"
}

# kiln: the part as its only input, one worker (the port is one process per part as well).
echo "part: $part ($(du -h "$part" | cut -f1))"
printf "a short eval document .\nof two lines .\n" >"$out/eval.txt"  # a token eval set
measure kiln "$root/build/kiln" prepare bert --input "$part" --eval-input "$out/eval.txt" --eval-samples 1 \
  --vocab "$vocab" --output "$out/kiln" --workers 1 --sampling reference

# tinygrad: BASEDIR/results4/part-00000-of-00500 -> BASEDIR/train/0.pkl
mkdir -p "$out/tg/results4"
ln -s "$part" "$out/tg/results4/part-00000-of-00500"
ln -s "$vocab" "$out/tg/vocab.txt"
measure tinygrad env BASEDIR="$out/tg" PYTHONPATH="$TINYGRAD_DIR" "$python" \
  "$TINYGRAD_DIR/extra/datasets/wikipedia.py" pre-train 0

"$python" "$root/bench/compare_prepared.py" "$out/kiln/train/part-00000.kbs" "$out/tg/train/0.pkl"
