#!/usr/bin/env bash
# scripts/package_submission.sh — gathers MLPerf result logs into the training submission layout
#   OUT/results/SYSTEM/BENCHMARK/result_<i>.txt     the logs, numbered from 0
#   OUT/systems/SYSTEM.json                          this machine as detected here
#   OUT/benchmarks/BENCHMARK/implementations/kiln/CODE.md   the code reference (git commit)
# then runs the official package checker (seed, RCP and system checks included) where the
# mlperf_logging package is importable, and lists what a real submission still needs.
set -uo pipefail

usage() {
  cat <<'TEXT'
usage: scripts/package_submission.sh --out DIR --benchmark bert|resnet [options] LOG...
options:
  --system NAME       system name, the folder and json name (default: kiln-cpu-<hostname>)
  --submitter ORG     (default: kiln)
  --division D        closed | open (default: closed)
  --status S          "Available on-premise" (default), "Available cloud", "Preview",
                      "Research, Development, or Internal (RDI)"
  --ruleset R         MLPerf training ruleset for the checkers (default: 5.0.0)
environment: KILN_MLPERF_LOGGING  folder holding the mlperf_logging package (a checkout of
             mlcommons/logging), when it is not installed; PYTHON  its interpreter (python3)
Exit status: 0 when packaged (the checkers' verdict is printed, not the exit status), 2 on bad
usage or a missing log.
TEXT
}

die() { echo "package_submission: $*" >&2; exit 2; }

out="" benchmark="" system="kiln-cpu-$(hostname -s 2>/dev/null || echo host)" submitter=kiln
division=closed status="Available on-premise" ruleset=5.0.0 logs=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --out|--benchmark|--system|--submitter|--division|--status|--ruleset)
      [[ $# -ge 2 ]] || die "$1 needs a value (--help)"
      case "$1" in
        --out) out=$2 ;;
        --benchmark) benchmark=$2 ;;
        --system) system=$2 ;;
        --submitter) submitter=$2 ;;
        --division) division=$2 ;;
        --status) status=$2 ;;
        --ruleset) ruleset=$2 ;;
      esac
      shift 2 ;;
    --*) die "unknown option $1 (--help)" ;;
    *) logs+=("$1"); shift ;;
  esac
done
[[ -n "$out" ]] || die "--out DIR is required (--help)"
# The system name is a folder and a file name in the layout.
[[ "$system" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "--system '$system': letters, digits, '.', '_', '-' only"
case "$benchmark" in bert) required=10 ;; resnet) required=5 ;; *) die "--benchmark must be bert or resnet" ;; esac
case "$division" in closed|open) ;; *) die "--division must be closed or open" ;; esac
[[ ${#logs[@]} -gt 0 ]] || die "no result logs given (--help)"
for log in "${logs[@]}"; do [[ -f "$log" ]] || die "result log $log: not found"; done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/package_system.sh
source "$here/scripts/package_system.sh"

results="$out/results/$system/$benchmark"
mkdir -p "$results" "$out/systems" "$out/benchmarks/$benchmark/implementations/kiln"
i=0
for log in "${logs[@]}"; do
  cp "$log" "$results/result_$i.txt"
  i=$((i + 1))
done
system_json "$system" "$submitter" "$division" "$status" > "$out/systems/$system.json"
code_reference "$here" > "$out/benchmarks/$benchmark/implementations/kiln/CODE.md"
echo "packaged ${#logs[@]} $benchmark result(s) of system $system in $out"

missing=()
[[ ${#logs[@]} -ge $required ]] || missing+=("$benchmark needs $required result logs; ${#logs[@]} given")
for log in "${logs[@]}"; do
  grep -q '"key": "run_stop".*"status": "success"' "$log" || missing+=("$log did not reach the target (no run_stop success)")
done
for field in $(unknown_system_fields "$out/systems/$system.json"); do
  missing+=("systems/$system.json: $field is not detected; fill it in")
done
missing+=("benchmarks/$benchmark/implementations/kiln holds only the code reference; a submission includes the code")

# The official checkers: the package checker (results, seeds, RCPs, systems) needs numpy and
# scipy; without them the system and compliance checkers still run, one by one.
export PYTHONPATH="${KILN_MLPERF_LOGGING:-}${PYTHONPATH:+:$PYTHONPATH}"
python=${PYTHON:-python3}
checker() { (cd "$out" && "$python" -m "mlperf_logging.$1" "${@:2}" 2>&1); }
if ! "$python" -c 'import mlperf_logging.compliance_checker' 2>/dev/null; then
  missing+=("the official checkers did not run: mlperf_logging is not installed (set KILN_MLPERF_LOGGING)")
elif why=$("$python" -c 'import mlperf_logging.package_checker.package_checker' 2>&1); then
  report=$(checker package_checker . training "$ruleset" --log_output package_checker.log)
  echo "$report" | grep -E '^(ERROR|WARNING)' | sed 's/^/  package checker: /'
  if [[ "$report" == *"FOUND NO ERRORS"* ]]; then echo "package checker: no errors"
  else echo "package checker: errors (see $out/package_checker.log)"; missing+=("the package checker's errors above"); fi
else
  missing+=("the package checker (seeds, RCPs) did not run: ${why##*$'\n'}")
  system_report=$(checker system_desc_checker "systems/$system.json" training "$ruleset" --log_output /dev/null)
  if [[ "$system_report" == *"checker passed"* ]]; then echo "system description checker: passed"
  else echo "system description checker: failed"; missing+=("a system description the checker accepts"); fi
  for ((i = 0; i < ${#logs[@]}; ++i)); do
    if checker compliance_checker --ruleset "$ruleset" "results/$system/$benchmark/result_$i.txt" \
        --log_output /dev/null > /dev/null; then echo "compliance checker: result_$i.txt passed"
    else echo "compliance checker: result_$i.txt failed"; missing+=("result_$i.txt ($(basename "${logs[i]}")) compliant"); fi
  done
fi

echo "missing for a real submission:"
for m in "${missing[@]}"; do echo "  - $m"; done
