#!/usr/bin/env bash
# Signs signed.zone into signed.zone.signed (NSEC) and signed3.zone into
# signed3.zone.signed (NSEC3, RFC 5155: salt 5ca1ab1e, 3 extra iterations,
# no opt-out), ECDSA P-256 with fresh keys, once: the output is committed,
# so tests need no signer. Fixed inception and expiration (2026-11-01 ..
# 2036-12-31) keep them valid for years.
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp signed.zone signed3.zone "$tmp/"
cd "$tmp"
sign() { # zone file, origin, extra ldns-signzone flags
    local ksk zsk
    ksk=$(ldns-keygen -a ECDSAP256SHA256 -k "$2")
    zsk=$(ldns-keygen -a ECDSAP256SHA256 "$2")
    ldns-signzone "${@:3}" -i 20261101000000 -e 20361231000000 -o "$2" "$1" "$ksk" "$zsk"
    cp "$1.signed" "$OLDPWD/$1.signed"
}
[ "${1:-}" = nsec3-only ] || sign signed.zone signed.test
sign signed3.zone signed3.test -n -s 5ca1ab1e -t 3
