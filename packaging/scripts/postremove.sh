#!/bin/sh
# Kustodian's postrm (deb: "remove", "purge", "upgrade", ...) and %postun
# (rpm: the number of versions left). After removal, reload the units; a
# purge also deletes what the package did not ship: the node's kubeconfig
# and the agent's state (dpkg deletes config.yaml itself).
set -e

case "$1" in
purge)
	rm -f /etc/kustodian/kubeconfig
	rmdir /etc/kustodian 2>/dev/null || true
	rm -rf /var/lib/kustodian /run/kustodian
	;;
esac

case "$1" in
remove | purge | 0)
	# A later install enables kustodian-renew.timer again.
	rm -f /var/lib/kustodian/.renew-timer-enabled
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload || echo "kustodian: systemctl daemon-reload failed" >&2
	fi
	;;
esac
exit 0
