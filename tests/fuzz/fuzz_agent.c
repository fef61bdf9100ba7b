/* libFuzzer target for what reaches an allreduce daemon from outside: the
 * configuration handshake a peer sends, and any sequence of vectors and
 * partials (bad sources, sizes, operation numbers, repeats). Properties:
 * nothing crashes; a refused input changes nothing that is counted as
 * accepted; completed operations never exceed those any source could have
 * finished, and the window's base never goes back. Also every message a
 * daemon parses (the all-to-all daemon's greeting among them) encodes back
 * to the bytes taken. */
#include <stdlib.h>
#include <string.h>

#include "../../src/agent/agent_proto.h"
#include "offpath/agent.h"
#include "offpath/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond)
        abort();
}

static void count_emit(void *ctx, const struct op_ar_out *o)
{
    uint64_t *n = ctx;
    require(o->bytes == 4 * 3 && o->data != NULL);
    n[o->kind]++;
}

static void handshake(const uint8_t *data, size_t size)
{
    char theirs[128], why[160];
    size_t n = size < sizeof theirs - 1 ? size : sizeof theirs - 1;
    memcpy(theirs, data, n);
    theirs[n] = '\0';
    op_status_t st = op_ar_handshake_check("-s 3 -d int -b 2 -i 4", theirs, why, sizeof why);
    require(st == OP_OK || st == OP_ERR_INVAL || st == OP_ERR_MALFORMED);
    require(st != OP_OK || strcmp(theirs, "-s 3 -d int -b 2 -i 4") == 0);
}

/* Each 4 bytes: kind (client or peer), source, operation, size change. */
static void engine(const uint8_t *data, size_t size)
{
    uint64_t emitted[2] = {0, 0};
    struct op_ar_config c = {.daemons = 3, .self = 1, .clients = 2, .count = 3,
                             .type = OP_RED_INT32, .op = OP_RED_SUM, .window = 2};
    struct op_ar *ar;
    if (op_ar_create(&c, count_emit, emitted, &ar) != OP_OK)
        return;
    int32_t vec[4] = {1, 2, 3, 4};
    uint64_t base = 0;
    for (size_t i = 0; i + 4 <= size; i += 4) {
        uint32_t who = data[i + 1] % 5;
        uint64_t id = data[i + 2] % 8;
        size_t bytes = 12 + (data[i + 3] % 3 == 0 ? 4 : 0);
        if (data[i] & 1)
            (void)op_ar_peer(ar, who, id, vec, bytes);
        else
            (void)op_ar_client(ar, who, id, vec, bytes);
        require(op_ar_done_below(ar) >= base);
        base = op_ar_done_below(ar);
    }
    const uint64_t *n = op_ar_counters(ar);
    require(n[OP_AR_C_results] == emitted[OP_AR_RESULT]);
    require(n[OP_AR_C_partials_sent] == emitted[OP_AR_PARTIAL]);
    require(n[OP_AR_C_results] <= n[OP_AR_C_partials_sent]);
    require(n[OP_AR_C_results] * 2 <= n[OP_AR_C_peer_partials]);
    op_ar_destroy(ar);
}

/* The messages a daemon or client takes from its peer: what a parser
 * accepts encodes back to the same bytes (nothing taken that the writer
 * would not write), and its fields are in range. */
static void messages(const uint8_t *data, size_t size)
{
    struct op_agent_welcome w;
    if (op_agent_welcome_decode(data, size, &w) == OP_OK) {
        uint8_t out[32];
        require(op_agent_welcome_encode(&w, out) == size && memcmp(out, data, size) == 0);
        require(w.rank < w.clients && (uint64_t)w.daemons * w.per_daemon == w.clients);
    }
    struct op_agent_pair p;
    if (op_agent_pair_decode(data, size, &p) == OP_OK) {
        uint8_t out[512];
        require(op_agent_pair_encode(&p, out) == size && memcmp(out, data, size) == 0);
        require(p.ep.workers >= 1 && p.ep.workers <= OP_A2A_MAX_WORKERS);
    }
    struct op_agent_a2a_hello h;
    if (op_agent_a2a_hello_decode(data, size, &h) == OP_OK) {
        uint8_t out[OP_AGENT_A2A_HELLO_LEN];
        require(op_agent_a2a_hello_encode(&h, out) == size && memcmp(out, data, size) == 0);
        require(h.rank < h.ranks && h.ranks <= OP_A2A_MAX_RANKS && h.chunk > 0 &&
                h.workers >= 1 && h.workers <= OP_A2A_MAX_WORKERS);
    }
    uint64_t id;
    const uint8_t *vec;
    if (size >= OP_AGENT_ID_HDR && op_agent_id_decode(data, size, OP_AGENT_MSG_VECTOR,
                                                      size - OP_AGENT_ID_HDR, &id, &vec) == OP_OK)
        require(vec == data + OP_AGENT_ID_HDR);
    require(op_agent_id_decode(data, size, OP_AGENT_MSG_RESULT, size + 1, &id, &vec) != OP_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] % 3 == 1)
        handshake(data + 1, size - 1);
    else if (data[0] % 3 == 2)
        messages(data + 1, size - 1);
    else
        engine(data + 1, size - 1);
    return 0;
}
