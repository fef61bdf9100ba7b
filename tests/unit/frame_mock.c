/* The mock frame backend (frame_mock.h); no cmocka here: the fuzz targets
 * use it too. */
#include <stdlib.h>
#include <string.h>

#include "frame_mock.h"

static int mock_recv_frames(struct op_io *io, struct op_frame *f, int max)
{
    struct mock *m = (struct mock *)io;
    int k = 0;
    for (; k < max && m->in_at < m->n_in; k++, m->in_at++) {
        memcpy(f[k].data, m->in[m->in_at], m->in_len[m->in_at]);
        f[k].len = m->in_len[m->in_at];
        (void)op_frame_parse(f[k].data, f[k].len, &f[k].info);
    }
    return k;
}

static int mock_send_frames(struct op_io *io, const struct op_frame *f, int n)
{
    struct mock *m = (struct mock *)io;
    int k = 0;
    for (; k < n && k < m->accept && m->n_out < MOCK_MAX_FRAMES; k++, m->n_out++) {
        memcpy(m->out[m->n_out], f[k].data, f[k].len);
        m->out_len[m->n_out] = f[k].len;
    }
    m->accept -= k;
    return k;
}

static int mock_fd(const struct op_io *io) { return (void)io, -1; }
static uint64_t mock_deadline(const struct op_io *io) { return (void)io, UINT64_MAX; }
static void mock_poll(struct op_io *io, uint64_t now) { (void)io, (void)now; }
static void mock_close(struct op_io *io) { free(io); }

static const struct op_io_ops mock_ops = {
    .name = "mock_frames", .recv = io_payload_unsupported_recv,
    .send = io_payload_unsupported_send, .fd = mock_fd, .deadline = mock_deadline,
    .poll = mock_poll, .close = mock_close, .recv_frames = mock_recv_frames,
    .send_frames = mock_send_frames,
};

struct mock *mock_new_mac(const uint8_t mac[6])
{
    struct mock *m = calloc(1, sizeof *m);
    if (m == NULL) /* a test without memory: nothing to test */
        abort();
    m->io.ops = &mock_ops;
    m->io.has_mac = true;
    memcpy(m->io.mac, mac, 6);
    m->accept = 1 << 30;
    return m;
}
