/* The neighbour cache of the frame backends (neigh_cache.h): a small
 * table searched linearly (a port talks to few on-link peers: a switch's
 * neighbours, a server's gateway), entries reused round robin. */
#include <string.h>

#include "neigh_cache.h"

static bool same(const struct io_neigh *n, const struct op_addr *ip)
{
    return n->used && n->ip.family == ip->family &&
           (ip->family == OP_AF_IPV6 ? memcmp(n->ip.v6, ip->v6, 16) == 0 : n->ip.v4 == ip->v4);
}

static struct io_neigh *find(struct io_neigh_cache *c, const struct op_addr *ip)
{
    if (same(&c->slot[c->last], ip))
        return &c->slot[c->last];
    for (uint32_t i = 0; i < IO_NEIGH_SLOTS; i++)
        if (same(&c->slot[i], ip)) {
            c->last = i;
            return &c->slot[i];
        }
    return NULL;
}

static struct io_neigh *slot_for(struct io_neigh_cache *c, const struct op_addr *ip)
{
    struct io_neigh *n = find(c, ip);
    if (n == NULL) {
        n = &c->slot[c->next++ % IO_NEIGH_SLOTS];
        *n = (struct io_neigh){.ip = *ip, .used = true};
    }
    return n;
}

const uint8_t *io_neigh_mac(struct io_neigh_cache *c, const struct op_addr *ip)
{
    const struct io_neigh *n = find(c, ip);
    return n != NULL && n->known ? n->mac : NULL;
}

void io_neigh_learn(struct io_neigh_cache *c, const struct op_addr *ip, const uint8_t mac[6])
{
    struct io_neigh *n = slot_for(c, ip);
    memcpy(n->mac, mac, 6);
    n->known = true;
}

bool io_neigh_ask_due(struct io_neigh_cache *c, const struct op_addr *ip, uint64_t now,
                      uint64_t every_ns)
{
    struct io_neigh *n = slot_for(c, ip);
    if (n->known || (n->asked_at != 0 && now - n->asked_at < every_ns))
        return false;
    n->asked_at = now != 0 ? now : 1;
    return true;
}
