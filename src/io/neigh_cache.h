/* Internal to src/io: the MACs of on-link neighbours of either family for
 * backends that build whole frames, learnt from the frames they send us
 * and the answers to our questions; when to ask again for one not known. */
#ifndef OFFPATH_IO_NEIGH_CACHE_H
#define OFFPATH_IO_NEIGH_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "offpath/wire.h"

#define IO_NEIGH_SLOTS 64

struct io_neigh {
    struct op_addr ip;
    uint8_t mac[6];
    bool used, known;
    uint64_t asked_at; /* the last question (0: none) */
};

struct io_neigh_cache {
    struct io_neigh slot[IO_NEIGH_SLOTS];
    uint32_t next; /* the slot to reuse next, round robin */
    uint32_t last; /* the slot found last: most frames are from and to one peer */
};

/* The MAC of ip, NULL when not known. */
const uint8_t *io_neigh_mac(struct io_neigh_cache *c, const struct op_addr *ip);
/* ip is at mac (a frame from it, an answer). */
void io_neigh_learn(struct io_neigh_cache *c, const struct op_addr *ip, const uint8_t mac[6]);
/* For an ip not known: true (and the question noted) when none was asked
 * in the last every_ns. */
bool io_neigh_ask_due(struct io_neigh_cache *c, const struct op_addr *ip, uint64_t now,
                      uint64_t every_ns);

#endif
