/* libFuzzer target for the DNS message decoders (offpath/wire.h): a
 * datagram from anyone reaches them. Properties: nothing crashes; each
 * name decoded is well formed (labels of 1..63 octets, the root last, at
 * most 255 octets) whatever pointers led to it; each record's RDATA lies
 * inside the message; every refusal is one of the listed reasons. */
#include <stdlib.h>

#include "offpath/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond)
        abort();
}

static void check_name(const uint8_t *name, size_t len)
{
    size_t i = 0;
    require(len >= 1 && len <= OP_DNS_NAME_MAX);
    while (name[i] != 0) {
        require(name[i] <= OP_DNS_LABEL_MAX);
        i += 1 + (size_t)name[i];
        require(i < len);
    }
    require(i + 1 == len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct op_dns_hdr h;
    if (op_dns_hdr_decode(data, size, &h) != OP_OK) {
        require(size < OP_DNS_HDR_LEN);
        return 0;
    }
    size_t off = OP_DNS_HDR_LEN;
    unsigned total = (unsigned)h.qdcount + h.ancount + h.nscount + h.arcount;
    for (unsigned i = 0; i < total; i++) {
        struct op_dns_rr rr;
        size_t before = off;
        int e = i < h.qdcount ? op_dns_question_decode(data, size, &off, &rr)
                              : op_dns_rr_decode(data, size, &off, &rr);
        if (e != OP_DNS_W_OK) {
            require(e > OP_DNS_W_OK && e < OP_DNS_W_ERRS_);
            break;
        }
        require(off > before && off <= size);
        check_name(rr.name, rr.name_len);
        require(rr.rdata_off + rr.rdlen == off);
    }
    return 0;
}
