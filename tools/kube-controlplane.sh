#!/usr/bin/env bash
# Builds the control plane the kube tests run against (etcd, kube-apiserver,
# kwok) from the Go module proxy, in scratch modules outside the repository,
# into a cache folder keyed by their versions, and prints that folder. A
# folder already complete is reused as it is (its file "ok" is written last).
#
#   tools/kube-controlplane.sh            build when missing; print the folder
#   tools/kube-controlplane.sh --dir      print the folder only
#
# The kube tests find it through P2PFAULT_KUBE_BIN, or at the same path, and
# skip saying so when it is absent. Cold: ~10 min of CPU (7m40 user, 1m56
# sys measured), ~190 MB of binaries; warm: nothing to do.
set -euo pipefail

k8s_version=v1.34.4       # kube-apiserver; client-go in go.mod is v0.34.x to match
staging_version=v0.34.4   # each k8s.io/X staging module of that release
etcd_version=v3.6.6       # apiserver 1.34's watch progress requests need etcd 3.6
kwok_version=v0.7.0

dir=${XDG_CACHE_HOME:-$HOME/.cache}/p2pfault/kube-$k8s_version-etcd$etcd_version-kwok$kwok_version
if [ "${1:-}" = --dir ]; then echo "$dir"; exit 0; fi
if [ -f "$dir/ok" ]; then echo "$dir"; exit 0; fi

mkdir -p "$dir"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

# etcd: its go.mod's replaces (its sibling modules) hold only in its own
# repository, so it is built as a dependency of a scratch module.
mkdir "$scratch/etcd" && cd "$scratch/etcd"
go mod init scratch/etcd >/dev/null 2>&1
go get "go.etcd.io/etcd/server/v3@$etcd_version" >/dev/null 2>&1
go build -trimpath -ldflags=-s -o "$dir/etcd" go.etcd.io/etcd/server/v3

# kube-apiserver: k8s.io/kubernetes requires its staging modules at v0.0.0
# and replaces them with ./staging; outside its repository each is replaced
# with the published module of the same release. gitVersion makes /version
# parse (client-go and kwok read it).
mkdir "$scratch/apiserver" && cd "$scratch/apiserver"
go mod init scratch/apiserver >/dev/null 2>&1
modfile=$(go mod download -json "k8s.io/kubernetes@$k8s_version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
for m in $(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$modfile"); do
  go mod edit -replace "$m=$m@$staging_version"
done
go mod edit -require "k8s.io/kubernetes@$k8s_version"
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
go mod tidy >/dev/null 2>&1
go build -trimpath -o "$dir/kube-apiserver" \
  -ldflags "-s -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34" \
  k8s.io/kubernetes/cmd/kube-apiserver

# kwok: a plain module; its stage rules (pods go Running, nodes Ready) are
# YAML files in it, copied beside the binary.
GOBIN="$dir" go install -trimpath -ldflags=-s "sigs.k8s.io/kwok/cmd/kwok@$kwok_version"
kwokdir=$(go mod download -json "sigs.k8s.io/kwok@$kwok_version" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
rm -rf "$dir/stage" && cp -r "$kwokdir/kustomize/stage" "$dir/stage"
chmod -R u+w "$dir"
date -u +%FT%TZ > "$dir/ok"
echo "$dir"
