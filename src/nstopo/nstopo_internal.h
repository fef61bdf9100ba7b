/* Internal to src/nstopo: the processes `topo up` starts in the namespaces
 * and `down` stops (daemons.c), for run.c. */
#ifndef OFFPATH_NSTOPO_INTERNAL_H
#define OFFPATH_NSTOPO_INTERNAL_H

#include <stddef.h>

#include "offpath/nstopo.h"

#define NSTOPO_STATE_DIR "/run/offpath"

/* A switch on the path in every TOR and SPINE namespace (extra: more of
 * its options, NULL-terminated, or NULL), each ready before the next
 * starts; how many, or -1 (said on stderr) when one did not. */
int nstopo_start_switches(const struct op_nstopo *t, const char *file, char *const *extra);
/* Where a node's switch writes its output (ext "log") and its counters
 * (ext "json"). */
void nstopo_daemon_file(const struct op_nstopo *t, int node, const char *ext, char *out,
                        size_t len);
/* SIGTERM to every process in netns ns, SIGKILL to those left after 2 s;
 * how many there were. */
int nstopo_stop_processes(const char *ns);

#endif
