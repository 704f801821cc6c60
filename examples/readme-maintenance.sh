#!/bin/bash
# A maintenance script that follows Kustodian's file protocol and fails
# safe: a step that fails stops the script with the request in place, so
# the node stays cordoned, the lock stays held and the rollout stops until
# an operator looks (kustodian-ctl status NODE). Only a maintenance that
# succeeded removes the request and hands the node back.
#
# Usage: readme-maintenance.sh COMMAND [ARGS...]
#   COMMAND is the maintenance itself (and its check of the host's health),
#   run once Kustodian has cordoned and drained the node, for example:
#   readme-maintenance.sh sh -c 'apt-get update && apt-get -y upgrade'
set -euo pipefail

request=/var/maintenance-required
in_progress=/var/maintenance-in-progress
reboot_sentinel=/var/run/reboot-required

if [ $# -eq 0 ]; then
  echo "usage: $0 COMMAND [ARGS...]: the maintenance to run once the node is drained" >&2
  exit 2
fi

# A reboot is pending: begin after it, when this script runs again.
while [ -e "$reboot_sentinel" ]; do
  echo "reboot pending ($reboot_sentinel exists); waiting"
  sleep 30
done

# Another script on this host already follows the protocol: wait for it.
until [ ! -e "$request" ] && [ ! -e "$in_progress" ]; do
  echo "a maintenance is already requested or in progress; waiting"
  sleep 5
done

# Ask for maintenance, and wait until the node is cordoned and drained and
# holds the lock.
touch "$request"
until [ -e "$in_progress" ]; do
  echo "waiting in the maintenance queue"
  sleep 5
done

# The maintenance. With set -e a failure ends the script here, the request
# kept.
"$@"

# Done, successfully: the node goes back to the cluster.
rm -f "$request"
