/* What every daemon of the agent needs whatever it computes (the allreduce
 * daemon, daemon.c; the all-to-all daemon, a2a_daemon.c): its place in the
 * -a list, the two listening sockets, clients admitted over the secure
 * channel through a greeting the daemon checks, and the RDMA queue pairs of
 * its ranks to every other daemon's ranks set up over daemon links. */
#ifndef OFFPATH_AGENT_PLUMB_H
#define OFFPATH_AGENT_PLUMB_H

#include "agent_proto.h"

struct agent_plumb {
    const struct op_agent_daemon_net *net;
    uint32_t max_msg; /* the largest channel message a client may send */
/* set by agent_plumb_open */
    uint32_t self;
    int client_fd, link_fd;
    uint64_t refused; /* clients turned away at their greeting */
    bool idle;        /* no client within the timeout is no error (logged at debug) */
};

/* This daemon's index in the -a list, then both listening sockets (so
 * nobody connecting early is turned away). Logged on failure. */
op_status_t agent_plumb_open(struct agent_plumb *p);
void agent_plumb_close(struct agent_plumb *p);

/* A client's greeting (the channel's first message): OP_OK with the
 * welcome to send in reply, or a refusal with the reason in why. */
typedef op_status_t (*agent_greet_fn)(void *ctx, const uint8_t *msg, size_t len,
                                      uint8_t reply[32], size_t *reply_len, char *why,
                                      size_t why_len);
/* The next client the greeting accepts; one refused is told why, logged,
 * counted, and the daemon waits for the next. */
op_status_t agent_plumb_accept(struct agent_plumb *p, agent_greet_fn greet, void *ctx,
                               struct op_channel **out);

/* Every daemon hosts `per` ranks of one all-to-all (daemon j's are j * per
 * .. j * per + per - 1, local[i] the i-th of this one's, created with
 * ranks = n_daemons * per): their queue pairs to each other and to every
 * other daemon's ranks, exchanged over one link a pair of daemons (the
 * higher index connects), and connected. */
op_status_t agent_plumb_link(struct agent_plumb *p, struct op_a2a *const *local, uint32_t per);

#endif
