/* libFuzzer target for the zone-file reader: a zone file is text an
 * operator (or a provisioning system) writes. Properties: nothing crashes;
 * a refusal names a known reason and the line; a zone taken has its SOA,
 * which the responder then serves with AA. */
#include <stdlib.h>
#include <string.h>

#include "offpath/dns.h"
#include "offpath/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct op_dns_zones *z = NULL;
    struct op_dns_load_err err;
    op_status_t st = op_dns_zones_parse((const char *)data, size, "fuzz.test.", &z, &err);
    if (st != OP_OK) {
        require(z == NULL && err.reason > 0 && err.reason < OP_DNS_Z_COUNT_);
        require(strncmp(err.msg, "<text>", 6) == 0);
        return 0;
    }
    require(op_dns_zones_count(z) == 1 && op_dns_zones_records(z) >= 1);
    static const uint8_t q[] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 4, 'f', 'u', 'z', 'z',
                                4, 't', 'e', 's', 't', 0, 0, 6, 0, 1};
    uint8_t out[OP_DNS_UDP_MIN];
    uint64_t c[OP_DNS_C_COUNT_] = {0};
    struct op_dns_query_info qi = {.tcp = false, .udp_max = OP_DNS_UDP_MIN};
    size_t n = op_dns_respond(z, &qi, q, sizeof(q), out, sizeof(out), c);
    struct op_dns_hdr h;
    require(n > 0 && op_dns_hdr_decode(out, n, &h) == OP_OK);
    require((h.flags & 0x040f) == 0x0400); /* AA, NOERROR */
    require(h.ancount == 1 || (h.flags & 0x0200)); /* the SOA, or it did not fit */
    op_dns_zones_free(z);
    return 0;
}
