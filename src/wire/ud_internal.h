/* Internal to src/wire: the RoCEv2 envelope that INC and hostar packets
 * share (docs/wire.md sections 1 and 11). Each is a UD SEND_ONLY (BTH +
 * DETH) to a well-known QP of its own with a Q_Key of its own, then the
 * protocol's header and payload, zero pad to 4 bytes and the ICRC. The rules
 * of the envelope, the pad and the tail are written once, here, so the two
 * codecs cannot drift apart. */
#ifndef OFFPATH_UD_INTERNAL_H
#define OFFPATH_UD_INTERNAL_H

#include "offpath/wire.h"
#include "wire_cursor.h"

#define UD_ENV_LEN (OP_BTH_LEN + OP_DETH_LEN)

/* Which protocol: its QP (destination and source) and Q_Key. */
struct ud_qp {
    uint32_t qpn;
    uint32_t qkey;
};

/* Pad after the payload so that header + payload + pad is a multiple of 4
 * (the BTH PadCnt). */
uint8_t ud_pad(size_t hdr_len, size_t payload_len);
/* The packet's length without the ICRC: envelope, header, payload, pad. */
size_t ud_len(size_t hdr_len, size_t payload_len);
/* Write the envelope for a header of hdr_len and a payload of payload_len
 * bytes, and the zero pad after where the payload goes. Returns where the
 * header goes (the payload follows it), NULL if cap is too small. */
uint8_t *ud_frame(uint8_t *out, size_t cap, const struct ud_qp *qp, uint32_t psn,
                  size_t hdr_len, size_t payload_len);
/* Take the envelope as ud_frame writes it (only the PSN and PadCnt vary;
 * BTH byte 4, FECN/BECN, is variant and ignored); MALFORMED otherwise. */
void ud_take_envelope(struct wire_cur *c, const struct ud_qp *qp, struct op_bth *bth,
                      struct op_deth *deth);
/* Take the payload, its zero pad and the ICRC (not checked: that needs the
 * flow), and require the end of the packet. Returns the payload. */
const uint8_t *ud_take_tail(struct wire_cur *c, size_t payload_len, uint8_t pad);

#endif
