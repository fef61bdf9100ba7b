/* The channel: drives the pure engine over a transport. The sending thread
 * owns tx_* and the engine's sealing half, the receiving thread rx_* and the
 * opening half, so the two directions run at once without locks.
 *
 * Batching: frames sealed with OP_CHAN_MORE collect in tx_buf and leave in
 * one write when it holds BATCH_BYTES or when a message comes without MORE,
 * so a lone message is never held back; the receiver reads up to RX_READ
 * bytes per call and opens every frame in them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "channel_internal.h"

#define BATCH_BYTES (64u << 10)
#define RX_READ (256u << 10)
#define PLAIN_HDR OP_CHAN_FRAME_HDR /* a plain frame: the length, then the message */

struct op_channel {
    struct op_channel_config cfg;
    struct chan_transport *t;
    struct op_chan_eng *eng; /* NULL in plaintext (benchmark baseline) mode */
    uint8_t *tx_buf;
    size_t tx_len, tx_cap; /* tx_len: sealed bytes, then the open record */
    size_t rec_len;        /* the open batch record at tx_buf + tx_len, 0: none */
    const char *tx_why;
    uint8_t *rx_buf;
    size_t rx_start, rx_end, rx_cap;
    const char *rx_why;
    uint64_t plain_tx[OP_CHAN_TX_COUNT_], plain_rx[OP_CHAN_RX_COUNT_];
    _Atomic uint64_t writes, reads; /* each written by its own thread */
    char open_why[256];
};

op_status_t op_chan_addr_parse(const char *text, struct op_chan_addr *a, char why[128])
{
    memset(a, 0, sizeof *a);
    if (strncmp(text, "unix:", 5) == 0 || strncmp(text, "shm:", 4) == 0) {
        bool unix_sock = text[0] == 'u';
        const char *rest = text + (unix_sock ? 5 : 4);
        size_t n = strlen(rest);
        size_t max = unix_sock ? sizeof a->path - 1 : 64;
        if (n == 0 || n > max) {
            snprintf(why, 128, "the %s after '%s:' must have 1..%zu characters",
                     unix_sock ? "path" : "name", unix_sock ? "unix" : "shm", max);
            return OP_ERR_INVAL;
        }
        if (!unix_sock && strspn(rest, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "0123456789-_.") != n) {
            snprintf(why, 128, "a shm name may hold only letters, digits, '-', '_' and '.'");
            return OP_ERR_INVAL;
        }
        a->kind = unix_sock ? OP_CHAN_UNIX : OP_CHAN_SHM;
        memcpy(a->path, rest, n + 1);
        return OP_OK;
    }
    if (strncmp(text, "tcp:", 4) == 0) {
        const char *host = text + 4, *colon = strrchr(host, ':');
        uint64_t port;
        if (colon == NULL || colon == host || (size_t)(colon - host) >= sizeof a->host) {
            snprintf(why, 128, "expected tcp:HOST:PORT");
            return OP_ERR_INVAL;
        }
        if (op_parse_u64(colon + 1, 1, 65535, &port) != OP_OK) {
            snprintf(why, 128, "the port must be 1..65535");
            return OP_ERR_INVAL;
        }
        a->kind = OP_CHAN_TCP;
        memcpy(a->host, host, (size_t)(colon - host));
        a->port = (uint16_t)port;
        return OP_OK;
    }
    snprintf(why, 128, "expected unix:PATH, tcp:HOST:PORT or shm:NAME");
    return OP_ERR_INVAL;
}

/* ---- handshake over the transport ---- */

static op_status_t read_more(struct op_channel *c, uint64_t deadline)
{
    size_t got;
    if (c->rx_start > 0) {
        memmove(c->rx_buf, c->rx_buf + c->rx_start, c->rx_end - c->rx_start);
        c->rx_end -= c->rx_start;
        c->rx_start = 0;
    }
    size_t room = c->rx_cap - c->rx_end;
    op_status_t st = c->t->ops->read(c->t, c->rx_buf + c->rx_end, room < RX_READ ? room : RX_READ,
                                     &got, deadline);
    c->rx_end += got;
    atomic_store_explicit(&c->reads, atomic_load_explicit(&c->reads, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    return st;
}

static op_status_t handshake(struct op_channel *c, char why[256])
{
    uint8_t msg[OP_CHAN_HS_MSG_BYTES];
    size_t n, used;
    uint64_t deadline = op_now_ns() + c->cfg.timeout_ns;
    op_status_t st = OP_INPROGRESS;

    if (!c->cfg.listen) {
        op_chan_eng_hs_start(c->eng, msg, sizeof msg, &n);
        if ((st = c->t->ops->write(c->t, msg, n, deadline)) != OP_OK)
            goto io_failed;
    }
    for (;;) {
        st = op_chan_eng_hs_consume(c->eng, c->rx_buf + c->rx_start, c->rx_end - c->rx_start,
                                    &used, msg, sizeof msg, &n);
        c->rx_start += used;
        if (n > 0) {
            op_status_t wst = c->t->ops->write(c->t, msg, n, deadline);
            if (wst != OP_OK) {
                st = wst;
                goto io_failed;
            }
        }
        if (st != OP_INPROGRESS)
            break;
        if ((st = read_more(c, deadline)) != OP_OK)
            goto io_failed;
    }
    if (st != OP_OK) {
        uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
        op_chan_eng_counters(c->eng, tx, rx);
        snprintf(why, 256, "%s (handshake_failed %llu, handshake_malformed %llu)",
                 op_chan_eng_error(c->eng), (unsigned long long)rx[OP_CHAN_handshake_failed],
                 (unsigned long long)rx[OP_CHAN_handshake_malformed]);
    }
    return st;
io_failed:
    snprintf(why, 256, "handshake: %s%s", c->t->rx_why[0] ? c->t->rx_why : c->t->tx_why,
             st == OP_ERR_IO && !c->cfg.listen ? " (did the agent refuse our key?)" : "");
    return st;
}

/* ---- open/close ---- */

static op_status_t new_engine(struct op_channel *c)
{
    struct op_chan_eng_config ec = {
        .role = c->cfg.listen ? OP_CHAN_RESPONDER : OP_CHAN_INITIATOR,
        .cipher = c->cfg.cipher,
        .local = c->cfg.local,
        .max_msg = c->cfg.max_msg,
        .rekey_bytes = c->cfg.rekey_bytes,
    };
    memcpy(ec.peer_pub, c->cfg.peer_pub, sizeof ec.peer_pub);
    if (sodium_init() < 0)
        return OP_ERR_UNSUPPORTED;
    randombytes_buf(ec.ephemeral_sec, sizeof ec.ephemeral_sec);
    op_status_t st = op_chan_eng_new(&ec, &c->eng);
    sodium_memzero(&ec, sizeof ec);
    return st;
}

static op_status_t alloc_buffers(struct op_channel *c)
{
    size_t frame = op_chan_max_frame(c->cfg.max_msg);
    c->tx_cap = frame > BATCH_BYTES ? frame + BATCH_BYTES : 2 * BATCH_BYTES;
    c->rx_cap = frame + RX_READ;
    c->tx_buf = malloc(c->tx_cap);
    c->rx_buf = malloc(c->rx_cap);
    return c->tx_buf != NULL && c->rx_buf != NULL ? OP_OK : OP_ERR_NOMEM;
}

op_status_t op_channel_open(const struct op_channel_config *cfg, struct op_channel **out,
                            char why[256])
{
    op_status_t st;
    *out = NULL;
    why[0] = '\0';
    if (cfg->max_msg < 1 || cfg->max_msg > OP_CHAN_LIMIT_MAX_MSG || cfg->timeout_ns == 0) {
        snprintf(why, 256, "max message size or timeout out of range");
        return OP_ERR_INVAL;
    }
    struct op_channel *c = calloc(1, sizeof *c);
    if (c == NULL)
        return OP_ERR_NOMEM;
    c->cfg = *cfg;
    st = alloc_buffers(c);
    if (st == OP_OK && !cfg->plaintext)
        st = new_engine(c);
    if (st != OP_OK) {
        snprintf(why, 256, "%s", op_status_str(st));
        op_channel_close(c);
        return st;
    }
    st = cfg->addr.kind == OP_CHAN_SHM ? chan_shm_open(cfg, &c->t, why)
                                       : chan_sock_open(cfg, &c->t, why);
    if (st == OP_OK && !cfg->plaintext)
        st = handshake(c, why);
    if (st != OP_OK) {
        op_channel_close(c);
        return st;
    }
    *out = c;
    return OP_OK;
}

void op_channel_close(struct op_channel *c)
{
    if (c == NULL)
        return;
    if (c->t != NULL)
        c->t->ops->close(c->t);
    op_chan_eng_free(c->eng);
    free(c->tx_buf);
    free(c->rx_buf);
    sodium_memzero(&c->cfg.local, sizeof c->cfg.local);
    free(c);
}

/* ---- send ---- */

static op_status_t write_out(struct op_channel *c)
{
    if (c->tx_len == 0)
        return OP_OK;
    op_status_t st = c->t->ops->write(c->t, c->tx_buf, c->tx_len, op_now_ns() + c->cfg.timeout_ns);
    atomic_store_explicit(&c->writes, atomic_load_explicit(&c->writes, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (st != OP_OK)
        c->tx_why = c->t->tx_why;
    c->tx_len = 0;
    return st;
}

static op_status_t engine_failed(struct op_channel *c, op_status_t st)
{
    const char *why = op_chan_eng_error(c->eng);
    c->tx_why = why != NULL ? why : op_status_str(st);
    return st;
}

/* Seals the open record; a full tx_buf leaves at once. */
static op_status_t seal_record(struct op_channel *c)
{
    if (c->rec_len == 0)
        return OP_OK;
    op_status_t st = op_chan_eng_batch_seal(c->eng, c->tx_buf + c->tx_len, c->tx_cap - c->tx_len,
                                            &c->rec_len);
    if (st != OP_OK)
        return engine_failed(c, st);
    c->tx_len += c->rec_len;
    c->rec_len = 0;
    return c->tx_len >= BATCH_BYTES ? write_out(c) : OP_OK;
}

op_status_t op_channel_flush(struct op_channel *c)
{
    op_status_t st = seal_record(c);
    return st == OP_OK ? write_out(c) : st;
}

/* Adds msg to the open record; a full record is sealed, a full buffer
 * written, and the message goes into the next (tx_cap holds BATCH_BYTES
 * and one largest record, so the third try always fits). */
static op_status_t stage(struct op_channel *c, const uint8_t *msg, size_t len)
{
    for (int tries = 0;; tries++) {
        op_status_t st = op_chan_eng_batch_add(c->eng, c->tx_buf + c->tx_len,
                                               c->tx_cap - c->tx_len, &c->rec_len, msg, len);
        if (st == OP_OK)
            return OP_OK;
        if (st != OP_ERR_NOSPACE || tries == 2)
            return engine_failed(c, st);
        st = c->rec_len > 0 ? seal_record(c) : write_out(c);
        if (st != OP_OK)
            return st;
    }
}

/* A lone message (nothing batched before it) as a single-message frame. */
static op_status_t seal_single(struct op_channel *c, const uint8_t *msg, size_t len)
{
    size_t n;
    if (c->tx_len + len + OP_CHAN_FRAME_OVERHEAD > c->tx_cap) {
        op_status_t st = write_out(c);
        if (st != OP_OK)
            return st;
    }
    op_status_t st =
        op_chan_eng_seal(c->eng, msg, len, c->tx_buf + c->tx_len, c->tx_cap - c->tx_len, &n);
    if (st != OP_OK)
        return engine_failed(c, st);
    c->tx_len += n;
    return OP_OK;
}

static void seal_plain(struct op_channel *c, const uint8_t *msg, size_t len)
{
    uint8_t *p = c->tx_buf + c->tx_len;
    op_chan_frame_hdr_encode((struct op_chan_frame_hdr){.len = (uint32_t)len}, p);
    memcpy(p + PLAIN_HDR, msg, len);
    c->tx_len += PLAIN_HDR + len;
    c->plain_tx[OP_CHAN_frames_sealed]++;
    c->plain_tx[OP_CHAN_bytes_sealed] += len;
}

static op_status_t send_plain(struct op_channel *c, const uint8_t *msg, size_t len)
{
    if (c->tx_len + len + PLAIN_HDR > c->tx_cap) {
        op_status_t st = write_out(c);
        if (st != OP_OK)
            return st;
    }
    seal_plain(c, msg, len);
    return OP_OK;
}

op_status_t op_channel_send(struct op_channel *c, const void *msg, size_t len, unsigned flags)
{
    bool more = (flags & OP_CHAN_MORE) != 0;
    op_status_t st;

    if (len < 1 || len > c->cfg.max_msg) {
        c->tx_why = "message size out of range";
        return OP_ERR_INVAL;
    }
    if (c->eng == NULL)
        st = send_plain(c, msg, len);
    else if (c->rec_len == 0 && !more)
        st = seal_single(c, msg, len);
    else
        st = stage(c, msg, len);
    if (st != OP_OK)
        return st;
    if (!more || c->tx_len >= BATCH_BYTES)
        return op_channel_flush(c);
    return OP_OK;
}

/* ---- receive ---- */

static op_status_t open_plain(struct op_channel *c, uint8_t *in, size_t len, size_t *used,
                              const uint8_t **msg, size_t *msg_len)
{
    *used = 0;
    struct op_chan_frame_hdr h;
    if (op_chan_frame_hdr_decode(in, len, &h) != OP_OK)
        return OP_INPROGRESS;
    uint32_t n = h.len;
    if (h.batch || n < 1 || n > c->cfg.max_msg) {
        c->plain_rx[OP_CHAN_bad_length]++;
        c->rx_why = "frame length out of range";
        return OP_ERR_MALFORMED;
    }
    if (len - PLAIN_HDR < n)
        return OP_INPROGRESS;
    *used = PLAIN_HDR + n;
    *msg = in + PLAIN_HDR;
    *msg_len = n;
    c->plain_rx[OP_CHAN_frames_opened]++;
    c->plain_rx[OP_CHAN_bytes_opened] += n;
    return OP_OK;
}

static op_status_t end_of_stream(struct op_channel *c, op_status_t st)
{
    size_t pending = c->rx_end - c->rx_start;
    if (st == OP_ERR_IO && pending > 0) {
        if (c->eng != NULL)
            op_chan_eng_eof(c->eng, pending);
        else
            c->plain_rx[OP_CHAN_truncated]++;
        c->rx_why = "the stream ended inside a frame (truncated)";
        return OP_ERR_TRUNCATED;
    }
    c->rx_why = c->t->rx_why;
    return st;
}

op_status_t op_channel_recv(struct op_channel *c, const uint8_t **msg, size_t *len)
{
    size_t used;
    for (;;) {
        uint8_t *in = c->rx_buf + c->rx_start;
        size_t avail = c->rx_end - c->rx_start;
        op_status_t st = c->eng != NULL ? op_chan_eng_open(c->eng, in, avail, &used, msg, len)
                                        : open_plain(c, in, avail, &used, msg, len);
        if (st == OP_OK) {
            c->rx_start += used;
            return OP_OK;
        }
        if (st != OP_INPROGRESS) {
            if (c->eng != NULL)
                c->rx_why = op_chan_eng_error(c->eng);
            return st;
        }
        if (avail == 0)
            c->rx_start = c->rx_end = 0;
        st = read_more(c, op_now_ns() + c->cfg.timeout_ns);
        if (st != OP_OK)
            return end_of_stream(c, st);
    }
}

const char *op_channel_error(const struct op_channel *c)
{
    if (c->rx_why != NULL)
        return c->rx_why;
    return c->tx_why != NULL ? c->tx_why : "no error";
}

void op_channel_counters(const struct op_channel *c, uint64_t tx[OP_CHAN_TX_COUNT_],
                         uint64_t rx[OP_CHAN_RX_COUNT_])
{
    if (c->eng != NULL) {
        op_chan_eng_counters(c->eng, tx, rx);
    } else {
        memcpy(tx, c->plain_tx, sizeof c->plain_tx);
        memcpy(rx, c->plain_rx, sizeof c->plain_rx);
    }
    tx[OP_CHAN_writes] = atomic_load_explicit(&c->writes, memory_order_relaxed);
    rx[OP_CHAN_reads] = atomic_load_explicit(&c->reads, memory_order_relaxed);
}

const char *op_channel_cipher(const struct op_channel *c)
{
    return c->eng != NULL ? op_chan_cipher_name(op_chan_eng_cipher(c->eng)) : "none";
}
