/* A mock frame backend for unit tests of engines over whole frames
 * (op_io_frames_serve, the switch on the path): frames injected are
 * received in order with op_frame_parse's view, frames sent are kept. */
#ifndef OFFPATH_TEST_FRAME_MOCK_H
#define OFFPATH_TEST_FRAME_MOCK_H

#include <stdint.h>

#include "../../src/io/io_internal.h"
#include "offpath/io.h"

#define MOCK_MAX_FRAMES 512

struct mock {
    struct op_io io;
    uint8_t in[MOCK_MAX_FRAMES][2048], out[MOCK_MAX_FRAMES][2048];
    uint32_t in_len[MOCK_MAX_FRAMES], out_len[MOCK_MAX_FRAMES];
    int n_in, in_at, n_out;
    int accept; /* frames a send takes at most */
};

/* A backend with this MAC; op_io_close frees it. */
struct mock *mock_new_mac(const uint8_t mac[6]);

#endif
