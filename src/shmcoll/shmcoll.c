/* Shared-memory reduce and broadcast among a node's ranks (see shmcoll.h).
 *
 * Hand-over is by sequence numbers, one writer per word: a contributor posts
 * chunk s in its slot and sets posted = s; rank 0 folds every slot into its
 * output and sets consumed = s, which frees all slots for s + 1. The
 * broadcast mirrors it: rank 0 fills the result slot and sets result = s;
 * each rank copies it out and sets taken = s. Reduce and broadcast count
 * their steps separately, so one never waits on the other's counter. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "offpath/reduce.h"
#include "offpath/shmcoll.h"

#define SHM_MAGIC 0x6f707368u /* "opsh" */
#define SHM_SPINS 64          /* cheap checks before yielding the core */
#define SHM_YIELDS 16         /* yields before sleeping on the futex */
#define SHM_NAP_NS 50000000L  /* a sleeper re-checks at least this often */

/* One cache line per word: the writer's stores do not steal the line from
 * the other words' readers. */
struct shm_word {
    _Atomic uint32_t v;
    _Atomic uint32_t sleepers;
    char pad[56];
};

struct shm_rank_words {
    struct shm_word posted; /* this rank's slot holds reduce step `posted` */
    struct shm_word taken;  /* this rank has copied broadcast step `taken` */
};

struct shm_head {
    _Atomic uint32_t magic; /* set last: attachers see a complete header */
    uint32_t n;
    uint64_t slot;
    uint64_t data_off;
    char pad[40];
    struct shm_word consumed; /* rank 0 has folded reduce step `consumed` */
    struct shm_word result;   /* the result slot holds broadcast step `result` */
    struct shm_rank_words r[];
};

struct op_shm_group {
    struct shm_head *h;
    size_t map_bytes;
    unsigned rank, n;
    size_t slot;
    unsigned char *data; /* result slot, then one slot per rank 1..n-1 */
    uint32_t rstep, bstep;
};

static size_t data_offset(unsigned n)
{
    size_t head = sizeof(struct shm_head) + (size_t)n * sizeof(struct shm_rank_words);
    return (head + 4095) & ~(size_t)4095;
}

static unsigned char *slot_of(const struct op_shm_group *g, unsigned rank)
{
    return g->data + (size_t)rank * g->slot; /* rank 0's is the result slot */
}

static bool reached(uint32_t v, uint32_t target) { return (int32_t)(v - target) >= 0; }

static void futex_sleep(_Atomic uint32_t *addr, uint32_t seen)
{
    struct timespec nap = {0, SHM_NAP_NS};
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, seen, &nap, NULL, 0);
}

static void wait_reach(struct shm_word *w, uint32_t target)
{
    for (unsigned i = 0;; i++) {
        uint32_t v = atomic_load_explicit(&w->v, memory_order_acquire);
        if (reached(v, target))
            return;
        if (i < SHM_SPINS) {
            __builtin_ia32_pause();
            continue;
        }
        if (i < SHM_SPINS + SHM_YIELDS) {
            sched_yield();
            continue;
        }
        /* Announce the sleep, then look again: the publisher stores before
         * it reads `sleepers` (both sequentially consistent), so either it
         * sees us or we see its value. */
        atomic_fetch_add(&w->sleepers, 1);
        v = atomic_load(&w->v);
        if (!reached(v, target))
            futex_sleep(&w->v, v);
        atomic_fetch_sub(&w->sleepers, 1);
    }
}

static void publish(struct shm_word *w, uint32_t v)
{
    atomic_store(&w->v, v);
    if (atomic_load(&w->sleepers) != 0)
        syscall(SYS_futex, (uint32_t *)&w->v, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static op_status_t map_group(int fd, size_t bytes, unsigned rank, struct op_shm_group **out)
{
    struct op_shm_group *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return OP_ERR_NOMEM;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        op_status_t st = op_status_from_errno(errno);
        free(g);
        return st;
    }
    g->h = p;
    g->map_bytes = bytes;
    g->rank = rank;
    *out = g;
    return OP_OK;
}

static void bind_layout(struct op_shm_group *g)
{
    g->n = g->h->n;
    g->slot = g->h->slot;
    g->data = (unsigned char *)g->h + g->h->data_off;
}

op_status_t op_shm_create(const char *name, unsigned n_ranks, size_t slot_bytes,
                          struct op_shm_group **out)
{
    if (name == NULL || out == NULL || n_ranks < 1 || n_ranks > 4096 || slot_bytes < 64 ||
        slot_bytes > (64u << 20))
        return OP_ERR_INVAL;
    slot_bytes &= ~(size_t)63; /* every element type divides a slot */
    size_t off = data_offset(n_ranks), bytes = off + (size_t)n_ranks * slot_bytes;
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
        return op_status_from_errno(errno); /* EEXIST: the name is taken */
    op_status_t st = ftruncate(fd, (off_t)bytes) == 0 ? map_group(fd, bytes, 0, out)
                                                      : op_status_from_errno(errno);
    close(fd);
    if (st != OP_OK) {
        shm_unlink(name);
        return st;
    }
    struct shm_head *h = (*out)->h;
    h->n = n_ranks;
    h->slot = slot_bytes;
    h->data_off = off;
    atomic_store(&h->magic, SHM_MAGIC);
    bind_layout(*out);
    return OP_OK;
}

static bool header_sane(const struct shm_head *h, size_t bytes, unsigned rank)
{
    return atomic_load(&h->magic) == SHM_MAGIC && rank < h->n && h->slot >= 64 &&
           h->data_off == data_offset(h->n) && h->data_off + (size_t)h->n * h->slot == bytes;
}

op_status_t op_shm_attach(const char *name, unsigned rank, struct op_shm_group **out)
{
    if (name == NULL || out == NULL)
        return OP_ERR_INVAL;
    int fd = shm_open(name, O_RDWR, 0600);
    if (fd < 0)
        return op_status_from_errno(errno);
    struct stat sb;
    op_status_t st = OP_ERR_MALFORMED;
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size >= sizeof(struct shm_head))
        st = map_group(fd, (size_t)sb.st_size, rank, out);
    close(fd);
    if (st != OP_OK)
        return st;
    if (!header_sane((*out)->h, (size_t)sb.st_size, rank)) {
        op_shm_free(*out);
        *out = NULL;
        return OP_ERR_MALFORMED;
    }
    bind_layout(*out);
    return OP_OK;
}

void op_shm_unlink(const char *name)
{
    if (name != NULL)
        shm_unlink(name);
}

void op_shm_free(struct op_shm_group *g)
{
    if (g == NULL)
        return;
    munmap(g->h, g->map_bytes);
    free(g);
}

unsigned op_shm_rank(const struct op_shm_group *g) { return g->rank; }
unsigned op_shm_size(const struct op_shm_group *g) { return g->n; }

/* Rank 0 folds every contribution of one step into `acc`, in rank order. */
static void fold_step(struct op_shm_group *g, unsigned char *acc, size_t k, unsigned type,
                      unsigned op)
{
    for (unsigned r = 1; r < g->n; r++) {
        wait_reach(&g->h->r[r].posted, g->rstep);
        op_reduce(op, type, acc, slot_of(g, r), k);
    }
    publish(&g->h->consumed, g->rstep);
}

static void post_step(struct op_shm_group *g, const unsigned char *src, size_t bytes)
{
    wait_reach(&g->h->consumed, g->rstep - 1); /* my slot is free again */
    memcpy(slot_of(g, g->rank), src, bytes);
    publish(&g->h->r[g->rank].posted, g->rstep);
}

void op_shm_reduce(struct op_shm_group *g, const void *in, void *out, size_t count, unsigned type,
                   unsigned op)
{
    size_t esz = op_red_type_size(type), per = g->slot / esz;
    const unsigned char *src = in;
    unsigned char *dst = out;
    for (size_t off = 0; off < count; off += per) {
        size_t k = count - off < per ? count - off : per;
        g->rstep++;
        if (g->rank != 0) {
            post_step(g, src + off * esz, k * esz);
            continue;
        }
        if (dst != src)
            memcpy(dst + off * esz, src + off * esz, k * esz);
        fold_step(g, dst + off * esz, k, type, op);
    }
}

static void wait_all_taken(struct op_shm_group *g, uint32_t step)
{
    for (unsigned r = 1; r < g->n; r++)
        wait_reach(&g->h->r[r].taken, step);
}

void op_shm_bcast(struct op_shm_group *g, void *buf, size_t bytes)
{
    unsigned char *p = buf;
    for (size_t off = 0; off < bytes; off += g->slot) {
        size_t k = bytes - off < g->slot ? bytes - off : g->slot;
        g->bstep++;
        if (g->rank == 0) {
            wait_all_taken(g, g->bstep - 1); /* everyone has the previous chunk */
            memcpy(slot_of(g, 0), p + off, k);
            publish(&g->h->result, g->bstep);
        } else {
            wait_reach(&g->h->result, g->bstep);
            memcpy(p + off, slot_of(g, 0), k);
            publish(&g->h->r[g->rank].taken, g->bstep);
        }
    }
}
