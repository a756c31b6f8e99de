#!/usr/bin/env bash
# scripts/archive_lib.sh — sourced by the download scripts (after download_lib.sh, for `say`):
# names that come from downloaded content checked before they become paths. An archive's
# members are listed and checked (only files and folders; no absolute name, no '..', no name
# of an already verified file) before it is unpacked, into a staging folder of its own, from
# which the caller moves the checked result into place; a list's lines (labels, md5 lists) are
# checked the same way, naming the file and line.

# The rules, as an awk function: why NAME may not become a path under a folder ("" when it
# may). ONE: NAME must be a single component (no '/', not starting with '.').
archive_name_rules='
function name_problem(name, one,    parts, n, i) {
  if (name == "") return "empty name"
  if (substr(name, 1, 1) == "/") return "absolute path"
  if (name ~ /[^A-Za-z0-9._\/-]/) return "characters other than letters, digits, \".\", \"_\", \"-\", \"/\""
  n = split(name, parts, "/")
  for (i = 1; i <= n; ++i) if (parts[i] == "..") return "\"..\" leaves the folder"
  if (one && index(name, "/")) return "not a single name (\"/\")"
  if (one && substr(name, 1, 1) == ".") return "starts with \".\""
  return ""
}'

# single_name_problem NAME: why NAME may not be one file or folder name ("" when it may).
single_name_problem() { LC_ALL=C awk -v name="$1" "$archive_name_rules"' BEGIN { print name_problem(name, 1) }'; }

# check_members ARCHIVE [PROTECTED...]: every member of ARCHIVE a file or folder whose name
# passes name_problem and is none of PROTECTED (files already verified in the destination);
# names the first that is not.
check_members() {
  local archive=$1; shift
  local protected=" $* "
  tar -tv -P --numeric-owner --full-time -f "$archive" | LC_ALL=C awk -v archive="$(basename "$archive")" \
      -v protected="$protected" "$archive_name_rules"'
    function refuse(name, why) { printf "%s: member \"%s\": %s; nothing unpacked\n", archive, name, why; failed = 1; exit 1 }
    {
      if (!match($0, /^[^ ]+ +[0-9]+\/[0-9]+ +[0-9,]+ +[0-9-]+ +[0-9:]+ /)) refuse($0, "unreadable listing")
      name = substr($0, RLENGTH + 1)
      type = substr($0, 1, 1)
      if (type == "l" && (at = index(name, " -> "))) refuse(substr(name, 1, at - 1), "a symbolic link to " substr(name, at + 4))
      if (type == "h" && (at = index(name, " link to "))) refuse(substr(name, 1, at - 1), "a hard link to " substr(name, at + 9))
      if (type == "l") refuse(name, "a symbolic link")
      if (type == "h") refuse(name, "a hard link")
      if (type != "-" && type != "d") refuse(name, "neither a file nor a folder")
      why = name_problem(name, 0)
      if (why != "") refuse(name, why)
      plain = name
      while (substr(plain, 1, 2) == "./") plain = substr(plain, 3)
      sub(/\/+$/, "", plain)
      if (plain != "" && index(protected, " " plain " ")) refuse(name, "would overwrite the verified " plain)
    }
    END { if (!failed && NR == 0) { printf "%s: no members (not an archive?)\n", archive; exit 1 } }'
  local status=("${PIPESTATUS[@]}")
  [[ ${status[1]} == 0 ]] || return 1   # awk said why
  [[ ${status[0]} == 0 ]] || { say "$(basename "$archive"): cannot list its members"; return 1; }
}

# unpack_checked ARCHIVE STAGING [PROTECTED...]: check_members, then ARCHIVE unpacked into
# STAGING (made afresh), which must then hold only files and folders. The caller moves what
# it wants out of STAGING; on failure STAGING is removed.
unpack_checked() {
  local archive=$1 staging=$2; shift 2
  local why
  if ! why=$(check_members "$archive" "$@"); then say "$why"; return 1; fi
  rm -rf "$staging" && mkdir -p "$staging" || return 1
  if ! tar -xf "$archive" -C "$staging" --no-same-owner; then
    rm -rf "$staging"; say "$(basename "$archive"): cannot unpack"; return 1
  fi
  local odd
  odd=$(find "$staging" -mindepth 1 ! -type f ! -type d -print -quit)
  if [[ -n "$odd" ]]; then
    rm -rf "$staging"; say "$(basename "$archive"): unpacked ${odd#"$staging"/}, neither a file nor a folder; nothing moved into place"
    return 1
  fi
}

# check_name_lines FILE: every non-blank line of FILE (trailing spaces ignored) a single name
# (name_problem with ONE); names the file and the first line that is not.
check_name_lines() {
  LC_ALL=C awk -v file="$(basename "$1")" "$archive_name_rules"'
    { sub(/[ \t\r]+$/, "") }
    $0 != "" { why = name_problem($0, 1); if (why != "") { printf "%s: line %d: \"%s\": %s\n", file, NR, $0, why; exit 1 } }' "$1"
}

# check_md5_list FILE: every non-blank line of FILE "HASH NAME" (md5sum's output: 32 hex digits,
# NAME optionally after "*", passing name_problem); names the file and the first line that is not.
check_md5_list() {
  LC_ALL=C awk -v file="$(basename "$1")" "$archive_name_rules"'
    NF == 0 { next }
    {
      name = $2; sub(/^\*/, "", name)
      if (NF != 2 || length($1) != 32 || $1 ~ /[^0-9a-f]/) why = "not \"MD5 NAME\""
      else why = name_problem(name, 0)
      if (why != "") { printf "%s: line %d: \"%s\": %s\n", file, NR, $0, why; exit 1 }
      ++n
    }
    END { if (!why && n == 0) { printf "%s: no files listed\n", file; exit 1 } }' "$1"
}
