#!/bin/bash
# A maintenance script for demos and tests: it follows the Kustodian file
# protocol, "works" for a random time, and fails now and then. On failure it
# keeps the request, so the node stays cordoned, the lock stays held and the
# rollout stops until an operator acts.
#
#   REQUEST=/var/maintenance-required IN_PROGRESS=/var/maintenance-in-progress \
#   WORK_MS=2000 FAIL_PERCENT=10 REASON="demo patch" flaky-maintenance.sh
set -euo pipefail
request=${REQUEST:-/var/maintenance-required}
in_progress=${IN_PROGRESS:-/var/maintenance-in-progress}
work_ms=${WORK_MS:-2000}
fail_percent=${FAIL_PERCENT:-10}

until [ ! -e "$request" ] && [ ! -e "$in_progress" ]; do
  echo "another maintenance is in progress on this host; waiting"
  sleep 1
done
echo "${REASON:-flaky-maintenance.sh}" > "$request"
until [ -e "$in_progress" ]; do
  sleep 0.2
done
echo "node drained; working for up to ${work_ms} ms"
sleep "$(awk -v ms="$work_ms" -v r="$RANDOM" 'BEGIN { printf "%.3f", ms * (r % 1000) / 1000 / 1000 }')"
if (( RANDOM % 100 < fail_percent )); then
  echo "maintenance FAILED: keeping $request; the node stays cordoned" >&2
  exit 1
fi
rm -f "$request"
echo "maintenance done"
