/* offpath wire: the secure channel's frames (offpath/channel.h; docs/
 * channel.md): a 4-byte big-endian length in front of every frame, whose
 * top bit marks a batch record, and the same length in front of each
 * message inside a batch record and of each plain (benchmark) frame. Inline:
 * the channel moves a message in tens of nanoseconds. */
#ifndef OFFPATH_WIRE_CHAN_H
#define OFFPATH_WIRE_CHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

#define OP_CHAN_FRAME_HDR 4 /* big-endian length (of the ciphertext in a sealed frame) */
#define OP_CHAN_BATCH_HDR 4 /* the same, in front of each message of a batch record */
#define OP_CHAN_BATCH_FLAG 0x80000000u

struct op_chan_frame_hdr {
    uint32_t len; /* below OP_CHAN_BATCH_FLAG */
    bool batch;
};

static inline void op_chan_frame_hdr_encode(struct op_chan_frame_hdr h,
                                            uint8_t out[OP_CHAN_FRAME_HDR])
{
    uint32_t word = h.len | (h.batch ? OP_CHAN_BATCH_FLAG : 0);
    out[0] = (uint8_t)(word >> 24);
    out[1] = (uint8_t)(word >> 16);
    out[2] = (uint8_t)(word >> 8);
    out[3] = (uint8_t)word;
}

/* The header at the front of len received bytes: OP_ERR_TRUNCATED (nothing
 * written) while fewer than OP_CHAN_FRAME_HDR have arrived. The length's
 * range is the receiver's to check (it knows its largest message). */
static inline op_status_t op_chan_frame_hdr_decode(const uint8_t *in, size_t len,
                                                   struct op_chan_frame_hdr *out)
{
    if (len < OP_CHAN_FRAME_HDR)
        return OP_ERR_TRUNCATED;
    uint32_t word = (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 | (uint32_t)in[2] << 8 | in[3];
    *out = (struct op_chan_frame_hdr){.len = word & ~OP_CHAN_BATCH_FLAG,
                                      .batch = (word & OP_CHAN_BATCH_FLAG) != 0};
    return OP_OK;
}

#endif
