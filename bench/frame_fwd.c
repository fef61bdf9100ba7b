/* frame_fwd: the plain forwarder bench/topo/forward sets beside `offpath
 * switch --ports`, on the same backend (af_xdp frames, offpath's io layer).
 *
 * Two interfaces A and B; every frame received on one leaves by the other
 * with its MACs rewritten (source: that port's own, destination: the
 * peer's given), as DPDK's l2fwd does: no table, no parsing beyond what
 * the backend does on receive, the same buffers sent as received. One
 * thread polling both ports, yielding every OP_LOOP_YIELD_EVERY empty
 * rounds as the switch's busy loop does, for SECONDS; then its counts as
 * one JSON line.
 *
 * usage: frame_fwd IF_A PEER_MAC_A IF_B PEER_MAC_B SECONDS */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/io.h"
#include "offpath/loop.h"

struct side {
    struct op_io *io;
    uint8_t mac[6], peer[6];
    struct op_pktbuf mem;
    struct op_frame f[OP_IO_BURST];
    uint64_t rx, tx;
};

static bool parse_mac(const char *s, uint8_t mac[6])
{
    unsigned v[6];
    if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
        return false;
    for (int i = 0; i < 6; i++)
        mac[i] = (uint8_t)v[i];
    return true;
}

static bool open_side(struct side *s, const char *ifname, const char *peer)
{
    struct op_io_xdp_config c = {.ifname = ifname, .zero_copy = true};
    if (!parse_mac(peer, s->peer) || op_io_xdp_open_frames(&c, &s->io) != OP_OK ||
        op_io_local_mac(s->io, s->mac) != OP_OK || op_pktbuf_init(&s->mem, OP_IO_BURST) != OP_OK) {
        fprintf(stderr, "frame_fwd: cannot open %s (peer MAC %s)\n", ifname, peer);
        return false;
    }
    op_pktbuf_frames(&s->mem, s->f); /* once: frames are received into and sent from these */
    return true;
}

/* One burst from `in` out of `out`: how many came. */
static int move(struct side *in, struct side *out)
{
    int n = op_io_recv_frames(in->io, in->f, OP_IO_BURST);
    if (n <= 0)
        return 0;
    for (int i = 0; i < n; i++) {
        memcpy(in->f[i].data, out->peer, 6);
        memcpy(in->f[i].data + 6, out->mac, 6);
    }
    in->rx += (uint64_t)n;
    out->tx += (uint64_t)op_io_send_frames(out->io, in->f, n);
    return n;
}

int main(int argc, char **argv)
{
    struct side a = {0}, b = {0};
    uint64_t secs = 0;
    if (argc != 6 || op_parse_u64(argv[5], 1, 3600, &secs) != OP_OK) {
        fprintf(stderr, "usage: frame_fwd IF_A PEER_MAC_A IF_B PEER_MAC_B SECONDS (1..3600)\n");
        return 2;
    }
    if (!open_side(&a, argv[1], argv[2]) || !open_side(&b, argv[3], argv[4]))
        return 1;
    uint64_t end = op_now_ns() + secs * OP_NS_PER_S;
    unsigned idle = 0;
    for (uint64_t k = 0;; k++) {
        int n = move(&a, &b) + move(&b, &a);
        if (n == 0 && ++idle % OP_LOOP_YIELD_EVERY == 0)
            sched_yield();
        if (k % 1024 == 0 && op_now_ns() >= end)
            break;
    }
    printf("{\"a_rx\": %llu, \"b_tx\": %llu, \"b_rx\": %llu, \"a_tx\": %llu}\n",
           (unsigned long long)a.rx, (unsigned long long)b.tx, (unsigned long long)b.rx,
           (unsigned long long)a.tx);
    op_pktbuf_free(&a.mem);
    op_pktbuf_free(&b.mem);
    op_io_close(a.io);
    op_io_close(b.io);
    return 0;
}
