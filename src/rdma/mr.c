/* Memory regions: keys, the checks every local and remote access passes,
 * and copies between packets and scatter/gather lists.
 *
 * A key is a table slot in its low 16 bits and 16 random bits above it, so
 * lookup is one index and a guessed key hits with odds 1 in 65536 per region
 * (rxe: an index and 8 random bits). lkey and rkey differ. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma_internal.h"

#define SLOT_MASK (RDMA_MAX_MRS - 1u)

static uint32_t new_key(struct op_rdma_dev *dev, uint32_t slot)
{
    uint32_t hi;
    do
        hi = (uint32_t)op_rng_next(&dev->rng) & 0xffffu;
    while (hi == 0); /* a key of 0 would look unset */
    return hi << RDMA_MR_SLOT_BITS | slot;
}

static op_status_t grow_mrs(struct op_rdma_dev *dev)
{
    uint32_t cap = dev->n_mrs_cap ? dev->n_mrs_cap * 2 : 16;
    if (dev->n_mrs_cap >= RDMA_MAX_MRS)
        return OP_ERR_NOSPACE;
    struct op_rdma_mr **m = realloc(dev->mrs, cap * sizeof(*m));
    if (m == NULL)
        return OP_ERR_NOMEM;
    memset(m + dev->n_mrs_cap, 0, (cap - dev->n_mrs_cap) * sizeof(*m));
    dev->mrs = m;
    dev->n_mrs_cap = cap;
    return OP_OK;
}

static op_status_t free_slot(struct op_rdma_dev *dev, uint32_t *slot)
{
    for (;;) {
        for (uint32_t i = 0; i < dev->n_mrs_cap; i++)
            if (dev->mrs[i] == NULL) {
                *slot = i;
                return OP_OK;
            }
        op_status_t st = grow_mrs(dev);
        if (st != OP_OK)
            return st;
    }
}

op_status_t op_rdma_reg_mr(struct op_rdma_dev *dev, void *addr, size_t len, unsigned access,
                           struct op_rdma_mr **out)
{
    const unsigned known = OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_WRITE |
                           OP_RDMA_ACCESS_REMOTE_READ | OP_RDMA_ACCESS_REMOTE_ATOMIC;
    uint32_t slot;
    if ((addr == NULL && len > 0) || (access & ~known) != 0 || len > UINT32_MAX)
        return OP_ERR_INVAL;
    /* verbs: remote write and remote atomic need local write */
    if ((access & (OP_RDMA_ACCESS_REMOTE_WRITE | OP_RDMA_ACCESS_REMOTE_ATOMIC)) &&
        !(access & OP_RDMA_ACCESS_LOCAL_WRITE))
        return OP_ERR_INVAL;
    op_status_t st = free_slot(dev, &slot);
    if (st != OP_OK)
        return st;
    struct op_rdma_mr *mr = calloc(1, sizeof(*mr));
    if (mr == NULL)
        return OP_ERR_NOMEM;
    *mr = (struct op_rdma_mr){.dev = dev, .addr = addr, .va = (uint64_t)(uintptr_t)addr,
                              .len = len, .access = access, .lkey = new_key(dev, slot),
                              .rkey = new_key(dev, slot)};
    dev->mrs[slot] = mr;
    *out = mr;
    return OP_OK;
}

void op_rdma_dereg_mr(struct op_rdma_mr *mr)
{
    if (mr == NULL)
        return;
    mr->dev->mrs[mr->lkey & SLOT_MASK] = NULL;
    mr->dev->mr_gen++;
    free(mr);
}

void rdma_mr_free_all(struct op_rdma_dev *dev)
{
    for (uint32_t i = 0; i < dev->n_mrs_cap; i++)
        free(dev->mrs[i]);
    free(dev->mrs);
}

uint32_t op_rdma_mr_lkey(const struct op_rdma_mr *mr) { return mr->lkey; }
uint32_t op_rdma_mr_rkey(const struct op_rdma_mr *mr) { return mr->rkey; }

static struct op_rdma_mr *mr_of(const struct op_rdma_dev *dev, uint32_t key)
{
    uint32_t slot = key & SLOT_MASK;
    return slot < dev->n_mrs_cap ? dev->mrs[slot] : NULL;
}

static bool covers(const struct op_rdma_mr *mr, uint64_t va, uint64_t len)
{
    return va >= mr->va && len <= mr->len && va - mr->va <= mr->len - len;
}

bool rdma_sgl_load(struct op_rdma_dev *dev, const struct op_rdma_sge *sg, int n, bool write,
                   struct rdma_sgl *out, uint32_t *len)
{
    uint64_t total = 0;
    if (n < 0 || n > OP_RDMA_MAX_SGE || (n > 0 && sg == NULL))
        return false;
    for (int i = 0; i < n; i++) {
        const struct op_rdma_mr *mr = mr_of(dev, sg[i].lkey);
        if (mr == NULL || mr->lkey != sg[i].lkey || !covers(mr, sg[i].addr, sg[i].length))
            return false;
        if (write && !(mr->access & OP_RDMA_ACCESS_LOCAL_WRITE))
            return false;
        out->sg[i] = sg[i];
        total += sg[i].length;
    }
    if (total > UINT32_MAX)
        return false;
    out->n = (uint8_t)n;
    *len = (uint32_t)total;
    return true;
}

static const char *access_name(unsigned access)
{
    return access == OP_RDMA_ACCESS_REMOTE_READ     ? "REMOTE_READ"
           : access == OP_RDMA_ACCESS_REMOTE_ATOMIC ? "REMOTE_ATOMIC"
                                                    : "REMOTE_WRITE";
}

struct op_rdma_mr *rdma_rkey_check(struct op_rdma_qp *qp, uint32_t rkey, uint64_t va,
                                   uint32_t len, unsigned access, char *cause, size_t cap)
{
    struct op_rdma_mr *mr = mr_of(qp->dev, rkey);
    if (mr == NULL || mr->rkey != rkey)
        snprintf(cause, cap, "rkey 0x%08" PRIx32 " names no memory region", rkey);
    else if (!covers(mr, va, len))
        snprintf(cause, cap,
                 "rkey 0x%08" PRIx32 " does not cover [0x%" PRIx64 ", 0x%" PRIx64
                 ") (region [0x%" PRIx64 ", 0x%" PRIx64 "))",
                 rkey, va, va + len, mr->va, mr->va + mr->len);
    else if (!(mr->access & access))
        snprintf(cause, cap, "rkey 0x%08" PRIx32 " region lacks %s access", rkey,
                 access_name(access));
    else if (!(qp->attr.access & access))
        snprintf(cause, cap, "QP 0x%06" PRIx32 " does not allow %s", qp->qpn, access_name(access));
    else
        return mr;
    return NULL;
}

/* Copy len bytes of the message the list describes (already checked
 * against its regions), from byte off on: into memory from in, or out of
 * memory into out. */
static void sgl_copy(const struct rdma_sgl *sgl, uint32_t off, const uint8_t *in, uint8_t *out,
                     uint32_t len)
{
    for (unsigned i = 0; i < sgl->n && len > 0; i++) {
        const struct op_rdma_sge *s = &sgl->sg[i];
        if (off >= s->length) {
            off -= s->length;
            continue;
        }
        uint32_t n = s->length - off < len ? s->length - off : len;
        uint8_t *mem = (uint8_t *)(uintptr_t)(s->addr + off);
        if (in != NULL) {
            memcpy(mem, in, n);
            in += n;
        } else {
            memcpy(out, mem, n);
            out += n;
        }
        len -= n;
        off = 0;
    }
}

void rdma_sgl_put(const struct rdma_sgl *sgl, uint32_t off, const void *in, uint32_t len)
{
    if (len > 0)
        sgl_copy(sgl, off, in, NULL, len);
}

const uint8_t *rdma_sgl_span(const struct rdma_sgl *sgl, uint32_t off, uint32_t len)
{
    for (unsigned i = 0; i < sgl->n; i++) {
        const struct op_rdma_sge *s = &sgl->sg[i];
        if (off >= s->length) {
            off -= s->length;
            continue;
        }
        return len <= s->length - off ? (const uint8_t *)(uintptr_t)(s->addr + off) : NULL;
    }
    return NULL;
}

void rdma_sgl_get(const struct rdma_sgl *sgl, uint32_t off, void *out, uint32_t len)
{
    if (len > 0)
        sgl_copy(sgl, off, NULL, out, len);
}
