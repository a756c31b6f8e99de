#!/usr/bin/env bash
# scripts/download_imagenet.sh — ImageNet ILSVRC-2012 as kiln train resnet reads it:
# DIR/train/<wnid>/*.JPEG from the per-class tars inside ILSVRC2012_img_train.tar, and
# DIR/val/<wnid>/*.JPEG from ILSVRC2012_img_val.tar sorted by the synset label file (line i:
# the wnid of the i-th image in name order). Resumable and checksummed (scripts/download_lib.sh).
set -uo pipefail

usage() {
  cat <<'TEXT'
usage: scripts/download_imagenet.sh [--dir DIR] [--manifest FILE] [--base-url URL] [--allow-unverified]
  --dir DIR            where the tarballs and the train/ and val/ folders go (default: ./imagenet)
  --manifest FILE      "ALGO HASH NAME URL" lines (default: scripts/manifests/imagenet.txt)
  --base-url URL       fetch every file as URL/NAME (your mirror; image-net.org needs a login)
  --allow-unverified   accept files the manifest has no checksum for (the label file has none)
Rerun to resume: verified files are kept, partial ones continue.
TEXT
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/download_lib.sh
source "$here/download_lib.sh"
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

# train: one tar per class, unpacked into its own folder (a finished class is not redone).
if [[ ! -f "$dir/train/.done" ]]; then
  say "laying out train/"
  mkdir -p "$dir/train/.tars"
  tar -xf "$dir/ILSVRC2012_img_train.tar" -C "$dir/train/.tars" || { say "ILSVRC2012_img_train.tar: cannot unpack"; exit 1; }
  for class_tar in "$dir"/train/.tars/*.tar; do
    wnid=$(basename "$class_tar" .tar)
    mkdir -p "$dir/train/$wnid.part"
    tar -xf "$class_tar" -C "$dir/train/$wnid.part" || { say "$wnid.tar: cannot unpack"; exit 1; }
    rm -rf "$dir/train/$wnid" && mv "$dir/train/$wnid.part" "$dir/train/$wnid" && rm -f "$class_tar"
  done
  rmdir "$dir/train/.tars" && touch "$dir/train/.done"
fi

# val: flat images, moved into the folder of their label.
if [[ ! -f "$dir/val/.done" ]]; then
  say "laying out val/"
  mkdir -p "$dir/val"
  tar -xf "$dir/ILSVRC2012_img_val.tar" -C "$dir/val" || { say "ILSVRC2012_img_val.tar: cannot unpack"; exit 1; }
  labels="$dir/imagenet_2012_validation_synset_labels.txt"
  mapfile -t images < <(find "$dir/val" -maxdepth 1 -type f -iname '*.jpeg' -printf '%f\n' | LC_ALL=C sort)
  mapfile -t wnids < "$labels"
  if [[ ${#images[@]} -ne ${#wnids[@]} ]]; then
    say "$labels: ${#wnids[@]} labels for ${#images[@]} validation images"
    exit 1
  fi
  for i in "${!images[@]}"; do
    mkdir -p "$dir/val/${wnids[i]}" && mv "$dir/val/${images[i]}" "$dir/val/${wnids[i]}/"
  done
  touch "$dir/val/.done"
fi
say "done: $dir/train ($(find "$dir/train" -mindepth 1 -maxdepth 1 -type d | wc -l) classes), $dir/val"
