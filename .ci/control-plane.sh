#!/usr/bin/env bash
# CI: build the test control plane (testcluster/build.sh) tier by tier within a
# time budget, so a cold machine (empty Go caches) still finishes .ci/run in time. Tier 1
# (Kubernetes, etcd, kwok, mpi-operator, and kustomize for the unit tests) is always built;
# tier 2 (JobSet, Trainer), the node tier (kubelet, containerd, runc, CNI, CoreDNS,
# dra-example-driver: the real node) and tier 3 (Kueue) only if CI's elapsed time allows
# when their turn comes (or they are cached).
#
# The rule (README "CI"; tests/cluster/conftest.py `unavailable` applies it to the tests):
# - a tier skipped by the time budget is named, with the reason, in $1 (one line
#   "tierN: not built (time budget): ...") and in this log; its cluster tests then skip
#   with that reason under CI=true, never silently;
# - a tier whose build FAILS is not a skip: it is never written to $1, the last lines of
#   its build log (build/control-plane-tierN.log beside $1) end this log, and this script
#   exits 1, which fails .ci/run. Tier 1 failing stops here; a failing tier 2 still lets
#   tier 3 build, so one run reports every broken tier.
#   .ci/control-plane.sh SKIPPED_FILE CI_START_EPOCH
set -uo pipefail
cd "$(dirname "$0")/.."
skipped="$1"; t0="$2"
: > "$skipped"
logs="$(cd "$(dirname "$skipped")" && pwd)"
# CI seconds elapsed at which each tier must start at the latest, and the tool whose
# cached binaries say the tier is built (the last one build.sh makes for it)
declare -A budget=([tier2]=$((40 * 60)) [node]=$((45 * 60)) [tier3]=$((50 * 60)))
declare -A probe=([tier2]=trainer [node]=dra-example-driver [tier3]=kueue)
tail_lines=30
elapsed() { echo $(( $(date +%s) - t0 )); }
failed=()
build() {  # build TIER: its output goes to this log and to $logs/control-plane-TIER.log
  local s=$SECONDS log="$logs/control-plane-$1.log"
  if bash testcluster/build.sh "$1" 2>&1 | tee "$log"; then
    echo "control plane $1: ready ($((SECONDS - s)) s)"
  else
    echo "control plane $1: build FAILED after $((SECONDS - s)) s (log: $log)"
    failed+=("$1")
    return 1
  fi
}
finish() {  # the verdict, last in this log (.ci/run prints the log's tail when it fails)
  [ "${#failed[@]}" -eq 0 ] && exit 0
  for tier in "${failed[@]}"; do
    echo "=== control plane $tier: build failed; the last $tail_lines lines of $logs/control-plane-$tier.log:"
    tail -n "$tail_lines" "$logs/control-plane-$tier.log" | sed 's/^/  | /'
  done
  echo "control plane: build failed for ${failed[*]} (a failed build fails CI; only a time-budget skip skips)"
  exit 1
}
build tier1 || finish
for tier in tier2 node tier3; do
  limit=${budget[$tier]}
  if bash testcluster/build.sh --dir "${probe[$tier]}" >/dev/null \
     || [ "$(elapsed)" -lt "$limit" ]; then
    build "$tier" || true
  else
    echo "$tier: not built (time budget): CI had run $(elapsed) s when its turn came (budget: start by ${limit} s, so that a cold .ci/run stays under 80 min)" | tee -a "$skipped"
  fi
done
finish
