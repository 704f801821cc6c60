#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl) from their Go modules and kwok/kwokctl, into a cache
# outside the repository. Only missing binaries are built. Prints the bin dir.
#
#   test/tools/build.sh            build what is missing, print the directory
#   test/tools/build.sh --print    print the directory only
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The newest supported Kubernetes: keep in step with go.mod in this directory
# and with k8s.io/client-go in the main module. KUSTODIAN_KUBE_VERSION names
# another one, whose API server, controller manager, scheduler and kubectl
# come from the module test/tools/k8s-1.<minor> (etcd and kwok from this
# one): the oldest supported minor's.
NEWEST=v1.37.1
K8S_VERSION=${KUSTODIAN_KUBE_VERSION:-$NEWEST}
KWOK_VERSION=$(awk '$1 == "sigs.k8s.io/kwok" { print $2 }' "$here/go.mod")
cache=${KUSTODIAN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kustodian}
bin=$cache/k8s-$K8S_VERSION/bin
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
k8smod=$here
if [[ $K8S_VERSION != "$NEWEST" ]]; then
  k8smod=$here/k8s-1.$minor
  if ! grep -qE "^(require)?\s*k8s.io/kubernetes $K8S_VERSION( |$)" "$k8smod/go.mod" 2>/dev/null; then
    echo "build.sh: KUSTODIAN_KUBE_VERSION=$K8S_VERSION: test/tools/k8s-1.$minor/go.mod does not require k8s.io/kubernetes $K8S_VERSION; the versions there are the ones tested" >&2
    exit 1
  fi
fi

if [[ ${1:-} == --print ]]; then
  echo "$bin"
  exit 0
fi

fail() { echo "build.sh: $*" >&2; exit 1; }
command -v go >/dev/null || fail "go is not on PATH; install Go 1.26 or newer"
mkdir -p "$bin"
# One build at a time (two test packages may ask at once).
exec 9>"$bin/.lock"
flock 9
rm -rf "$bin"/.build.*   # left by an interrupted run
# Binaries are built here and moved into place whole, so an interrupted build
# never leaves a half-written binary that looks ready.
tmp=$(mktemp -d "$bin/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Every binary is built in this directory's module, kwok's too, so that
# kwok compiles against the same k8s.io modules as the API server and shares
# their compiled packages.
declare -A pkgs=(
  [etcd]=go.etcd.io/etcd/server/v3
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
  [kwok]=sigs.k8s.io/kwok/cmd/kwok
  [kwokctl]=sigs.k8s.io/kwok/cmd/kwokctl
)
missing=()
for name in kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl; do
  [[ -x $bin/$name ]] || missing+=("$name")
done

k8sflags="-s -w"
# Without these the server reports v0.0.0-master and kubectl cannot parse it.
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8sflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  k8sflags+=" -X $pkg.gitTreeState=clean"
done
for name in "${missing[@]}"; do
  version=$K8S_VERSION ldflags=$k8sflags mod=$k8smod
  if [[ $name == kwok* ]]; then
    version=$KWOK_VERSION ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
  fi
  if [[ $name == kwok* || $name == etcd ]]; then
    mod=$here
  fi
  echo "build.sh: building $name $version (first time only, takes minutes)" >&2
  # Built one by one so a failure names the binary; the build cache makes the
  # later ones cheap.
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/$name" "${pkgs[$name]}") \
    || fail "building $name (${pkgs[$name]}) failed; see the go output above"
  mv "$tmp/$name" "$bin/$name"
done

echo "$bin"
