/* Shared-memory transport: two single-producer single-consumer byte rings
 * in one POSIX shm segment, carrying the same frames as the sockets.
 *
 * Waiting: a reader that finds the ring empty spins a short while (a lone
 * message then costs no system call), then announces itself in a waiters
 * word and sleeps on a futex; the writer wakes it only when that word is
 * set, so a busy stream makes no system calls and an idle side sleeps
 * instead of spinning (idle vCPUs wake slowly and spinning on both cores
 * starves the kernel: docs/channel.md). Sleeps are sliced so a peer that
 * died or closed is noticed, and every wait ends at the caller's deadline. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "channel_internal.h"

#define SHM_MAGIC 0x4f50534du /* "OPSM" */
#define SHM_VERSION 1u
#define RING_BYTES (1u << 20)
#define HEADER_BYTES 4096u
#define SEG_BYTES (HEADER_BYTES + 2u * RING_BYTES)
#define SPIN_ROUNDS 512
#define SLICE_NS (20 * OP_NS_PER_MS)
#define CACHE_LINE 64

struct ring_ctl {
    _Alignas(CACHE_LINE) _Atomic uint32_t head; /* consumer's position */
    _Atomic uint32_t head_waiters;              /* producer sleeps for space */
    _Alignas(CACHE_LINE) _Atomic uint32_t tail; /* producer's position */
    _Atomic uint32_t tail_waiters;              /* consumer sleeps for data */
    _Atomic uint32_t closed;                    /* producer has gone */
};

struct seg_hdr {
    _Atomic uint32_t magic; /* set last by the listener: the rest is ready */
    uint32_t version, ring_bytes;
    _Atomic uint32_t state; /* 0 listening, 1 connected */
    _Atomic int32_t pid[2]; /* listener, connector */
    struct ring_ctl ring[2]; /* [0] listener -> connector, [1] the reverse */
};
_Static_assert(sizeof(struct seg_hdr) <= HEADER_BYTES, "shm header fits its page");

struct shm_transport {
    struct chan_transport base;
    struct seg_hdr *hdr;
    uint8_t *tx_data, *rx_data;
    struct ring_ctl *tx, *rx;
    int side; /* 0 listener, 1 connector */
};

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)word, op, val, ts, NULL, 0);
}

/* Only the sleeper clears its waiters flag (once awake): a writer that
 * cleared it could clear a flag set for the sleeper's next wait and leave it
 * asleep until its slice ends. */
static void wake(_Atomic uint32_t *word, _Atomic uint32_t *waiters)
{
    if (atomic_load(waiters) != 0)
        futex(word, FUTEX_WAKE, 1, NULL);
}

static bool peer_gone(struct shm_transport *s)
{
    int32_t pid = atomic_load(&s->hdr->pid[1 - s->side]);
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

/* Sleeps until *word moves from seen, the slice ends or the deadline. */
static void sleep_on(_Atomic uint32_t *word, _Atomic uint32_t *waiters, uint32_t seen,
                     uint64_t deadline)
{
    uint64_t now = op_now_ns();
    uint64_t ns = deadline > now ? deadline - now : 0;
    if (ns > SLICE_NS)
        ns = SLICE_NS;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ns};
    atomic_store(waiters, 1);
    if (atomic_load(word) == seen)
        futex(word, FUTEX_WAIT, seen, &ts);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static op_status_t sleep_until_change(struct shm_transport *s, _Atomic uint32_t *word,
                                      _Atomic uint32_t *waiters, uint32_t seen,
                                      uint64_t deadline, bool reading, char *why);

/* Waits until *word differs from seen. OP_OK, or why it gave up. */
static op_status_t wait_change(struct shm_transport *s, _Atomic uint32_t *word,
                               _Atomic uint32_t *waiters, uint32_t seen, uint64_t deadline,
                               bool reading, char *why)
{
    for (int i = 0; i < SPIN_ROUNDS; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != seen)
            return OP_OK;
        cpu_relax();
    }
    op_status_t st = sleep_until_change(s, word, waiters, seen, deadline, reading, why);
    atomic_store(waiters, 0);
    return st;
}

static op_status_t sleep_until_change(struct shm_transport *s, _Atomic uint32_t *word,
                                      _Atomic uint32_t *waiters, uint32_t seen,
                                      uint64_t deadline, bool reading, char *why)
{
    for (;;) {
        if (atomic_load(word) != seen)
            return OP_OK;
        if (reading && atomic_load(&s->rx->closed) != 0) {
            snprintf(why, 160, "the peer closed the connection");
            return OP_ERR_IO;
        }
        if (peer_gone(s)) {
            snprintf(why, 160, "the peer process is gone");
            return OP_ERR_IO;
        }
        if (op_now_ns() >= deadline) {
            snprintf(why, 160, reading ? "nothing from the peer before the timeout (stalled?)"
                                       : "the peer stopped reading (send timed out)");
            return OP_ERR_TIMEOUT;
        }
        sleep_on(word, waiters, seen, deadline);
    }
}

static op_status_t shm_write(struct chan_transport *t, const uint8_t *buf, size_t len,
                             uint64_t deadline)
{
    struct shm_transport *s = (struct shm_transport *)t;
    struct ring_ctl *r = s->tx;
    uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    while (len > 0) {
        uint32_t head = atomic_load_explicit(&r->head, memory_order_acquire);
        uint32_t room = RING_BYTES - (tail - head);
        if (room == 0) {
            op_status_t st = wait_change(s, &r->head, &r->head_waiters, head, deadline, false,
                                         t->tx_why);
            if (st != OP_OK)
                return st;
            continue;
        }
        uint32_t n = len < room ? (uint32_t)len : room;
        uint32_t at = tail & (RING_BYTES - 1), first = RING_BYTES - at;
        if (first > n)
            first = n;
        memcpy(s->tx_data + at, buf, first);
        memcpy(s->tx_data, buf + first, n - first);
        tail += n;
        buf += n;
        len -= n;
        /* seq_cst pairs with the reader's waiters store: Dekker-style, so
         * either it sees the new tail or we see it waiting. */
        atomic_store(&r->tail, tail);
        wake(&r->tail, &r->tail_waiters);
    }
    return OP_OK;
}

static op_status_t shm_read(struct chan_transport *t, uint8_t *buf, size_t cap, size_t *got,
                            uint64_t deadline)
{
    struct shm_transport *s = (struct shm_transport *)t;
    struct ring_ctl *r = s->rx;
    uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint32_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    *got = 0;
    if (tail == head) {
        op_status_t st = wait_change(s, &r->tail, &r->tail_waiters, head, deadline, true,
                                     t->rx_why);
        if (st != OP_OK)
            return st;
        tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    }
    uint32_t n = tail - head;
    if (n > cap)
        n = (uint32_t)cap;
    uint32_t at = head & (RING_BYTES - 1), first = RING_BYTES - at;
    if (first > n)
        first = n;
    memcpy(buf, s->rx_data + at, first);
    memcpy(buf + first, s->rx_data, n - first);
    atomic_store(&r->head, head + n);
    wake(&r->head, &r->head_waiters);
    *got = n;
    return OP_OK;
}

static void shm_close(struct chan_transport *t)
{
    struct shm_transport *s = (struct shm_transport *)t;
    atomic_store(&s->tx->closed, 1);
    atomic_fetch_add(&s->tx->tail, 0); /* a full barrier before the wake */
    futex(&s->tx->tail, FUTEX_WAKE, 1, NULL);
    munmap(s->hdr, SEG_BYTES);
    free(s);
}

static const struct chan_transport_ops shm_ops = {
    .write = shm_write, .read = shm_read, .close = shm_close};

static void seg_name(const struct op_chan_addr *a, char out[96])
{
    snprintf(out, 96, "/offpath-ch-%.64s", a->path);
}

static op_status_t fail(const char *what, const char *name, char why[256])
{
    int e = errno;
    snprintf(why, 256, "%s /dev/shm%s: %s", what, name, strerror(e));
    return op_status_from_errno(e);
}

/* A segment left by a listener that died before anyone connected. */
static bool stale(const char *name)
{
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return false;
    struct stat sb;
    bool dead = false;
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size >= SEG_BYTES) {
        struct seg_hdr *h = mmap(NULL, HEADER_BYTES, PROT_READ, MAP_SHARED, fd, 0);
        if (h != MAP_FAILED) {
            int32_t pid = atomic_load(&h->pid[0]);
            dead = pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
            munmap(h, HEADER_BYTES);
        }
    }
    close(fd);
    return dead;
}

static op_status_t map_segment(int fd, struct seg_hdr **out)
{
    void *p = mmap(NULL, SEG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return op_status_from_errno(errno);
    *out = p;
    return OP_OK;
}

static op_status_t shm_listen(const struct op_channel_config *cfg, struct seg_hdr **out,
                              char why[256])
{
    char name[96];
    seg_name(&cfg->addr, name);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST && stale(name)) {
        shm_unlink(name);
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    }
    if (fd < 0)
        return fail("cannot create", name, why);
    if (ftruncate(fd, SEG_BYTES) != 0 || map_segment(fd, out) != OP_OK) {
        op_status_t st = fail("cannot size or map", name, why);
        close(fd);
        shm_unlink(name);
        return st;
    }
    close(fd);
    struct seg_hdr *h = *out;
    h->version = SHM_VERSION;
    h->ring_bytes = RING_BYTES;
    atomic_store(&h->pid[0], (int32_t)getpid());
    atomic_store(&h->magic, SHM_MAGIC);
    uint64_t deadline = op_now_ns() + cfg->timeout_ns;
    while (atomic_load(&h->state) == 0 && op_now_ns() < deadline) {
        struct timespec ts = {.tv_nsec = (long)SLICE_NS};
        futex(&h->state, FUTEX_WAIT, 0, &ts);
    }
    shm_unlink(name); /* connected or given up: nobody else may join */
    if (atomic_load(&h->state) == 0) {
        munmap(h, SEG_BYTES);
        snprintf(why, 256, "no peer connected to shm:%s within the timeout", cfg->addr.path);
        return OP_ERR_TIMEOUT;
    }
    return OP_OK;
}

/* Opens the listener's segment, retrying until it exists and is ready. */
static op_status_t shm_connect(const struct op_channel_config *cfg, struct seg_hdr **out,
                               char why[256])
{
    char name[96];
    uint64_t deadline = op_now_ns() + cfg->timeout_ns;
    seg_name(&cfg->addr, name);
    for (;;) {
        int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0 && (size_t)sb.st_size >= SEG_BYTES &&
            map_segment(fd, out) == OP_OK) {
            close(fd);
            struct seg_hdr *h = *out;
            uint32_t idle = 0;
            if (atomic_load(&h->magic) == SHM_MAGIC && h->version == SHM_VERSION &&
                h->ring_bytes == RING_BYTES) {
                atomic_store(&h->pid[1], (int32_t)getpid());
                if (atomic_compare_exchange_strong(&h->state, &idle, 1)) {
                    futex(&h->state, FUTEX_WAKE, 1, NULL);
                    return OP_OK;
                }
                munmap(h, SEG_BYTES);
                snprintf(why, 256, "shm:%s already has a peer", cfg->addr.path);
                return OP_ERR_BUSY;
            }
            munmap(h, SEG_BYTES);
        } else if (fd >= 0) {
            close(fd);
        }
        if (op_now_ns() >= deadline) {
            snprintf(why, 256, "no agent listening on shm:%s within the timeout", cfg->addr.path);
            return OP_ERR_TIMEOUT;
        }
        nanosleep(&(struct timespec){.tv_nsec = 10 * (long)OP_NS_PER_MS}, NULL);
    }
}

op_status_t chan_shm_open(const struct op_channel_config *cfg, struct chan_transport **out,
                          char why[256])
{
    struct seg_hdr *h = NULL;
    op_status_t st = cfg->listen ? shm_listen(cfg, &h, why) : shm_connect(cfg, &h, why);
    if (st != OP_OK)
        return st;
    struct shm_transport *s = calloc(1, sizeof *s);
    if (s == NULL) {
        munmap(h, SEG_BYTES);
        return OP_ERR_NOMEM;
    }
    uint8_t *data = (uint8_t *)h + HEADER_BYTES;
    s->base.ops = &shm_ops;
    s->hdr = h;
    s->side = cfg->listen ? 0 : 1;
    s->tx = &h->ring[s->side];
    s->rx = &h->ring[1 - s->side];
    s->tx_data = data + (size_t)s->side * RING_BYTES;
    s->rx_data = data + (size_t)(1 - s->side) * RING_BYTES;
    *out = &s->base;
    return OP_OK;
}
