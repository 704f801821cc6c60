#!/bin/sh
# Kustodian's postinst (deb: "configure" [version upgraded from]) and %post
# (rpm: the number of installed versions), as debhelper would write them.
# First install: enable and start kustodian.path (and, once, the token's
# renewal timer). Upgrade: reload the units
# only; a running agent (a maintenance in progress) is never restarted.
set -e

case "$1" in
configure) first=$([ -z "$2" ] && echo yes || echo no) ;; # deb
1) first=yes ;;                                            # rpm: installed
[0-9]*) first=no ;;                                        # rpm: upgraded
*) exit 0 ;;                                               # deb: abort-*
esac

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || echo "kustodian: systemctl daemon-reload failed" >&2
fi

# The token's renewal between the agent's runs: enabled once, at the first
# install of a version that has it (an admin may disable it after that).
renew_marker=/var/lib/kustodian/.renew-timer-enabled
if [ ! -e "$renew_marker" ] && command -v systemctl >/dev/null 2>&1; then
	if systemctl enable kustodian-renew.timer; then
		mkdir -p /var/lib/kustodian && chmod 0700 /var/lib/kustodian && : >"$renew_marker"
		if [ -d /run/systemd/system ]; then
			systemctl start kustodian-renew.timer || echo "kustodian: could not start kustodian-renew.timer" >&2
		fi
	else
		echo "kustodian: could not enable kustodian-renew.timer" >&2
	fi
fi

if [ "$first" = yes ] && command -v systemctl >/dev/null 2>&1; then
	# enable works without a running systemd (it only makes the links).
	systemctl enable kustodian.path || echo "kustodian: could not enable kustodian.path" >&2
	if [ -d /run/systemd/system ]; then
		systemctl start kustodian.path || echo "kustodian: could not start kustodian.path" >&2
	fi
	if [ ! -e /etc/kustodian/kubeconfig ]; then
		echo "kustodian: this node has no kubeconfig yet. From an admin's machine (not this node: it needs admin credentials), mint it with kustodian-ctl kubeconfig NODE --output-file NODE.kubeconfig, then copy it here as /etc/kustodian/kubeconfig, mode 0600 (see /usr/share/doc/kustodian/docs/security.md)"
	fi
fi
exit 0
