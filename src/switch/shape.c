/* A port's egress as a link of finite rate (path_internal.h): AF_XDP sends
 * around the kernel's qdisc, so a tbf on the switch's own interface would
 * not hold it back; the switch shapes itself, as a real switch's port
 * serialises at line rate. A frame leaves when the virtual link clock
 * (free_at, advanced by each frame's bits at the rate) is within a burst
 * of now; a frame that finds queue_bytes held is dropped (tail drop, as
 * tbf's limit). A frame that finds ecn_bytes or more held is marked CE when
 * its sender reacts to it (ECT), as a DCTCP/DCQCN switch marks: the INC
 * leaders narrow their windows on it, a TCP halves its window, before the
 * queue drops. The link taken down drops everything it is given. */
#include <stdlib.h>
#include <string.h>

#include "path_internal.h"

#define SHAPE_SLOTS 4096
#define MIN_BURST_NS (100 * OP_NS_PER_US)

static bool shaped(const struct sw_port *pt) { return pt->cfg.rate_bps > 0; }

op_status_t path_shape_init(struct sw_port *pt, uint64_t now)
{
    struct path_shaper *sh = &pt->sh;
    if (pt->cfg.down_for_ms > 0 && pt->cfg.down_at_inc == 0)
        path_shape_down_from(pt, now);
    if (!shaped(pt))
        return OP_OK;
    /* tbf's burst as offpath topo sets it: a millisecond of the rate, at
     * least 16 KiB */
    uint64_t burst = pt->cfg.burst_bytes;
    if (burst == 0)
        burst = pt->cfg.rate_bps / 8 / 1000 > 16384 ? pt->cfg.rate_bps / 8 / 1000 : 16384;
    sh->burst_ns = burst * 8 * OP_NS_PER_S / pt->cfg.rate_bps;
    if (sh->burst_ns < MIN_BURST_NS)
        sh->burst_ns = MIN_BURST_NS;
    sh->cap = SHAPE_SLOTS;
    sh->ring = calloc(sh->cap, sizeof *sh->ring);
    sh->held_at = calloc(sh->cap, sizeof *sh->held_at);
    sh->spare = calloc(sh->cap, sizeof *sh->spare);
    op_status_t st = sh->ring != NULL && sh->held_at != NULL && sh->spare != NULL
                         ? op_pktbuf_init(&sh->mem, (int)sh->cap)
                         : OP_ERR_NOMEM;
    if (st != OP_OK)
        return st;
    for (uint32_t i = 0; i < sh->cap; i++)
        sh->spare[sh->n_spare++] = sh->mem.pkts[i].data;
    return OP_OK;
}

void path_shape_free(struct sw_port *pt)
{
    struct path_shaper *sh = &pt->sh;
    for (uint32_t k = 0; k < sh->n; k++) { /* lent frames held go back */
        struct op_frame *f = &sh->ring[(sh->head + k) % sh->cap];
        if (f->lent != NULL && pt->io != NULL)
            op_io_release_frames(pt->io, f, 1);
    }
    op_pktbuf_free(&sh->mem);
    free(sh->ring);
    free(sh->held_at);
    free(sh->spare);
    memset(sh, 0, sizeof *sh);
}

void path_shape_down_from(struct sw_port *pt, uint64_t now)
{
    struct path_shaper *sh = &pt->sh;
    sh->down_from = now + (uint64_t)pt->cfg.down_after_ms * OP_NS_PER_MS;
    sh->down_until = sh->down_from + (uint64_t)pt->cfg.down_for_ms * OP_NS_PER_MS;
}

static bool link_down(const struct path_shaper *sh, uint64_t now)
{
    return now >= sh->down_from && now < sh->down_until;
}

static void drop_down(struct sw_port *pt, struct op_frame *f, int n)
{
    for (int i = 0; i < n; i++)
        if (f[i].lent != NULL)
            op_io_release_frames(pt->io, &f[i], 1);
    pt->c[OP_SW_PATH_C_injected_drops] += (uint64_t)n;
}

static void send_now(struct sw_port *pt, struct op_io *io, struct op_frame *f, int n)
{
    int sent = op_io_send_frames(io, f, n);
    sent = sent > 0 ? sent : 0;
    pt->c[OP_SW_PATH_C_tx_frames] += (uint64_t)sent;
    pt->c[OP_SW_PATH_C_tx_drops] += (uint64_t)(n - sent);
}

/* Our own INC packet (a result to a leader, a partial to a SPINE) marked CE
 * also carries FECN in its BTH: a leader's UDP socket does not read the IP
 * header's ECN, the BTH it decodes anyway (ICRC-masked: still valid). Parsed
 * afresh: a frame the engine built has no parsed view, and only marked ones
 * come here. */
static void fecn_if_ours(const struct sw_port *pt, struct op_frame *f)
{
    const struct op_sw_path_config *c = &pt->path->cfg;
    struct op_frame_info in;
    if (op_frame_parse(f->data, f->len, &in) == OP_FRAME_OK && in.kind == OP_FRAME_KIND_IPV4 &&
        in.payload_len >= OP_BTH_LEN && op_addr_eq(&in.flow.src, &c->own4) &&
        in.flow.src_port == c->inc_port)
        f->data[in.payload_off + OP_BTH_FECN_BYTE] |= OP_BTH_FECN_BIT;
}

/* Frame j of q into the FIFO: the FIFO takes its buffer, q's slot gets the
 * latest spare one (a lent frame takes none). */
static void hold(struct sw_port *pt, struct op_frameq *q, int j, uint64_t now)
{
    struct path_shaper *sh = &pt->sh;
    struct op_frame *f = &q->frames[j];
    if (sh->n == sh->cap || sh->bytes + f->len > pt->cfg.queue_bytes)
        path_shape_release(pt, now); /* what may go goes first */
    if (sh->n == sh->cap || sh->bytes + f->len > pt->cfg.queue_bytes) {
        pt->c[OP_SW_PATH_C_queue_drops]++;
        if (f->lent != NULL)
            op_io_release_frames(pt->io, f, 1);
        return;
    }
    if (pt->cfg.ecn_bytes > 0 && sh->bytes >= pt->cfg.ecn_bytes && op_frame_mark_ce(f->data, f->len)) {
        pt->c[OP_SW_PATH_C_ecn_marked]++;
        fecn_if_ours(pt, f);
    }
    uint32_t s = (sh->head + sh->n++) % sh->cap;
    sh->ring[s] = *f;
    sh->held_at[s] = now;
    sh->bytes += f->len;
    if (f->lent == NULL)
        f->data = q->bufs[j] = sh->spare[--sh->n_spare];
}

void path_shape_flush(void *ctx, struct op_io *io, struct op_frameq *q)
{
    struct sw_port *pt = ctx;
    uint64_t now = op_now_ns();
    if (!shaped(pt)) {
        if (link_down(&pt->sh, now))
            drop_down(pt, q->frames, q->n);
        else
            send_now(pt, io, q->frames, q->n);
        q->n = 0;
        return;
    }
    for (int j = 0; j < q->n; j++)
        hold(pt, q, j, now);
    q->n = 0;
    path_shape_release(pt, now);
}

static uint64_t wire_ns(const struct sw_port *pt, uint32_t len)
{
    return (uint64_t)len * 8 * OP_NS_PER_S / pt->cfg.rate_bps;
}

/* The frames the batch sent (or the link down dropped) give their slots
 * back, and a copied frame its buffer, on top of the spares. */
static void retire(struct path_shaper *sh, int k)
{
    for (int i = 0; i < k; i++) {
        uint32_t s = (sh->head + (uint32_t)i) % sh->cap;
        if (sh->ring[s].lent == NULL)
            sh->spare[sh->n_spare++] = sh->ring[s].data;
        sh->bytes -= sh->ring[s].len;
    }
    sh->head = (sh->head + (uint32_t)k) % sh->cap;
    sh->n -= (uint32_t)k;
}

void path_shape_release(struct sw_port *pt, uint64_t now)
{
    struct path_shaper *sh = &pt->sh;
    while (sh->n > 0) {
        /* The link went idle when the queue did, and busy again when the
         * head frame came: a release that runs late (the thread was not
         * scheduled) sends what the link would have sent meanwhile, up to a
         * burst more (more would be a burst the next hop's queue pays for),
         * and an idle link saves no credit. */
        uint64_t busy_from = sh->held_at[sh->head];
        if (now > sh->burst_ns && busy_from < now - sh->burst_ns)
            busy_from = now - sh->burst_ns;
        if (sh->free_at < busy_from)
            sh->free_at = busy_from;
        int k = 0;
        while (k < OP_IO_BURST && (uint32_t)k < sh->n && sh->free_at <= now + sh->burst_ns) {
            const struct op_frame *f = &sh->ring[(sh->head + (uint32_t)k) % sh->cap];
            sh->batch[k++] = *f;
            sh->free_at += wire_ns(pt, f->len);
        }
        if (k == 0)
            return;
        if (link_down(sh, now))
            drop_down(pt, sh->batch, k);
        else
            send_now(pt, pt->io, sh->batch, k);
        retire(sh, k);
    }
}

uint64_t path_shape_deadline(const struct sw_port *pt)
{
    const struct path_shaper *sh = &pt->sh;
    if (sh->n == 0)
        return UINT64_MAX;
    return sh->free_at > sh->burst_ns ? sh->free_at - sh->burst_ns : 0;
}
