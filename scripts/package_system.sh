#!/usr/bin/env bash
# scripts/package_system.sh — sourced by package_submission.sh: this machine as an MLPerf training
# system description (the fields of mlperf_logging's system_desc_checker), and the code reference.
# What cannot be detected is left "" for the submitter to fill in (unknown_system_fields).

# json_escape TEXT: TEXT as the inside of a JSON string (quotes, backslashes, control characters).
json_escape() {
  local s=$1 out="" c code i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case "$c" in
      '"' | \\) out+="\\$c" ;;
      $'\n') out+='\n' ;;
      $'\r') out+='\r' ;;
      $'\t') out+='\t' ;;
      *)
        printf -v code '%d' "'$c"
        if ((code >= 0 && code < 32)); then printf -v c '\\u%04x' "$code"; fi
        out+=$c ;;
    esac
  done
  printf '%s' "$out"
}

lscpu_field() { LC_ALL=C lscpu 2>/dev/null | sed -n "s/^$1:[[:space:]]*//p" | head -1; }

cpu_frequency() {
  local mhz
  mhz=$(lscpu_field 'CPU max MHz')
  [[ -n "$mhz" ]] || mhz=$(sed -n 's/^cpu MHz[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -1)
  [[ -n "$mhz" ]] && printf '%.0f MHz' "$mhz"
}

cpu_caches() {
  local parts=() name value
  for name in L1d L1i L2 L3; do
    value=$(lscpu_field "$name cache")
    [[ -n "$value" ]] && parts+=("$name: $value")
  done
  local IFS=';'; echo "${parts[*]}"
}

memory_capacity() { awk '/^MemTotal:/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo; }

# "count<TAB>model<TAB>memory" of the GPUs nvidia-smi lists; nothing without it.
gpus() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null |
    awk -F', ' 'NF { n++; name = $1; mem = $2 } END { if (n) printf "%d\t%s\t%s\n", n, name, mem }'
}

operating_system() {
  local name=""
  [[ -r /etc/os-release ]] && name=$(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release)
  echo "$name (Linux $(uname -r))"
}

kiln_version() { sed -n 's/^project(kiln VERSION \([0-9.]*\).*/\1/p' "$1/CMakeLists.txt"; }

software_stack() {
  local dnnl
  dnnl=$(dpkg-query -W -f='${Package} ${Version}\n' 'libdnnl*' 2>/dev/null | head -1)
  echo "oneDNN: ${dnnl:-unknown}; $(c++ --version 2>/dev/null | head -1)"
}

# system_json NAME SUBMITTER DIVISION STATUS  (run from the repository root's scripts/)
system_json() {
  local root gpu count=0 model="N/A" memory="N/A"
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  gpu=$(gpus)
  [[ -n "$gpu" ]] && IFS=$'\t' read -r count model memory <<< "$gpu"
  local fields=(
    submitter "$2"
    division "$3"
    status "$4"
    system_name "$1"
    number_of_nodes 1
    host_processors_per_node "$(lscpu_field 'Socket(s)')"
    host_processor_model_name "$(lscpu_field 'Model name')"
    host_processor_core_count "$(lscpu_field 'Core(s) per socket')"
    host_processor_vcpu_count "$(nproc --all)"
    host_processor_frequency "$(cpu_frequency)"
    host_processor_caches "$(cpu_caches)"
    host_processor_interconnect ""
    host_memory_capacity "$(memory_capacity)"
    host_storage_type ""
    host_storage_capacity ""
    host_networking ""
    host_networking_topology ""
    host_memory_configuration ""
    accelerators_per_node "$count"
    accelerator_model_name "$model"
    accelerator_host_interconnect "$([[ $count -gt 0 ]] && echo "" || echo N/A)"
    accelerator_frequency "$([[ $count -gt 0 ]] && echo "" || echo N/A)"
    accelerator_on-chip_memories "$([[ $count -gt 0 ]] && echo "" || echo N/A)"
    accelerator_memory_configuration "$([[ $count -gt 0 ]] && echo "" || echo N/A)"
    accelerator_memory_capacity "$memory"
    accelerator_interconnect "$([[ $count -gt 0 ]] && echo "" || echo N/A)"
    accelerator_interconnect_topology "$([[ $count -gt 0 ]] && echo "" || echo N/A)"
    cooling ""
    hw_notes "detected by scripts/package_submission.sh"
    framework "kiln $(kiln_version "$root")"
    other_software_stack "$(software_stack)"
    operating_system "$(operating_system)"
    sw_notes "training on the CPU over oneDNN"
  )
  local i sep=""
  echo "{"
  for ((i = 0; i < ${#fields[@]}; i += 2)); do
    printf '%s  "%s": "%s"' "$sep" "${fields[i]}" "$(json_escape "${fields[i + 1]}")"
    sep=$',\n'
  done
  printf '\n}\n'
}

# The fields of a system json that were left "".
unknown_system_fields() { sed -n 's/^  "\([^"]*\)": "",\{0,1\}$/\1/p' "$1"; }

# code_reference REPO: which kiln made the results.
code_reference() {
  local commit dirty=""
  commit=$(git -C "$1" rev-parse HEAD 2>/dev/null || echo unknown)
  [[ -n "$(git -C "$1" status --porcelain 2>/dev/null)" ]] && dirty=" (with uncommitted changes)"
  cat <<TEXT
# kiln implementation

Results made with kiln $(kiln_version "$1"), git commit $commit$dirty
($(git -C "$1" remote get-url origin 2>/dev/null || echo "no remote")).
Run with scripts/run_and_time_bert.sh or scripts/run_and_time_resnet.sh.
TEXT
}
