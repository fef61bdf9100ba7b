/* offpath shared-memory collectives among the processes of one node: reduce
 * to rank 0 and broadcast from rank 0, through a POSIX shared-memory segment.
 *
 * Messages of any size go through fixed slots chunk by chunk, so the segment
 * stays small however large the message. A waiting process spins briefly,
 * yields, then sleeps on a futex: oversubscribed nodes (more ranks than
 * cores) must give the core to the rank they wait for. Rank 0 reduces the
 * contributions in rank order, so floating-point results do not depend on
 * timing. Every rank of the group must make the same sequence of calls. */
#ifndef OFFPATH_SHMCOLL_H
#define OFFPATH_SHMCOLL_H

#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

struct op_shm_group;

/* Bytes each rank can hand over per step (and the broadcast slot's size). */
#define OP_SHM_SLOT_DEFAULT (256u * 1024u)
#define OP_SHM_NAME_MAX 64

/* Rank 0 creates the segment under `name` (e.g. "/offpath-123-4"), the
 * others attach to it; once all have attached rank 0 unlinks the name so
 * nothing outlives the processes. */
OP_API op_status_t op_shm_create(const char *name, unsigned n_ranks, size_t slot_bytes,
                                 struct op_shm_group **out);
OP_API op_status_t op_shm_attach(const char *name, unsigned rank, struct op_shm_group **out);
OP_API void op_shm_unlink(const char *name);
OP_API void op_shm_free(struct op_shm_group *g);

/* Rank 0 gets in(rank 0) op in(rank 1) op ... in `out` (out may equal in);
 * the other ranks leave `out` alone (it may be NULL). */
OP_API void op_shm_reduce(struct op_shm_group *g, const void *in, void *out, size_t count,
                          unsigned type, unsigned op);
/* Rank 0's `bytes` bytes of buf land in every rank's buf. */
OP_API void op_shm_bcast(struct op_shm_group *g, void *buf, size_t bytes);

OP_API unsigned op_shm_rank(const struct op_shm_group *g);
OP_API unsigned op_shm_size(const struct op_shm_group *g);

#endif
