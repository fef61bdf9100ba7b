/* offpath wire: DNS messages (RFC 1035), the bytes only (offpath/wire.h includes every part;
 * docs/wire.md). */
#ifndef OFFPATH_WIRE_DNS_H
#define OFFPATH_WIRE_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

/* ---- DNS messages (RFC 1035 section 4), the bytes only: header, names
 * with compression, questions and resource records. The responder
 * (offpath/dns.h) builds on these. Names come out uncompressed in wire form
 * (length-prefixed labels, root last), case kept. */
#define OP_DNS_HDR_LEN 12
#define OP_DNS_NAME_MAX 255 /* octets of a wire-form name, root included */
#define OP_DNS_LABEL_MAX 63

struct op_dns_hdr {
    uint16_t id, flags, qdcount, ancount, nscount, arcount;
};

/* Why a DNS message was refused; each is a counter of the responder. */
enum op_dns_werr {
    OP_DNS_W_OK,
    OP_DNS_W_TRUNCATED,   /* the message ends inside a field or a name */
    OP_DNS_W_LABEL_TYPE,  /* a label length byte 0x40..0xbf: an oversized label or an unknown type */
    OP_DNS_W_PTR_FORWARD, /* a compression pointer to itself or further on */
    OP_DNS_W_PTR_LOOP,    /* a pointer back into the name being read: it would loop */
    OP_DNS_W_NAME_LONG,   /* more than 255 octets once decompressed */
    OP_DNS_W_RDATA_LEN,   /* RDLENGTH runs past the end of the message */
    OP_DNS_W_ERRS_
};
OP_API const char *op_dns_werr_str(int e);

OP_API op_status_t op_dns_hdr_decode(const uint8_t *msg, size_t len, struct op_dns_hdr *h);
OP_API void op_dns_hdr_encode(const struct op_dns_hdr *h, uint8_t out[OP_DNS_HDR_LEN]);
/* The name at *off of msg: every pointer must point before the place the
 * current run of labels started, so decoding always ends. On OP_DNS_W_OK,
 * name holds name_len octets and *off is past the name in the message. */
OP_API int op_dns_name_decode(const uint8_t *msg, size_t len, size_t *off,
                              uint8_t name[OP_DNS_NAME_MAX], size_t *name_len);

struct op_dns_rr {
    uint8_t name[OP_DNS_NAME_MAX];
    size_t name_len;
    uint16_t type, cls;
    uint32_t ttl;
    uint16_t rdlen;
    size_t rdata_off; /* where the RDATA starts in the message */
};
/* A question (no TTL, no RDATA) or a whole resource record at *off. */
OP_API int op_dns_question_decode(const uint8_t *msg, size_t len, size_t *off,
                                  struct op_dns_rr *q);
OP_API int op_dns_rr_decode(const uint8_t *msg, size_t len, size_t *off, struct op_dns_rr *rr);

#endif
