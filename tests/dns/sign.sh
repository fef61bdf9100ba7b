#!/usr/bin/env bash
# Signs signed.zone into signed.zone.signed (NSEC) and signed3.zone into
# signed3.zone.signed (NSEC3, RFC 5155: salt 5ca1ab1e, 3 extra iterations,
# no opt-out), ECDSA P-256 with fresh keys, once: the output is committed,
# so tests need no signer. Fixed inception and expiration (2026-11-01 ..
# 2036-12-31) keep them valid for years.
# signed3o.zone becomes signed3o.zone.signed with NSEC3 opt-out, signed by
# knotd itself (ldns-signzone -p sets the flag but still gives unsigned
# delegations their NSEC3s): 3 iterations, a random 4-byte salt, signatures
# valid ten years. `sign.sh opt-out-only` redoes that one alone.
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp signed.zone signed3.zone signed3o.zone "$tmp/"
cd "$tmp"
sign() { # zone file, origin, extra ldns-signzone flags
    local ksk zsk
    ksk=$(ldns-keygen -a ECDSAP256SHA256 -k "$2")
    zsk=$(ldns-keygen -a ECDSAP256SHA256 "$2")
    ldns-signzone "${@:3}" -i 20261101000000 -e 20361231000000 -o "$2" "$1" "$ksk" "$zsk"
    cp "$1.signed" "$OLDPWD/$1.signed"
}
# knotd with an opt-out policy loads the zone, signs it and writes it back.
sign_opt_out() { # zone file, origin
    mkdir -p knot
    cp "$1" "knot/$2.zone"
    cat >knot/knot.conf <<CONF
server:
    rundir: $PWD/knot
database:
    storage: $PWD/knot
policy:
  - id: opt-out
    algorithm: ecdsap256sha256
    nsec3: on
    nsec3-opt-out: on
    nsec3-iterations: 3
    nsec3-salt-length: 4
    rrsig-lifetime: 3650d
    rrsig-refresh: 30d
    cds-cdnskey-publish: none
template:
  - id: default
    storage: $PWD/knot
    zonefile-sync: 0
    journal-content: none
    dnssec-signing: on
    dnssec-policy: opt-out
zone:
  - domain: $2
    file: $PWD/knot/$2.zone
CONF
    knotd -c knot/knot.conf -d
    for _ in $(seq 50); do
        grep -q NSEC3PARAM "knot/$2.zone" && break
        sleep 0.2
    done
    knotc -c knot/knot.conf stop >/dev/null
    grep -q NSEC3PARAM "knot/$2.zone"
    cp "knot/$2.zone" "$OLDPWD/$1.signed"
}
case "${1:-}" in
opt-out-only) sign_opt_out signed3o.zone signed3o.test ;;
*)
    [ "${1:-}" = nsec3-only ] || sign signed.zone signed.test
    sign signed3.zone signed3.test -n -s 5ca1ab1e -t 3
    [ "${1:-}" = nsec3-only ] || sign_opt_out signed3o.zone signed3o.test
    ;;
esac
