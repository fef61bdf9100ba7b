/* The progress thread: drives the switch steps of nonblocking allreduces
 * (the leader's INC engines on the process's one port) while the program
 * computes, so a call overlaps with the work between MPI_Iallreduce and
 * MPI_Wait. It calls no MPI (the program may be MPI_THREAD_SINGLE): steps
 * that need MPI wait for the caller's next wrapped call (iallreduce.c).
 * It sleeps on a condition while no switch step runs: idle ranks cost
 * nothing on an oversubscribed machine. */
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "mpi_node.h"

/* A timer the caller's thread arms while this thread already waits in poll
 * is seen at most this late; packets wake it at once. */
#define TICK_NS (2 * OP_NS_PER_MS)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;  /* steps to drive, or stop */
static pthread_cond_t ended = PTHREAD_COND_INITIALIZER; /* a step ended */
static pthread_t thread;
static bool running, stopping;
static unsigned active; /* switch steps under way */
static void (*sweep)(void); /* what follows a progress: the nonblocking path's */

void opm_prog_lock(void) { pthread_mutex_lock(&lock); }
void opm_prog_unlock(void) { pthread_mutex_unlock(&lock); }

static void *loop(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    while (!stopping) {
        if (active == 0) {
            pthread_cond_wait(&work, &lock);
            continue;
        }
        pthread_mutex_unlock(&lock);
        op_inc_port_progress(opm.port, op_now_ns() + TICK_NS);
        pthread_mutex_lock(&lock);
        sweep();
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* Signals stay with the MPI's threads: this one takes none. */
static void start(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    running = pthread_create(&thread, NULL, loop, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void opm_prog_started(void (*fn)(void))
{
    sweep = fn;
    if (!running && !stopping)
        start();
    active++;
    pthread_cond_signal(&work);
}

void opm_prog_ended(void)
{
    active--;
    pthread_cond_broadcast(&ended);
}

/* Without the thread (it could not start) the caller drives the port. */
void opm_prog_sleep(uint64_t max_ns)
{
    if (!running) {
        pthread_mutex_unlock(&lock);
        op_inc_port_progress(opm.port, op_now_ns() + max_ns);
        pthread_mutex_lock(&lock);
        if (sweep != NULL)
            sweep();
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + max_ns;
    ts.tv_sec += (time_t)(ns / OP_NS_PER_S);
    ts.tv_nsec = (long)(ns % OP_NS_PER_S);
    pthread_cond_timedwait(&ended, &lock, &ts);
}

void opm_prog_stop(void)
{
    pthread_mutex_lock(&lock);
    stopping = true;
    pthread_cond_signal(&work);
    pthread_mutex_unlock(&lock);
    if (running)
        pthread_join(thread, NULL);
    running = false;
    stopping = false;
}
