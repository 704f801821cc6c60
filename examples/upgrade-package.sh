#!/bin/sh
# Upgrade one package from a local .deb, offline, and ask for a reboot.
# Meant to run as a Kustodian managed job, which drains the node first,
# reboots it when /run/reboot-required appears, and runs the job again:
#
#   kustodian run --id upgrade-foo -- /path/upgrade-package.sh /path/foo_2.0_all.deb
#
# or across a fleet with ansible/rollout.yml (rollout_files: the .deb). It is
# idempotent: after the reboot it finds the version installed and exits 0.
set -eu

deb=${1:?usage: upgrade-package.sh PACKAGE.deb}
pkg=$(dpkg-deb --field "$deb" Package)
want=$(dpkg-deb --field "$deb" Version)
have=$(dpkg-query --show --showformat '${Version}' "$pkg" 2>/dev/null || true)

if [ "$have" = "$want" ]; then
	echo "$pkg $want is installed; nothing to do"
	exit 0
fi
echo "upgrading $pkg from ${have:-nothing} to $want"
DEBIAN_FRONTEND=noninteractive dpkg --install "$deb"
# Debian's convention: the reboot sentinel lives in /run, so it is gone
# after the reboot.
echo "$pkg" >> /run/reboot-required.pkgs
touch /run/reboot-required
echo "reboot required"
