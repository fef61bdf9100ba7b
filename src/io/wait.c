/* Bounded waits on descriptors: the one place below the drivers that
 * sleeps in ppoll, for what is not a packet loop (a control socket, a pipe,
 * a timerfd, a peer's TCP side channel). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <time.h>

#include "offpath/io.h"

static const struct timespec *time_left(uint64_t deadline_ns, struct timespec *ts)
{
    if (deadline_ns == UINT64_MAX)
        return NULL;
    uint64_t now = op_now_ns(), left = deadline_ns > now ? deadline_ns - now : 0;
    ts->tv_sec = (time_t)(left / OP_NS_PER_S);
    ts->tv_nsec = (long)(left % OP_NS_PER_S);
    return ts;
}

static short poll_events(unsigned events)
{
    return (short)((events & OP_IO_IN ? POLLIN : 0) | (events & OP_IO_OUT ? POLLOUT : 0));
}

/* ppoll until something is ready or the deadline, through signals. */
static int wait_poll(struct pollfd *p, size_t n, uint64_t deadline_ns)
{
    for (;;) {
        struct timespec ts;
        int r = ppoll(p, (nfds_t)n, time_left(deadline_ns, &ts), NULL);
        if (r >= 0)
            return r;
        if (errno != EINTR)
            return -errno;
        if (deadline_ns != UINT64_MAX && op_now_ns() >= deadline_ns)
            return 0;
    }
}

int op_io_wait_fds(const int *fds, int n, unsigned events, uint64_t deadline_ns)
{
    struct pollfd p[OP_IO_WAIT_MAX_FDS];
    if (n < 0 || n > OP_IO_WAIT_MAX_FDS)
        return -EINVAL;
    for (int i = 0; i < n; i++)
        p[i] = (struct pollfd){.fd = fds[i], .events = poll_events(events)};
    return wait_poll(p, (size_t)n, deadline_ns);
}

struct op_io_waitset {
    unsigned cap;
    struct pollfd p[];
};

op_status_t op_io_waitset_new(unsigned cap, struct op_io_waitset **out)
{
    struct op_io_waitset *w = calloc(1, sizeof *w + (size_t)cap * sizeof w->p[0]);
    if (w == NULL)
        return OP_ERR_NOMEM;
    w->cap = cap;
    for (unsigned i = 0; i < cap; i++)
        w->p[i].fd = -1;
    *out = w;
    return OP_OK;
}

void op_io_waitset_free(struct op_io_waitset *w) { free(w); }

void op_io_waitset_set(struct op_io_waitset *w, unsigned i, int fd, unsigned events)
{
    if (i < w->cap)
        w->p[i] = (struct pollfd){.fd = fd, .events = poll_events(events)};
}

int op_io_waitset_wait(struct op_io_waitset *w, uint64_t deadline_ns)
{
    for (unsigned i = 0; i < w->cap; i++)
        w->p[i].revents = 0;
    return wait_poll(w->p, w->cap, deadline_ns);
}

unsigned op_io_waitset_ready(const struct op_io_waitset *w, unsigned i)
{
    short r = i < w->cap && w->p[i].fd >= 0 ? w->p[i].revents : 0;
    return (r & POLLIN ? OP_IO_IN : 0) | (r & POLLOUT ? OP_IO_OUT : 0) |
           (r & (POLLERR | POLLHUP | POLLNVAL) ? OP_IO_ERR : 0);
}

int op_io_wait_fd(int fd, unsigned events, uint64_t deadline_ns)
{
    return op_io_wait_fds(&fd, 1, events, deadline_ns);
}

uint64_t op_io_deadline_in_ms(int ms)
{
    return ms < 0 ? UINT64_MAX : op_now_ns() + (uint64_t)ms * OP_NS_PER_MS;
}
