/* offpath wire: the secure_channel tool's first message each way, which
 * tells the peer how many messages of what size follow (as DOCA 3.3's
 * sample does), inside the encrypted channel (offpath/wire.h includes every
 * part; docs/wire.md section 13). Big-endian: "OPSC", size (4), count (8). */
#ifndef OFFPATH_WIRE_SC_META_H
#define OFFPATH_WIRE_SC_META_H

#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

#define OP_SC_META_LEN 16
#define OP_SC_META_MAGIC 0x4f505343u /* "OPSC" */

struct op_sc_meta {
    uint32_t msg_size;
    uint64_t num_msgs;
};

OP_API void op_sc_meta_encode(const struct op_sc_meta *m, uint8_t out[OP_SC_META_LEN]);
/* OP_ERR_TRUNCATED for another length, OP_ERR_MALFORMED for another magic;
 * out untouched then. The counts' ranges are the tool's to check. */
OP_API op_status_t op_sc_meta_decode(const uint8_t *buf, size_t len, struct op_sc_meta *out);

#endif
