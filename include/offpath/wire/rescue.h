/* offpath wire: rescue messages between the leaders of a group (offpath/wire.h includes every
 * part; docs/wire.md). */
#ifndef OFFPATH_WIRE_RESCUE_H
#define OFFPATH_WIRE_RESCUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

/* ---- rescue messages (offpath/rescue.h): leaders of a group telling each
 * other where they stand on a switch call, and handing over a saved result.
 * Plain UDP, big-endian: magic "OPRS", version, type, state, 0, job, comm,
 * nonce, seq (8), completed (8), offset, total, len, then len bytes. */
/* Where a leader stands on one group. */
enum op_rsc_state {
    OP_RSC_IDLE,       /* between calls: completed calls 1..completed */
    OP_RSC_IN_CALL,    /* in call seq, waiting on the switch */
    OP_RSC_GAVE_UP,    /* gave call seq up: redoes it once every leader has */
    OP_RSC_UNKNOWN,    /* no such group here (not created yet) */
    OP_RSC_STATES_
};

enum op_rsc_type {
    OP_RSC_STATUS_REQ = 1, /* where do you stand? (carries the asker's state) */
    OP_RSC_STATUS = 2,
    OP_RSC_FETCH_REQ = 3,  /* the result of call seq from offset */
    OP_RSC_DATA = 4,       /* len bytes of it at offset (len 0: not held) */
};

#define OP_RSC_HDR_LEN 48
#define OP_RSC_MAX_DATA 8192
#define OP_RSC_MAX_MSG (OP_RSC_HDR_LEN + OP_RSC_MAX_DATA)

struct op_rsc_msg {
    uint8_t type, state;
    uint32_t job, comm, nonce;
    uint64_t seq, completed;
    uint32_t offset, total, len;
    const uint8_t *data; /* decode: points into the buffer */
};

/* Returns the bytes written (0 if cap is too small or a field is invalid). */
OP_API size_t op_rsc_encode(const struct op_rsc_msg *m, uint8_t *out, size_t cap);
/* OP_ERR_TRUNCATED or OP_ERR_MALFORMED with the reason counted by the caller. */
OP_API op_status_t op_rsc_decode(const uint8_t *buf, size_t len, struct op_rsc_msg *out);

#endif
