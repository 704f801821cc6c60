#!/bin/bash
# make repo: a signed APT repository (reprepro) and a signed RPM repository
# (createrepo_c, rpmsign) made from the packages in dist/, for an operator
# to serve or mirror. Usage: packaging/make-repo.sh [DIST [OUT]]
#
#   REPO_KEY        the signing key (fingerprint or ID) in the operator's
#                   GnuPG keyring ($GNUPGHOME); it must sign without a
#                   passphrase prompt (gpg-agent, or a key without one).
#                   Unset: a throwaway key kept in REPO_GNUPGHOME, for tests
#                   and trials only.
#   REPO_GNUPGHOME  where the throwaway key lives (build/repo-gnupg).
#   REPO_CODENAME   the APT distribution (stable).
#
# OUT (dist/repo) is made anew from DIST's packages each time:
#   OUT/kustodian.gpg  the public key, binary (apt: signed-by=)
#   OUT/kustodian.asc  the public key, armored (dnf: gpgkey=, rpm --import)
#   OUT/apt/           dists/$REPO_CODENAME/{InRelease,Release,Release.gpg}, pool/
#   OUT/rpm/           the signed .rpm files, repodata/ and repodata/repomd.xml.asc
set -euo pipefail

dist=${1:-dist}
out=${2:-$dist/repo}
codename=${REPO_CODENAME:-stable}

die() { echo "make repo: $*" >&2; exit 1; }

for tool in reprepro createrepo_c rpmsign gpg; do
	command -v "$tool" >/dev/null || die "$tool is not installed (Debian: apt-get install reprepro createrepo-c rpm gnupg; make deps does)"
done
shopt -s nullglob
debs=("$dist"/*.deb)
rpms=("$dist"/*.rpm)
[ ${#debs[@]} -gt 0 ] || [ ${#rpms[@]} -gt 0 ] || die "no .deb or .rpm in $dist/: run make packages first"

if [ -n "${REPO_KEY:-}" ]; then
	key=$REPO_KEY
	gpg --batch --list-secret-keys "$key" >/dev/null 2>&1 ||
		die "REPO_KEY=$key: no such secret key in ${GNUPGHOME:-~/.gnupg} (gpg --list-secret-keys shows the keys)"
else
	export GNUPGHOME=${REPO_GNUPGHOME:-build/repo-gnupg}
	mkdir -p "$GNUPGHOME" && chmod 700 "$GNUPGHOME"
	if ! gpg --batch --list-secret-keys 'Kustodian throwaway repository key' >/dev/null 2>&1; then
		echo "make repo: making a throwaway signing key in $GNUPGHOME (for tests and trials; set REPO_KEY for a real repository)"
		gpg --batch --quiet --passphrase '' --quick-gen-key 'Kustodian throwaway repository key' ed25519 sign never
	fi
	key=$(gpg --batch --with-colons --list-secret-keys 'Kustodian throwaway repository key' | awk -F: '$1 == "fpr" { print $10; exit }')
	echo "make repo: signing with the THROWAWAY key $key"
fi

rm -rf "$out"
mkdir -p "$out"
gpg --batch --yes --export "$key" > "$out/kustodian.gpg"
gpg --batch --yes --armor --export "$key" > "$out/kustodian.asc"
[ -s "$out/kustodian.gpg" ] || die "could not export the public key of $key"

if [ ${#debs[@]} -gt 0 ]; then
	# reprepro's configuration and database stay out of what is served.
	state=$(mktemp -d)
	trap 'rm -rf "$state"' EXIT
	mkdir -p "$state/conf"
	cat > "$state/conf/distributions" <<CONF
Origin: Kustodian
Label: Kustodian
Codename: $codename
Architectures: amd64 arm64
Components: main
Description: Kustodian: safe in-place maintenance of Kubernetes nodes
SignWith: $key
CONF
	reprepro --silent --basedir "$state" --outdir "$(realpath "$out")/apt" includedeb "$codename" "${debs[@]}"
	echo "make repo: $out/apt: ${#debs[@]} .deb, signed ($codename)"
fi

if [ ${#rpms[@]} -gt 0 ]; then
	mkdir -p "$out/rpm"
	cp "${rpms[@]}" "$out/rpm/"
	rpmsign --define "__gpg $(command -v gpg)" --define "_gpg_name $key" --define "_gpg_path ${GNUPGHOME:-$HOME/.gnupg}" --addsign "$out"/rpm/*.rpm >/dev/null
	createrepo_c --quiet "$out/rpm"
	gpg --batch --yes --local-user "$key" --armor --detach-sign "$out/rpm/repodata/repomd.xml"
	echo "make repo: $out/rpm: ${#rpms[@]} .rpm, signed, repodata signed"
fi
echo "make repo: public key $out/kustodian.gpg (fingerprint $key)"
