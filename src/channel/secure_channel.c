/* The secure_channel tool's run, after DOCA's sample: both ends announce
 * {num_msgs, msg_size} (the wire's op_sc_meta), then a send and a receive
 * thread move the messages at once, the receiver checking every byte of
 * each against the pattern; DOCA's log lines and timing, and a JSON file
 * of the results and counters. src/cli fills the configuration. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel_internal.h"
#include "offpath/wire.h"

#define PROGRESS_NS OP_NS_PER_S

struct run {
    const struct op_sc_tool_config *cfg;
    struct op_log log;
    struct op_channel *ch;
    const uint8_t *pattern; /* pattern[k] = k & 0xff: message i starts at i & 0xff */
    uint64_t peer_msgs, peer_size;
    uint64_t sent, received;
    uint64_t send_ns, recv_ns;
    op_status_t send_st, recv_st;
    char recv_why[160];
};

static double secs(uint64_t ns)
{
    return (double)ns / 1e9;
}

static void *send_thread(void *arg)
{
    struct run *r = arg;
    const struct op_sc_tool_config *c = r->cfg;
    uint64_t n = c->num_msgs, t0 = op_now_ns();
    OP_INFO(&r->log, "SEND START TIME: %.9f seconds", secs(t0));
    OP_INFO(&r->log, "Starting message transmission. Will send %llu messages of size %llu bytes",
            (unsigned long long)n, (unsigned long long)c->msg_size);
    r->send_st = OP_OK;
    for (uint64_t i = 0; i < n; i++) {
        r->send_st = op_channel_send(r->ch, r->pattern + (i & 0xff), c->msg_size,
                                     i + 1 < n ? OP_CHAN_MORE : 0);
        if (r->send_st != OP_OK) {
            OP_ERROR(&r->log, "Message was not sent: %s", op_channel_error(r->ch));
            break;
        }
        OP_LOG(&r->log, OP_LOG_TRACE, "message sent: %llu", (unsigned long long)i);
        r->sent++;
    }
    uint64_t t1 = op_now_ns();
    r->send_ns = t1 - t0;
    OP_INFO(&r->log, "send end at: %.9f seconds", secs(t1));
    OP_INFO(&r->log, "Send thread exiting, total amount of messages sent successfully: %llu",
            (unsigned long long)r->sent);
    return NULL;
}

static bool check_message(struct run *r, uint64_t i, const uint8_t *m, size_t len)
{
    if (len != r->peer_size) {
        snprintf(r->recv_why, sizeof r->recv_why, "message %llu has %zu bytes, expected %llu",
                 (unsigned long long)i, len, (unsigned long long)r->peer_size);
        return false;
    }
    if (memcmp(m, r->pattern + (i & 0xff), len) == 0)
        return true;
    size_t j = 0;
    while (m[j] == r->pattern[(i & 0xff) + j])
        j++;
    snprintf(r->recv_why, sizeof r->recv_why, "message %llu is corrupted at byte %zu",
             (unsigned long long)i, j);
    return false;
}

static void *recv_thread(void *arg)
{
    struct run *r = arg;
    uint64_t t0 = op_now_ns(), next_progress = t0 + PROGRESS_NS;
    OP_INFO(&r->log, "RECV START TIME: %.9f seconds", secs(t0));
    r->recv_st = OP_OK;
    for (uint64_t i = 0; i < r->peer_msgs; i++) {
        const uint8_t *m;
        size_t len;
        r->recv_st = op_channel_recv(r->ch, &m, &len);
        if (r->recv_st != OP_OK) {
            snprintf(r->recv_why, sizeof r->recv_why, "%s", op_channel_error(r->ch));
            break;
        }
        if (!check_message(r, i, m, len)) {
            r->recv_st = OP_ERR_MALFORMED;
            break;
        }
        OP_LOG(&r->log, OP_LOG_TRACE, "message received: %llu", (unsigned long long)i);
        r->received++;
        if ((i & 1023) == 1023 && op_now_ns() >= next_progress) {
            OP_INFO(&r->log, "Progress: received %llu of %llu messages", (unsigned long long)(i + 1),
                    (unsigned long long)r->peer_msgs);
            next_progress += PROGRESS_NS;
        }
    }
    if (r->recv_st != OP_OK)
        OP_ERROR(&r->log, "Message was not received: %s", r->recv_why);
    uint64_t t1 = op_now_ns();
    r->recv_ns = t1 - t0;
    OP_INFO(&r->log, "receive end at: %.9f seconds", secs(t1));
    OP_INFO(&r->log, "Receive thread exiting, total amount of messages received successfully: %llu",
            (unsigned long long)r->received);
    return NULL;
}

/* {num_msgs, msg_size} both ways, before the data (as DOCA 3.3 does). */
static bool exchange_meta(struct run *r)
{
    uint8_t out[OP_SC_META_LEN];
    const uint8_t *in;
    size_t len;
    struct op_sc_meta ours = {.msg_size = (uint32_t)r->cfg->msg_size,
                              .num_msgs = r->cfg->num_msgs},
                      theirs;
    op_sc_meta_encode(&ours, out);
    if (op_channel_send(r->ch, out, sizeof out, 0) != OP_OK ||
        op_channel_recv(r->ch, &in, &len) != OP_OK) {
        OP_ERROR(&r->log, "Failed to exchange the run's parameters: %s", op_channel_error(r->ch));
        return false;
    }
    if (op_sc_meta_decode(in, len, &theirs) != OP_OK) {
        OP_ERROR(&r->log, "The peer's first message is not a secure_channel header");
        return false;
    }
    r->peer_size = theirs.msg_size;
    r->peer_msgs = theirs.num_msgs;
    if (r->peer_size < 1 || r->peer_size > r->cfg->max_msg || r->peer_msgs < 1 ||
        r->peer_msgs > OP_SC_MAX_NUM_MSGS) {
        OP_ERROR(&r->log, "The peer announced %llu messages of %llu bytes: out of range "
                          "(--max-msg-size %llu)",
                 (unsigned long long)r->peer_msgs, (unsigned long long)r->peer_size,
                 (unsigned long long)r->cfg->max_msg);
        return false;
    }
    OP_INFO(&r->log, "Peer will send %llu messages of size %llu bytes",
            (unsigned long long)r->peer_msgs, (unsigned long long)r->peer_size);
    if (r->peer_msgs != r->cfg->num_msgs || r->peer_size != r->cfg->msg_size)
        OP_WARN(&r->log, "The peer's -n/-s (%llu x %llu B) differ from ours (%llu x %llu B): each "
                         "side receives what the other announced",
                (unsigned long long)r->peer_msgs, (unsigned long long)r->peer_size,
                (unsigned long long)r->cfg->num_msgs, (unsigned long long)r->cfg->msg_size);
    return true;
}

/* The channel's two counter sets, sending and receiving. */
struct chan_sets {
    uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
    struct op_counter_set stx, srx;
};

static void chan_sets(struct op_channel *ch, struct chan_sets *s)
{
    op_channel_counters(ch, s->tx, s->rx);
    s->stx = (struct op_counter_set){op_chan_tx_counter_names, s->tx, OP_CHAN_TX_COUNT_};
    s->srx = (struct op_counter_set){op_chan_rx_counter_names, s->rx, OP_CHAN_RX_COUNT_};
}

static void print_counters_json(FILE *f, struct op_channel *ch)
{
    struct chan_sets s;
    chan_sets(ch, &s);
    fprintf(f, "\"tx\": {");
    op_counter_set_print(f, &s.stx, OP_COUNTERS_JSON);
    fprintf(f, "}, \"rx\": {");
    op_counter_set_print(f, &s.srx, OP_COUNTERS_JSON);
    fprintf(f, "}");
}

static void us_per_msg(uint64_t ns, uint64_t n, double *out)
{
    *out = n > 0 ? (double)ns / 1e3 / (double)n : 0.0;
}

static bool write_results(const struct run *r, bool ok)
{
    static const char *const kinds[] = {"unix", "tcp", "shm"};
    double su, ru;
    FILE *f = fopen(r->cfg->json_out, "w");
    if (f == NULL)
        return false;
    us_per_msg(r->send_ns, r->sent, &su);
    us_per_msg(r->recv_ns, r->received, &ru);
    fprintf(f,
            "{\"role\": \"%s\", \"transport\": \"%s\", \"cipher\": \"%s\", \"msg_size\": %llu, "
            "\"num_msgs\": %llu, \"peer_msg_size\": %llu, \"peer_num_msgs\": %llu, \"sent\": %llu, "
            "\"received\": %llu, \"send_ms\": %.6f, \"recv_ms\": %.6f, \"send_us_per_msg\": %.4f, "
            "\"recv_us_per_msg\": %.4f, \"ok\": %s, ",
            r->cfg->chan.listen ? "agent" : "host", kinds[r->cfg->chan.addr.kind],
            op_channel_cipher(r->ch),
            (unsigned long long)r->cfg->msg_size, (unsigned long long)r->cfg->num_msgs,
            (unsigned long long)r->peer_size, (unsigned long long)r->peer_msgs,
            (unsigned long long)r->sent, (unsigned long long)r->received, (double)r->send_ns / 1e6,
            (double)r->recv_ns / 1e6, su, ru, ok ? "true" : "false");
    print_counters_json(f, r->ch);
    fprintf(f, "}\n");
    return fclose(f) == 0;
}

static void report_times(struct run *r)
{
    double su, ru;
    us_per_msg(r->send_ns, r->sent, &su);
    us_per_msg(r->recv_ns, r->received, &ru);
    OP_INFO(&r->log, "Producer sent %llu messages in approximately %.4f milliseconds",
            (unsigned long long)r->sent, (double)r->send_ns / 1e6);
    OP_INFO(&r->log, "Consumer received %llu messages in approximately %.4f milliseconds",
            (unsigned long long)r->received, (double)r->recv_ns / 1e6);
    OP_INFO(&r->log, "Average time per message: send %.3f us, receive %.3f us", su, ru);
}

static void log_failure_counters(struct run *r)
{
    struct chan_sets s;
    char line[512];
    chan_sets(r->ch, &s);
    OP_ERROR(&r->log, "Session failed; receive counters:%s",
             op_counter_set_format(&s.srx, OP_COUNTERS_LINE, line, sizeof line));
}

/* pattern[k] = k & 0xff, long enough for any message at any offset. */
static uint8_t *new_pattern(size_t max_msg)
{
    uint8_t *p = malloc(max_msg + 256);
    for (size_t k = 0; p != NULL && k < max_msg + 256; k++)
        p[k] = (uint8_t)k;
    return p;
}

/* Both threads at once, as DOCA's sample runs them; true when every
 * message went out and every announced one came in intact. */
static bool exchange_messages(struct run *r)
{
    pthread_t ts, tr;
    if (pthread_create(&tr, NULL, recv_thread, r) != 0) {
        OP_ERROR(&r->log, "Cannot start the receive thread");
        return false;
    }
    if (pthread_create(&ts, NULL, send_thread, r) != 0) {
        OP_ERROR(&r->log, "Cannot start the send thread");
        pthread_join(tr, NULL); /* ends by --timeout at the latest */
        return false;
    }
    pthread_join(ts, NULL);
    pthread_join(tr, NULL);
    report_times(r);
    return r->send_st == OP_OK && r->recv_st == OP_OK && r->sent == r->cfg->num_msgs &&
           r->received == r->peer_msgs;
}

int op_sc_tool_run(struct op_sc_tool_config *c)
{
    struct op_channel_config *cfg = &c->chan;
    struct run r = {.cfg = c};
    char why[256];
    op_log_init(&r.log, "secure_channel", c->log_level);
    r.log.stream = stdout;
    r.log.doca = true;
    if (cfg->listen)
        OP_INFO(&r.log, "Started Listening, waiting for new connection");
    op_status_t st = op_channel_open(cfg, &r.ch, why);
    memset(&cfg->local, 0, sizeof cfg->local);
    if (st != OP_OK) {
        OP_ERROR(&r.log, "Failed to establish the connection: %s", why);
        return 1;
    }
    OP_INFO(&r.log, cfg->listen ? "Connection has been established (peer authenticated, %s)"
                                : "Connection to DPU was established successfully (peer "
                                  "authenticated, %s)",
            op_channel_cipher(r.ch));
    uint8_t *pattern = new_pattern(c->max_msg);
    r.pattern = pattern;
    bool ok = pattern != NULL && exchange_meta(&r) && exchange_messages(&r);
    if (!ok)
        log_failure_counters(&r);
    if (c->json_out != NULL && !write_results(&r, ok)) {
        OP_ERROR(&r.log, "Cannot write --json-out %s", c->json_out);
        ok = false;
    }
    op_channel_close(r.ch);
    free(pattern);
    return ok ? 0 : 1;
}

