/* Bounded waits on descriptors: the one place below the drivers that
 * sleeps in ppoll, for what is not a packet loop (a control socket, a pipe,
 * a timerfd, a peer's TCP side channel). */
#include <errno.h>
#include <poll.h>
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

int op_io_wait_fds(const int *fds, int n, unsigned events, uint64_t deadline_ns)
{
    struct pollfd p[OP_IO_WAIT_MAX_FDS];
    short ev = (short)((events & OP_IO_IN ? POLLIN : 0) | (events & OP_IO_OUT ? POLLOUT : 0));
    if (n < 0 || n > OP_IO_WAIT_MAX_FDS)
        return -EINVAL;
    for (int i = 0; i < n; i++)
        p[i] = (struct pollfd){.fd = fds[i], .events = ev};
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

int op_io_wait_fd(int fd, unsigned events, uint64_t deadline_ns)
{
    return op_io_wait_fds(&fd, 1, events, deadline_ns);
}

uint64_t op_io_deadline_in_ms(int ms)
{
    return ms < 0 ? UINT64_MAX : op_now_ns() + (uint64_t)ms * OP_NS_PER_MS;
}
