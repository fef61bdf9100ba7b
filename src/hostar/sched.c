/* The algorithms as per-leader schedules of steps (what to send whom, what to
 * take from whom and how to combine it). Both sides of every message derive
 * it from (rank, n, count) alone, so nothing about the schedule travels.
 *
 * Ring (Patarasuk and Yuan; MPICH's and Open MPI's large-message allreduce):
 * the vector is cut into n blocks; in reduce-scatter step s leader r sends
 * block r-s to r+1 and reduces block r-s-1 from r-1 into its own, so block b
 * is reduced once, along the chain b, b+1, ..., b-1; allgather then passes the
 * finished blocks round unchanged (copies).
 *
 * Recursive doubling (Thakur, Rabenseifner and Gropp 2005) for small vectors:
 * with p the largest power of two <= n and rem = n - p, the even leaders
 * below 2 rem first hand their vector to the next odd one and take the
 * result back at the end; the p others pair up at distances 1, 2, 4, ... and
 * exchange whole vectors. Both partners compute lower rank's value op higher
 * rank's, so they hold the same bits after every round. */
#include <stdlib.h>
#include <string.h>

#include "hostar_internal.h"

bool har_use_ring(const struct op_har_config *cfg, size_t count, size_t esize)
{
    /* ring steps are numbered up to 2n - 3 in a 16-bit field */
    return count >= cfg->n && (uint64_t)count * esize >= cfg->ring_bytes && cfg->n <= 32768;
}

uint32_t har_chunks(const struct har_call *k, uint32_t len)
{
    return (uint32_t)(((uint64_t)len + k->per_chunk - 1) / k->per_chunk);
}

uint32_t har_chunk_len(const struct har_call *k, uint32_t len, uint32_t c)
{
    uint32_t left = len - c * k->per_chunk;
    return left < k->per_chunk ? left : k->per_chunk;
}

static bool grow(void **arr, uint32_t *cap, uint32_t want, size_t size)
{
    if (want <= *cap)
        return true;
    void *p = realloc(*arr, (size_t)want * size);
    if (p == NULL)
        return false;
    *arr = p;
    *cap = want;
    return true;
}

static void add(struct har_call *k, uint16_t g, int32_t to, int32_t from, uint8_t action)
{
    k->steps[k->n_steps++] = (struct har_step){.g = g, .to = to, .from = from, .action = action,
                                               .send_after = -1, .recv_after = -1};
}

static uint32_t block_start(const struct har_call *k, uint32_t n, uint32_t b)
{
    return (uint32_t)((uint64_t)b * k->count / n);
}

static void set_block(const struct har_call *k, uint32_t n, uint32_t b, uint32_t *off,
                      uint32_t *len)
{
    *off = block_start(k, n, b);
    *len = block_start(k, n, b + 1) - *off;
}

static void sched_ring(struct har_call *k, uint32_t r, uint32_t n)
{
    int32_t right = (int32_t)((r + 1) % n), left = (int32_t)((r + n - 1) % n);
    for (uint32_t g = 0; g < 2 * (n - 1); g++) {
        bool rs = g < n - 1;
        uint32_t s = rs ? g : g - (n - 1);
        /* reduce-scatter: send r-s, take r-s-1; allgather: send r+1-s, take r-s */
        uint32_t sb = (rs ? r + 2 * n - s : r + 1 + 2 * n - s) % n;
        uint32_t rb = (rs ? r + 2 * n - s - 1 : r + 2 * n - s) % n;
        add(k, (uint16_t)g, right, left, rs ? HAR_REDUCE_MINE_FIRST : HAR_COPY);
        struct har_step *st = &k->steps[k->n_steps - 1];
        set_block(k, n, sb, &st->send_off, &st->send_len);
        set_block(k, n, rb, &st->recv_off, &st->recv_len);
        /* what step g sends is the block step g-1 took */
        st->send_after = (int32_t)g - 1;
    }
}

static void whole(struct har_call *k, struct har_step *st, bool send, bool recv)
{
    st->send_len = send ? k->count : 0;
    st->recv_len = recv ? k->count : 0;
}

/* The step whose recv is the latest before the one being added, -1 none. */
static int32_t last_recv(const struct har_call *k)
{
    for (int32_t i = (int32_t)k->n_steps - 1; i >= 0; i--)
        if (k->steps[i].from >= 0)
            return i;
    return -1;
}

static void sched_rd(struct har_call *k, uint32_t r, uint32_t n)
{
    uint32_t p = 1, rounds = 0;
    while (p * 2 <= n) {
        p *= 2;
        rounds++;
    }
    uint32_t rem = n - p, nr = r >= 2 * rem ? r - rem : r / 2;
    if (r < 2 * rem && r % 2 == 0) { /* folded: contribute, then wait for the result */
        add(k, 0, (int32_t)r + 1, -1, 0);
        whole(k, &k->steps[0], true, false);
        add(k, (uint16_t)(rounds + 1), -1, (int32_t)r + 1, HAR_COPY);
        whole(k, &k->steps[1], false, true);
        return;
    }
    if (r < 2 * rem) {
        add(k, 0, -1, (int32_t)r - 1, HAR_REDUCE_THEIRS_FIRST);
        whole(k, &k->steps[0], false, true);
    }
    for (uint32_t i = 0; i < rounds; i++) {
        uint32_t pn = nr ^ (1u << i), pr = pn < rem ? 2 * pn + 1 : pn + rem;
        int32_t prev = last_recv(k);
        add(k, (uint16_t)(i + 1), (int32_t)pr, (int32_t)pr,
            r < pr ? HAR_REDUCE_MINE_FIRST : HAR_REDUCE_THEIRS_FIRST);
        struct har_step *st = &k->steps[k->n_steps - 1];
        whole(k, st, true, true);
        st->send_after = st->recv_after = prev;
    }
    if (r < 2 * rem) { /* hand the result back to the folded neighbour */
        int32_t prev = last_recv(k);
        add(k, (uint16_t)(rounds + 1), (int32_t)r - 1, -1, 0);
        whole(k, &k->steps[k->n_steps - 1], true, false);
        k->steps[k->n_steps - 1].send_after = prev;
    }
}

static op_status_t index_steps(struct har_call *k)
{
    uint32_t n_g = 0, chunks = 0;
    for (uint32_t i = 0; i < k->n_steps; i++) {
        n_g = k->steps[i].g + 1u > n_g ? k->steps[i].g + 1u : n_g;
        k->steps[i].done_base = chunks;
        chunks += har_chunks(k, k->steps[i].recv_len);
    }
    if (!grow((void **)&k->by_g, &k->by_g_cap, n_g, sizeof(*k->by_g)) ||
        !grow((void **)&k->done, &k->done_cap, chunks ? chunks : 1, 1))
        return OP_ERR_NOMEM;
    k->n_g = n_g;
    for (uint32_t g = 0; g < n_g; g++)
        k->by_g[g] = -1;
    for (uint32_t i = 0; i < k->n_steps; i++)
        k->by_g[k->steps[i].g] = (int32_t)i;
    memset(k->done, 0, chunks);
    k->left = chunks;
    return OP_OK;
}

/* k's count, per_chunk and buffer are set; fills its steps. */
op_status_t har_sched_build(struct har_call *k, uint32_t rank, uint32_t n, bool ring)
{
    uint32_t most = ring ? 2 * (n - 1) : 40; /* rounds <= 16, plus fold and unfold */
    if (!grow((void **)&k->steps, &k->steps_cap, most, sizeof(*k->steps)))
        return OP_ERR_NOMEM;
    k->n_steps = 0;
    if (ring)
        sched_ring(k, rank, n);
    else
        sched_rd(k, rank, n);
    return index_steps(k);
}

void har_sched_free(struct har_call *k)
{
    free(k->steps);
    free(k->by_g);
    free(k->done);
}
