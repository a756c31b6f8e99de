#!/usr/bin/env bash
# scripts/download_imagenet.sh — ImageNet ILSVRC-2012 as kiln train resnet reads it:
# DIR/train/<wnid>/*.JPEG from the per-class tars inside ILSVRC2012_img_train.tar, and
# DIR/val/<wnid>/*.JPEG from ILSVRC2012_img_val.tar sorted by the synset label file (line i:
# the wnid of the i-th image in name order). Resumable and checksummed (scripts/download_lib.sh).
# Every archive's members are checked before it is unpacked into a staging folder, and every
# label line before it becomes a folder name (scripts/archive_lib.sh); val/ appears whole.
set -uo pipefail

usage() {
  cat <<'TEXT'
usage: scripts/download_imagenet.sh [--dir DIR] [--manifest FILE] [--base-url URL] [--allow-unverified]
  --dir DIR            where the tarballs and the train/ and val/ folders go (default: ./imagenet)
  --manifest FILE      "ALGO HASH NAME URL" lines (default: scripts/manifests/imagenet.txt)
  --base-url URL       fetch every file as URL/NAME (your mirror; image-net.org needs a login)
  --allow-unverified   accept files the manifest has no checksum for (the label file has none;
                       its lines are checked all the same)
Rerun to resume: verified files are kept, partial ones continue.
TEXT
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/download_lib.sh
source "$here/download_lib.sh"
# shellcheck source=scripts/archive_lib.sh
source "$here/archive_lib.sh"
dir=./imagenet manifest="$here/manifests/imagenet.txt" base="" allow=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --dir) dir=${2:?--dir needs a folder}; shift 2 ;;
    --manifest) manifest=${2:?--manifest needs a file}; shift 2 ;;
    --base-url) base=${2:?--base-url needs a URL}; shift 2 ;;
    --allow-unverified) allow=1; shift ;;
    *) say "unknown option $1 (--help)"; exit 2 ;;
  esac
done
mkdir -p "$dir" || exit 1
fetch_manifest "$manifest" "$dir" "$base" "$allow" || exit 1

verified=$(awk '!/^#/ && NF >= 3 { print $3 }' "$manifest")   # nothing unpacked may take their place
labels="$dir/imagenet_2012_validation_synset_labels.txt"
[[ -f "$labels" ]] || { say "$labels: missing (the manifest must name it)"; exit 1; }
if ! why=$(check_name_lines "$labels"); then say "$why"; exit 1; fi

# train: one tar per class, each unpacked into its own staging folder, then moved into place.
if [[ ! -f "$dir/train/.done" ]]; then
  say "laying out train/"
  mkdir -p "$dir/train"
  # shellcheck disable=SC2086  # one protected name per word
  unpack_checked "$dir/ILSVRC2012_img_train.tar" "$dir/train/.tars" $verified || exit 1
  mapfile -t class_tars < <(find "$dir/train/.tars" -mindepth 1 -maxdepth 1 -printf '%f\n' | LC_ALL=C sort)
  for class_tar in "${class_tars[@]}"; do
    if [[ ! -f "$dir/train/.tars/$class_tar" || "$class_tar" != *.tar ]]; then
      say "ILSVRC2012_img_train.tar: member $class_tar is not a class tar (<wnid>.tar)"; exit 1
    fi
    wnid=${class_tar%.tar}
    why=$(single_name_problem "$wnid")
    [[ -z "$why" ]] || { say "ILSVRC2012_img_train.tar: member $class_tar: \"$wnid\" is no class name: $why"; exit 1; }
  done
  for class_tar in "${class_tars[@]}"; do
    wnid=${class_tar%.tar}
    unpack_checked "$dir/train/.tars/$class_tar" "$dir/train/$wnid.part" || exit 1
    rm -rf "$dir/train/$wnid" && mv "$dir/train/$wnid.part" "$dir/train/$wnid" && rm -f "$dir/train/.tars/$class_tar"
  done
  rmdir "$dir/train/.tars" && touch "$dir/train/.done" || exit 1
fi

# val: flat images, moved into the folder of their label inside the staging folder val.part,
# which becomes val/ once every image has its class.
if [[ ! -f "$dir/val/.done" ]]; then
  if [[ -e "$dir/val" ]]; then
    say "$dir/val exists but was not laid out by this script (no val/.done): move it away, then rerun"
    exit 1
  fi
  say "laying out val/"
  staging="$dir/val.part"
  # shellcheck disable=SC2086
  unpack_checked "$dir/ILSVRC2012_img_val.tar" "$staging" $verified || exit 1
  odd=$(find "$staging" -mindepth 1 \( ! -type f -o ! -iname '*.jpeg' \) -printf '%P\n' | head -1)
  if [[ -n "$odd" ]]; then
    rm -rf "$staging"; say "ILSVRC2012_img_val.tar: member $odd is not a flat validation image (*.JPEG)"; exit 1
  fi
  mapfile -t images < <(find "$staging" -mindepth 1 -printf '%f\n' | LC_ALL=C sort)
  mapfile -t wnids < <(sed 's/[[:space:]]*$//' "$labels")
  while [[ ${#wnids[@]} -gt 0 && -z "${wnids[-1]}" ]]; do unset 'wnids[-1]'; done
  for i in "${!wnids[@]}"; do
    if [[ -z "${wnids[i]}" || ! -d "$dir/train/${wnids[i]}" ]]; then
      rm -rf "$staging"
      say "$(basename "$labels"): line $((i + 1)): \"${wnids[i]}\" is not one of the train/ classes"
      exit 1
    fi
  done
  if [[ ${#images[@]} -ne ${#wnids[@]} ]]; then
    rm -rf "$staging"
    say "$(basename "$labels"): ${#wnids[@]} labels for ${#images[@]} validation images"
    exit 1
  fi
  for i in "${!images[@]}"; do
    mkdir -p "$staging/${wnids[i]}" && mv "$staging/${images[i]}" "$staging/${wnids[i]}/" || exit 1
  done
  touch "$staging/.done" && mv "$staging" "$dir/val" || exit 1
fi
say "done: $dir/train ($(find "$dir/train" -mindepth 1 -maxdepth 1 -type d | wc -l) classes), $dir/val"
