/* Internal to src/switch: the switch on the path (path.c) and its ports'
 * shaped egress (shape.c). */
#ifndef OFFPATH_SWITCH_PATH_INTERNAL_H
#define OFFPATH_SWITCH_PATH_INTERNAL_H

#include "offpath/loop.h"
#include "offpath/switch.h"

#define PATH_TABLE 1024 /* slots of the route table (a power of two > 2 x routes) */

/* A port's egress at the link's rate: a virtual clock (when the link is
 * free again) and a FIFO of frames held, byte-limited as tbf's is. The
 * frames keep their buffers: a slot parks the buffer it gave in exchange. */
struct path_shaper {
    struct op_frame *ring;
    uint64_t *held_at;  /* when each frame came to the queue */
    /* buffers not holding a frame, the latest freed on top: the next frame
     * is copied into one still in the cache, not one 4096 frames cold */
    uint8_t **spare;
    uint32_t n_spare;
    struct op_pktbuf mem;
    uint32_t head, n, cap;
    uint64_t bytes;   /* held */
    uint64_t free_at; /* the link is busy until then */
    uint64_t burst_ns;
    uint64_t down_from, down_until; /* the link taken down (0, 0: never) */
    struct op_frame batch[OP_IO_BURST];
};

struct op_sw_path;

struct sw_port {
    struct op_sw_path *path;
    int index;
    struct op_sw_port_config cfg;
    struct op_io *io; /* cfg.io or the af_xdp one, under a fault layer when asked */
    struct op_io *base; /* the backend itself, below the fault layer */
    struct op_loop *loop;
    struct op_frameq *fq; /* the loop's: what leaves by this port */
    uint8_t mac[6], peer_mac[6];
    bool peer_known, has_peer6;
    uint64_t asked_at;
    struct path_shaper sh;
    uint64_t c[OP_SW_PATH_C_COUNT_];
};

struct op_sw_path {
    struct op_sw_path_config cfg;
    bool has_own6;
    uint16_t table[PATH_TABLE]; /* route index + 1; 0 free */
    struct sw_port port[OP_SW_MAX_PORTS];
    struct op_loop *loops[OP_SW_MAX_PORTS];
    struct op_sw *sw;
    struct op_pktbuf inc_mem; /* the engine's output */
    struct op_txq incq;
    struct op_rng rx_loss; /* the ports' rx_drop_rate */
};

op_status_t path_shape_init(struct sw_port *pt, uint64_t now);
/* the link's down window from now (the port's down_after_ms on) */
void path_shape_down_from(struct sw_port *pt, uint64_t now);
void path_shape_free(struct sw_port *pt);
/* The loop's flush: the link down drops, a shaped port queues and sends
 * what its rate allows, another sends at once. */
void path_shape_flush(void *ctx, struct op_io *io, struct op_frameq *q);
/* What the rate allows now leaves. */
void path_shape_release(struct sw_port *pt, uint64_t now);
uint64_t path_shape_deadline(const struct sw_port *pt);

#endif
