#!/usr/bin/env bash
# Signs signed.zone into signed.zone.signed (NSEC, ECDSA P-256) with fresh
# keys, once: the output is committed, so tests need no signer. Fixed
# inception and expiration (2026-11-01 .. 2036-12-31) keep it valid for years.
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp signed.zone "$tmp/"
cd "$tmp"
ksk=$(ldns-keygen -a ECDSAP256SHA256 -k signed.test)
zsk=$(ldns-keygen -a ECDSAP256SHA256 signed.test)
ldns-signzone -i 20261101000000 -e 20361231000000 -o signed.test signed.zone "$ksk" "$zsk"
cp signed.zone.signed "$OLDPWD/signed.zone.signed"
