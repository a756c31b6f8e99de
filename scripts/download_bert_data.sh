#!/usr/bin/env bash
# scripts/download_bert_data.sh — the MLPerf BERT package into DIR: bert_config.json, vocab.txt,
# the TF1 checkpoint model.ckpt-28252.*, and (--with-text) results_text.tar.gz unpacked to
# DIR/results4 (part-00000-of-00500 .. part-00499-of-00500, eval.txt). Resumable and checksummed
# (scripts/download_lib.sh). The tarball has no published checksum: its members are checked
# (scripts/archive_lib.sh), it is unpacked into DIR/.results_text.staging, and results4/ moves
# into place only once it holds exactly the files of bert_reference_results_text_md5.txt, each
# with its md5.
set -uo pipefail

usage() {
  cat <<'TEXT'
usage: scripts/download_bert_data.sh [--dir DIR] [--with-text] [--manifest FILE] [--base-url URL]
                                     [--allow-unverified]
  --dir DIR            where the files go (default: $BASEDIR, else ./bert_data)
  --with-text          also the training text (results_text.tar.gz, ~4.5 GB) and its md5 list:
                       neither has a published checksum (--allow-unverified); the text moves
                       into place only once its files are exactly those of the list
  --manifest FILE      "ALGO HASH NAME URL" lines (default: scripts/manifests/bert_data.txt)
  --base-url URL       fetch every file as URL/NAME (a mirror) instead of the manifest's URLs
  --allow-unverified   accept files the manifest has no checksum for (said for each one)
Rerun to resume: verified files are kept, partial ones continue.
TEXT
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/download_lib.sh
source "$here/download_lib.sh"
# shellcheck source=scripts/archive_lib.sh
source "$here/archive_lib.sh"
dir=${BASEDIR:-./bert_data} text=0 manifest="$here/manifests/bert_data.txt" base="" allow=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --dir) dir=${2:?--dir needs a folder}; shift 2 ;;
    --with-text) text=1; shift ;;
    --manifest) manifest=${2:?--manifest needs a file}; shift 2 ;;
    --base-url) base=${2:?--base-url needs a URL}; shift 2 ;;
    --allow-unverified) allow=1; shift ;;
    *) say "unknown option $1 (--help)"; exit 2 ;;
  esac
done
mkdir -p "$dir" || exit 1

selected=$(mktemp)
trap 'rm -f "$selected"' EXIT
if [[ $text == 1 ]]; then cp "$manifest" "$selected"
else grep -v -e ' results_text\.tar\.gz ' -e ' bert_reference_results_text_md5\.txt ' "$manifest" > "$selected"; fi
fetch_manifest "$selected" "$dir" "$base" "$allow" || exit 1
[[ -f "$dir/model.ckpt-28252.index" && ! -f "$dir/checkpoint" ]] && printf 'model_checkpoint_path: "model.ckpt-28252"\n' > "$dir/checkpoint"

if [[ $text == 1 ]]; then
  md5_list="$dir/bert_reference_results_text_md5.txt"
  if ! why=$(check_md5_list "$md5_list"); then say "$why"; exit 1; fi
  if [[ ! -d "$dir/results4" ]]; then
    say "unpacking results_text.tar.gz into $dir/.results_text.staging"
    staging="$dir/.results_text.staging"
    # Nothing in the tarball may take the place of a file verified above.
    verified=$(awk '!/^#/ && NF >= 3 { print $3 }' "$selected"; echo checkpoint)
    # shellcheck disable=SC2086  # one protected name per word
    unpack_checked "$dir/results_text.tar.gz" "$staging" $verified || exit 1
    odd=$(find "$staging" -mindepth 1 -maxdepth 1 ! -name results4 -printf '%P\n' | head -1)
    if [[ -n "$odd" ]]; then
      rm -rf "$staging"; say "results_text.tar.gz: holds $odd besides results4/; nothing moved into place"; exit 1
    elif [[ ! -d "$staging/results4" ]]; then
      rm -rf "$staging"; say "results_text.tar.gz: holds no results4/; nothing moved into place"; exit 1
    fi
    if ! verify_md5_list "$md5_list" "$staging/results4" 1; then
      rm -rf "$staging"
      say "results_text.tar.gz: its text does not match bert_reference_results_text_md5.txt; nothing moved into place"
      exit 1
    fi
    mv "$staging/results4" "$dir/results4" && rmdir "$staging" || exit 1
  else
    verify_md5_list "$md5_list" "$dir/results4" || exit 1
  fi
  say "results4: every file matches bert_reference_results_text_md5.txt"
fi
say "done: $dir"
