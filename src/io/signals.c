/* The stop and report signals of a long-running driver (a switch, the
 * benchmark relay) as a descriptor its poll waits on with the socket. */
#include <signal.h>
#include <sys/signalfd.h>

#include "offpath/io.h"

int op_io_signalfd_open(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
        return -1;
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}
