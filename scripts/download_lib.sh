#!/usr/bin/env bash
# scripts/download_lib.sh — sourced by download_bert_data.sh and download_imagenet.sh: verified,
# resumable downloads from a checksum manifest. A manifest line is
#   ALGO HASH NAME URL          (ALGO md5 or sha256; HASH "-": none published)
# ('#' starts a comment). A file is downloaded to NAME.part, resumed there after an
# interruption (curl -C -), and renamed to NAME only once its checksum matches; a NAME that
# already matches is not fetched again. A mismatch names the file, moves the bad download to
# NAME.corrupt and leaves every verified file in place.

say() { echo "$(basename "$0"): $*"; }

# checksum ALGO FILE
checksum() { "${1}sum" "$2" | cut -d' ' -f1; }

# fetch_verified ALGO HASH NAME URL DIR ALLOW_UNVERIFIED -> 0 verified, 1 failed
fetch_verified() {
  local algo=$1 hash=$2 name=$3 url=$4 dir=$5 allow=$6
  local file="$dir/$name" part="$dir/$name.part"
  case "$algo" in md5|sha256) ;; *) say "$name: unknown checksum kind '$algo' in the manifest"; return 1 ;; esac
  if [[ "$hash" == "-" && "$allow" != 1 ]]; then
    say "$name: no published checksum in the manifest; add one, or pass --allow-unverified"
    return 1
  fi
  if [[ -f "$file" ]] && { [[ "$hash" == "-" ]] || [[ "$(checksum "$algo" "$file")" == "$hash" ]]; }; then
    say "$name: already here$([[ "$hash" != "-" ]] && echo ", verified")"
    return 0
  fi
  mkdir -p "$(dirname "$file")"
  local try
  for try in 1 2 3 4 5; do
    curl -fsSL --retry 2 -C - -o "$part" "$url" && break
    [[ $try == 5 ]] && { say "$name: download from $url failed"; return 1; }
    say "$name: interrupted, resuming (try $((try + 1)))"
  done
  if [[ "$hash" != "-" ]]; then
    local got
    got=$(checksum "$algo" "$part")
    if [[ "$got" != "$hash" ]]; then
      mv -f "$part" "$file.corrupt"
      say "$name: $algo mismatch (got $got, expected $hash); kept as $file.corrupt, other files untouched"
      return 1
    fi
  fi
  mv -f "$part" "$file"
  if [[ "$hash" == "-" ]]; then say "$name: downloaded, NOT verified (no published checksum)"
  else say "$name: verified ($algo)"; fi
}

# fetch_manifest MANIFEST DIR BASE_URL ALLOW_UNVERIFIED: every file of MANIFEST; with BASE_URL
# (a mirror) a file's URL is BASE_URL/NAME. Returns 1 when any file failed, after trying all.
fetch_manifest() {
  local manifest=$1 dir=$2 base=$3 allow=$4 failed=() algo hash name url
  [[ -r "$manifest" ]] || { say "manifest $manifest: not readable"; return 1; }
  while read -r algo hash name url; do
    [[ -z "$algo" || "$algo" == \#* ]] && continue
    [[ -n "$base" ]] && url="${base%/}/$name"
    fetch_verified "$algo" "$hash" "$name" "$url" "$dir" "$allow" || failed+=("$name")
  done < "$manifest"
  if [[ ${#failed[@]} -gt 0 ]]; then
    say "failed: ${failed[*]}"
    return 1
  fi
}

# verify_md5_list LIST DIR [EXACT]: every "HASH ./NAME" line of LIST (MLCommons' per-file md5
# lists; check_md5_list in archive_lib.sh checks its form first) against DIR/NAME; names each
# file that is missing or differs, and with EXACT=1 each file in DIR that LIST does not name.
# Returns 1 when any does.
verify_md5_list() {
  local list=$1 dir=$2 exact=${3:-0} hash name bad=0
  while read -r hash name; do
    [[ -z "$hash" ]] && continue
    name=${name#\*}
    while [[ $name == ./* ]]; do name=${name#./}; done
    if [[ ! -f "$dir/$name" ]]; then say "$dir/$name: missing"; bad=1
    elif [[ "$(checksum md5 "$dir/$name")" != "$hash" ]]; then say "$dir/$name: md5 mismatch"; bad=1
    fi
  done < "$list"
  if [[ $exact == 1 ]]; then
    while read -r name; do
      say "$dir/$name: not in $(basename "$list")"; bad=1
    done < <(LC_ALL=C comm -23 <(cd "$dir" && find . -type f -printf '%P\n' | LC_ALL=C sort) \
                              <(awk 'NF { n = $2; sub(/^\*/, "", n); sub(/^(\.\/)+/, "", n); print n }' "$list" | LC_ALL=C sort))
  fi
  return $bad
}
