/* Leader engine: one allreduce streamed as chunks through the group's window.
 * Chunk i of the call has sequence number base + i and slot seq % window; it
 * may be sent once the result of seq - window has arrived, which is what lets
 * the switch reuse the slot. A group's chunks and results keep their order on
 * the way (one tree, FIFO queues), so a result for a chunk sent later shows an
 * earlier one lost, RACK's rule (RFC 8985): it goes again at once. A timer
 * covers the rest (the tail, a path gone quiet): the oldest outstanding chunk
 * goes again a timeout after it was sent and after the last result came, with
 * exponential backoff; every call has a deadline. */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "offpath/reduce.h"

static size_t chunk_elems(const struct op_inc_eng *e, uint32_t i)
{
    size_t first = (size_t)i * e->per_chunk;
    size_t left = e->count - first;
    return left < e->per_chunk ? left : e->per_chunk;
}

static void send_chunk(struct op_inc_eng *e, uint32_t i, uint8_t flags, uint64_t now,
                       struct op_txq *out)
{
    uint32_t seq = e->base_seq + i;
    size_t n = chunk_elems(e, i);
    struct op_inc_hdr h = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_DATA, .flags = flags,
                           .group_id = e->caps.group_id, .op = (uint8_t)e->op,
                           .dtype = (uint8_t)e->type, .src_rank = e->cfg.rank, .token = e->token,
                           .seq = seq, .slot = (uint16_t)(seq % e->caps.window),
                           .count = (uint16_t)n, .req_id = (uint8_t)seq};
    op_red_to_be(e->type, e->scratch, e->send + (size_t)i * e->per_chunk * e->esize, n);
    eng_send(e, out, &h, e->scratch, n * e->esize);
    struct chunk *c = &e->ring[seq % e->caps.window];
    c->seq = seq;
    c->sent_ns = now;
    c->done = false;
    c->resent = (flags & OP_INC_F_RETX) != 0;
    e->c[flags & OP_INC_F_RETX ? OP_INC_C_retransmissions : OP_INC_C_chunks_sent]++;
}

/* ---- the window's reaction to congestion: DCTCP's (RFC 8257) with the
 * results as its ACKs. Every leader of the group sees the same results with
 * the same marks, so all narrow alike and none holds the slots longer than
 * the others. Once per window of results, alpha (the moving average of the
 * marked fraction, gain 1/16) cuts the window by alpha/2 if any was marked,
 * else the window grows by one chunk, up to what the switches granted. */
#define ECN_ONE 1024u
#define ECN_GAIN_SHIFT 4

void eng_window_reset(struct op_inc_eng *e)
{
    e->cwnd = e->caps.window;
    e->alpha = ECN_ONE; /* DCTCP's start: the first marked window halves */
    e->seen = e->marked = 0;
}

uint32_t op_inc_eng_cwnd(const struct op_inc_eng *e) { return e->cwnd; }

static void judge_window(struct op_inc_eng *e, bool congested)
{
    e->seen++;
    if (congested) {
        e->marked++;
        e->c[OP_INC_C_congested_results]++;
    }
    if (!e->cfg.ecn_react || e->seen < e->cwnd)
        return;
    uint32_t frac = e->marked * ECN_ONE / e->seen;
    e->alpha = e->alpha - (e->alpha >> ECN_GAIN_SHIFT) + (frac >> ECN_GAIN_SHIFT);
    if (e->marked > 0) {
        uint32_t cut = (uint32_t)((uint64_t)e->cwnd * e->alpha / (2 * ECN_ONE));
        e->cwnd = e->cwnd > cut + 1 ? e->cwnd - (cut > 0 ? cut : 1) : 1;
        e->c[OP_INC_C_window_cuts]++;
    } else if (e->cwnd < e->caps.window) {
        e->cwnd++;
    }
    e->seen = e->marked = 0;
}

/* Keep cwnd chunks in flight: chunk hi may go once lo + cwnd > hi (cwnd is
 * at most the window, which is what the slots allow). */
static void fill_window(struct op_inc_eng *e, uint64_t now, struct op_txq *out)
{
    while (e->hi < e->n_chunks && e->hi - e->lo < e->cwnd)
        send_chunk(e, e->hi++, 0, now, out);
}

static op_status_t check_call(const struct op_inc_eng *e, size_t count, unsigned type, unsigned op)
{
    if (e->state != ST_READY)
        return e->state == ST_BROKEN ? OP_ERR_STATE : OP_ERR_BUSY;
    if (type >= OP_RED_TYPE_COUNT_ || op >= OP_RED_OP_COUNT_ || !op_red_valid(op, type))
        return OP_ERR_INVAL;
    if (!(e->caps.ops & (1u << op)) || !(e->caps.types & (1u << type)))
        return OP_ERR_UNSUPPORTED;
    size_t per = e->caps.max_data / op_red_type_size(type);
    if (per == 0 || count / per >= UINT32_MAX / 2)
        return OP_ERR_UNSUPPORTED;
    return OP_OK;
}

op_status_t op_inc_eng_allreduce(struct op_inc_eng *e, const void *sendbuf, void *recvbuf,
                                 size_t count, unsigned type, unsigned op, uint64_t now,
                                 struct op_txq *out)
{
    op_status_t st = check_call(e, count, type, op);
    if (st != OP_OK)
        return st;
    if (e->ring == NULL && (e->ring = calloc(e->caps.window, sizeof(*e->ring))) == NULL)
        return OP_ERR_NOMEM;
    e->send = sendbuf;
    e->recv = recvbuf;
    e->count = count;
    e->type = type;
    e->op = op;
    e->esize = op_red_type_size(type);
    e->per_chunk = e->caps.max_data / e->esize;
    if (e->per_chunk > UINT16_MAX)
        e->per_chunk = UINT16_MAX;
    e->n_chunks = (uint32_t)((count + e->per_chunk - 1) / e->per_chunk);
    e->base_seq = e->next_seq;
    e->next_seq += e->n_chunks;
    e->lo = e->hi = 0;
    e->rack_sent_ns = 0;
    e->progress_ns = now;
    e->c[OP_INC_C_allreduces]++;
    if (e->n_chunks == 0) {
        e->result = OP_OK;
        return OP_OK;
    }
    eng_begin(e, ST_REDUCE, now);
    fill_window(e, now, out);
    return OP_OK;
}

/* What a result shows: the path delivers, and every chunk sent before its
 * chunk was is due. Not a re-sent chunk's: its result may answer the first
 * sending (Karn's ambiguity), and taking the re-send's time would call the
 * whole window lost after every spurious timeout. */
static void note_delivery(struct op_inc_eng *e, const struct chunk *c, uint64_t now)
{
    e->progress_ns = now;
    if (!c->resent && c->sent_ns > e->rack_sent_ns)
        e->rack_sent_ns = c->sent_ns;
}

/* Chunks sent a quarter of a round trip (reordering's allowance) before the
 * latest delivered one and still without a result: lost, theirs or another
 * member's, so they go again now. First sendings are in send order, so the
 * scan stops at the first one that is not yet due. */
static void resend_lost(struct op_inc_eng *e, uint64_t now, struct op_txq *out)
{
    uint64_t due = e->rack_sent_ns - eng_min_rtt(e) / 4;
    if (due > e->rack_sent_ns)
        return; /* nothing delivered yet */
    for (uint32_t i = e->lo; i < e->hi; i++) {
        struct chunk *c = &e->ring[(e->base_seq + i) % e->caps.window];
        if (c->done)
            continue;
        if (c->sent_ns >= due) {
            if (!c->resent)
                return;
            continue;
        }
        send_chunk(e, i, OP_INC_F_RETX, now, out);
        e->c[OP_INC_C_fast_retransmits]++;
    }
}

static void advance(struct op_inc_eng *e)
{
    while (e->lo < e->hi) {
        const struct chunk *c = &e->ring[(e->base_seq + e->lo) % e->caps.window];
        if (!c->done)
            break;
        e->lo++;
    }
}

void eng_data_input(struct op_inc_eng *e, const struct op_inc_pkt *ip, uint64_t now,
                    struct op_txq *out)
{
    const struct op_inc_hdr *h = &ip->hdr;
    if (!(h->flags & OP_INC_F_RESULT) || h->group_id != e->caps.group_id || h->token != e->token) {
        e->c[OP_INC_C_dropped]++;
        return;
    }
    uint32_t i = h->seq - e->base_seq;
    if (e->state != ST_REDUCE || i >= e->hi) { /* an earlier call's late duplicate */
        e->c[OP_INC_C_duplicate_results]++;
        return;
    }
    struct chunk *c = &e->ring[h->seq % e->caps.window];
    if (c->seq != h->seq || c->done) {
        e->c[OP_INC_C_duplicate_results]++;
        return;
    }
    if (h->op != e->op || h->dtype != e->type || h->count != chunk_elems(e, i)) {
        e->c[OP_INC_C_dropped]++;
        return;
    }
    op_red_from_be(e->type, e->recv + (size_t)i * e->per_chunk * e->esize, ip->payload, h->count);
    c->done = true;
    e->c[OP_INC_C_results]++;
    note_delivery(e, c, now);
    /* marked on the way up (the flag) or in the queue to us (FECN) */
    judge_window(e, (h->flags & OP_INC_F_CONGESTED) != 0 || ip->bth.fecn);
    /* Karn's rule for a group: no sample from a round anyone retransmitted in
     * (the switch flags its result), as that round waited for a timeout */
    if (!c->resent && !(h->flags & OP_INC_F_RETX))
        eng_rtt_sample(e, now - c->sent_ns);
    e->rto_ns = eng_base_rto(e); /* progress: the path works again */
    if (e->retx_at_ns > now + e->rto_ns)
        e->retx_at_ns = now + e->rto_ns;
    advance(e);
    if (e->lo == e->n_chunks) {
        eng_reduce_done(e, now, out);
        return;
    }
    resend_lost(e, now, out);
    fill_window(e, now, out);
}

/* On expiry the oldest outstanding chunk goes again, and only it: the others
 * wait for its result, which shows them lost by order (resend_lost) or not
 * (a slow round trip under load then costs one packet, not a window's
 * worth, which would slow the round trip further). Results still coming
 * mean the path drains a queue: no expiry until they stop. */
void eng_data_timer(struct op_inc_eng *e, uint64_t now, struct op_txq *out)
{
    if (now < e->retx_at_ns)
        return;
    e->retx_at_ns = UINT64_MAX;
    for (uint32_t i = e->lo; i < e->hi; i++) {
        struct chunk *c = &e->ring[(e->base_seq + i) % e->caps.window];
        if (c->done)
            continue;
        uint64_t since = c->sent_ns > e->progress_ns ? c->sent_ns : e->progress_ns;
        if (now - since < e->rto_ns) {
            e->retx_at_ns = since + e->rto_ns;
            return;
        }
        send_chunk(e, i, OP_INC_F_RETX, now, out);
        e->c[OP_INC_C_timeouts]++;
        eng_backoff(e, now);
        return;
    }
}
