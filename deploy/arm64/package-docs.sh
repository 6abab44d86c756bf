#!/bin/sh
# Writes the documentation the .deb ships in /usr/share/doc/edge-agent/ to
# OUTDIR (deploy/arm64/README.md as README.md, docs/SECURITY.md), with the
# links that point outside the package's doc directory rewritten to the
# copies the package ships beside them (nfpm.yaml): SECURITY.md,
# prometheus/, grafana/, and to the project's repository for the design
# notes and the protocol versions, which the package does not ship.
# Usage (from the repository root): deploy/arm64/package-docs.sh OUTDIR
set -eu
out=$1
repo=https://github.com/edge-agent/edge-agent/blob/main
mkdir -p "$out"
sed -e "s#](\.\./\.\./docs/SECURITY\.md#](SECURITY.md#g" \
	-e "s#](\.\./\.\./docs/DESIGN-NOTES\.md#]($repo/docs/DESIGN-NOTES.md#g" \
	-e "s#](\.\./\.\./docs/PROTOCOL\.md#]($repo/docs/PROTOCOL.md#g" \
	-e "s#](\.\./prometheus/#](prometheus/#g" \
	-e "s#](\.\./grafana/#](grafana/#g" \
	deploy/arm64/README.md >"$out/README.md"
sed -e "s#](\.\./deploy/arm64/README\.md#](README.md#g" \
	docs/SECURITY.md >"$out/SECURITY.md"
