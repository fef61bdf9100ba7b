/* Internal to liboffpath_mpi, its second level: a communicator's state
 * (its node and leader groups, the leaders' switch group, the rescue
 * entry), attached as an MPI attribute. The parts the levels above own are
 * set up and freed through struct opm_comm_parts (mpi_base.h says why). */
#ifndef OFFPATH_MPI_COMM_H
#define OFFPATH_MPI_COMM_H

#include "mpi_base.h"

struct opm_comm_parts {
    void (*node_setup)(struct opm_comm *c);   /* a communicator of several nodes */
    bool (*host_join)(struct opm_comm *c);    /* Host mode's leaders, collective over them */
    void (*free)(struct opm_comm *c);         /* everything they added, as c goes */
};
/* Before the first opm_comm_setup (MPI_Init). */
void opm_comm_parts_set(const struct opm_comm_parts *parts);
void opm_comm_setup(MPI_Comm comm);
bool opm_leader_join(struct opm_comm *c); /* collective over c->leaders */
uint16_t opm_rescue_port(void);
uint16_t opm_data_fits(size_t prefix, uint16_t max); /* 0: no limit */
int opm_comm_delete(MPI_Comm comm, int keyval, void *attr, void *extra);
struct opm_comm *opm_comm_get(MPI_Comm comm);
void opm_comm_release_all(void); /* collective over COMM_WORLD, as MPI_Finalize */

#endif
