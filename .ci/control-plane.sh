#!/usr/bin/env bash
# CI: build the test control plane (scripts/control-plane/build.sh) tier by tier within a
# time budget, so a cold machine (empty Go caches) still finishes .ci/run in time. Tier 1
# (Kubernetes, etcd, kwok, mpi-operator) is always built; tier 2 (JobSet, Trainer) and
# tier 3 (Kueue) only if CI's elapsed time allows when their turn comes. A skipped tier is
# named, with the reason, in $1 (one line per tier) and in this log; the cluster tests of
# that tier then skip with that reason (tests/cluster/conftest.py), never silently.
#   .ci/control-plane.sh SKIPPED_FILE CI_START_EPOCH
set -uo pipefail
cd "$(dirname "$0")/.."
skipped="$1"; t0="$2"
: > "$skipped"
budget_tier2=$((40 * 60)); budget_tier3=$((45 * 60))  # CI seconds elapsed, at the latest
elapsed() { echo $(( $(date +%s) - t0 )); }
build() {
  local s=$SECONDS
  if bash scripts/control-plane/build.sh "$1"; then
    echo "control plane $1: ready ($((SECONDS - s)) s)"
  else
    echo "$1: build failed (see build/control-plane.log)" | tee -a "$skipped"
    return 1
  fi
}
build tier1 || exit 1
for tier in tier2 tier3; do
  limit=$budget_tier2; [ "$tier" = tier3 ] && limit=$budget_tier3
  if bash scripts/control-plane/build.sh --dir "$([ $tier = tier2 ] && echo trainer || echo kueue)" >/dev/null \
     || [ "$(elapsed)" -lt "$limit" ]; then
    build "$tier" || true
  else
    echo "$tier: not built, CI had run $(elapsed) s when its turn came (budget: start by ${limit} s, so that a cold .ci/run stays under 75 min)" | tee -a "$skipped"
  fi
done
exit 0
