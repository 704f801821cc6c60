#!/bin/sh
# Kustodian's prerm (deb: "remove", "upgrade", ...) and %preun (rpm: the
# number of versions left after this one goes). On removal only: stop and
# disable the units. Upgrades leave them, and a running agent, alone.
set -e

case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac

if [ -e /var/maintenance-in-progress ]; then
	echo "kustodian: warning: this node is in maintenance; without the agent it stays cordoned and keeps the lock (kustodian-ctl release NODE frees it)" >&2
fi
if command -v systemctl >/dev/null 2>&1; then
	if [ -d /run/systemd/system ]; then
		systemctl stop kustodian.path kustodian-renew.timer kustodian.service || echo "kustodian: could not stop the units" >&2
	fi
	systemctl disable kustodian.path kustodian-renew.timer || echo "kustodian: could not disable kustodian.path and kustodian-renew.timer" >&2
fi
exit 0
