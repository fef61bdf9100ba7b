/* Adaptive retransmission: round trips measured on the requester's own
 * traffic set a probe timer far shorter than the configured one (a tail
 * loss, which no later packet can reveal, otherwise waits the full
 * 4.096 us * 2^timeout: 67 ms at perftest's default). A probe goes back to
 * the oldest unacknowledged PSN like a timeout, but uses no retry: how long
 * a QP tries before RETRY_EXC_ERR stays what timeout and retry_cnt say. */
#include "rdma_internal.h"

#define PROBE_MIN_NS (1 * OP_NS_PER_MS)   /* this machine stalls for ms at times */
#define PROBE_FIRST_NS (4 * OP_NS_PER_MS) /* before any round trip was measured */
#define PROBE_MAX_DOUBLINGS 16
#define PROBE_FLOOR_MAX_NS (32 * OP_NS_PER_MS) /* a needless probe raises the floor to this at most */

/* Karn: only a PSN sent once and answered at once (it asks for an ACK, or
 * it is a READ request: the response is its ACK) is timed. */
void rdma_probe_sent(struct rdma_req *r, uint32_t psn, bool answered, bool resend, uint64_t now)
{
    if (!answered || resend || r->sampling)
        return;
    r->sampling = true;
    r->sample_psn = psn;
    r->sample_at = now;
}

/* una moved to r->una: the timed PSN is in if una passed it (RFC 6298). */
void rdma_probe_acked(struct rdma_req *r, uint64_t now)
{
    r->probes_in_row = 0;
    if (!r->sampling || psn_diff(r->una, r->sample_psn) <= 0)
        return;
    r->sampling = false;
    uint64_t rtt = now - r->sample_at;
    if (r->srtt_ns == 0) {
        r->srtt_ns = rtt ? rtt : 1;
        r->rttvar_ns = rtt / 2;
        return;
    }
    uint64_t err = rtt > r->srtt_ns ? rtt - r->srtt_ns : r->srtt_ns - rtt;
    r->rttvar_ns = (3 * r->rttvar_ns + err) / 4;
    r->srtt_ns = (7 * r->srtt_ns + rtt) / 8;
}

/* The timeout before any doubling. */
static uint64_t probe_base(const struct rdma_req *r)
{
    uint64_t base = r->srtt_ns ? r->srtt_ns + 4 * r->rttvar_ns : PROBE_FIRST_NS;
    uint64_t floor = r->probe_floor_ns > PROBE_MIN_NS ? r->probe_floor_ns : PROBE_MIN_NS;
    return base > floor ? base : floor;
}

uint64_t rdma_probe_timeout(const struct rdma_req *r)
{
    uint64_t base = probe_base(r);
    unsigned d = r->probes_in_row < PROBE_MAX_DOUBLINGS ? r->probes_in_row : PROBE_MAX_DOUBLINGS;
    return base << d;
}

/* Armed while PSNs are outstanding and the probe would come before the
 * configured timer (timeout 0, "no timer", also means no probe). */
void rdma_probe_arm(struct rdma_req *r, bool outstanding, uint64_t now)
{
    uint64_t t = rdma_probe_timeout(r);
    r->probe_at = outstanding && r->rto_ns != 0 && t < r->rto_ns ? now + t : UINT64_MAX;
}

/* The peer answered other QPs since it last answered this one: this QP's
 * silence is most likely its packets queued behind theirs (16 QPs keep
 * megabytes in flight on one socket), not a loss. Probe once the device has
 * heard nothing for a probe timeout. Returns when to look again, or 0 to
 * probe now. */
uint64_t rdma_probe_defer(const struct rdma_req *r, uint64_t dev_last_response_at, uint64_t now)
{
    uint64_t quiet_until = dev_last_response_at + rdma_probe_timeout(r);
    if (dev_last_response_at <= r->last_response_at || quiet_until <= now)
        return 0;
    return quiet_until;
}

/* The caller goes back to una (which also stops any sample: Karn) with
 * the oldest packet alone in flight; the window it had is kept until an
 * ACK or a NAK settles whether the probe was needed (req.c). */
void rdma_probe_fired(struct rdma_req *r)
{
    r->probe_at = UINT64_MAX;
    if (r->probes_in_row < PROBE_MAX_DOUBLINGS)
        r->probes_in_row++;
    if (!r->undo_armed)
        r->undo_window = r->window;
    r->undo_armed = true;
}

/* A probe proved needless: the peer was late, not lossy (on a loaded
 * machine its process waits milliseconds for a core, longer than the
 * measured round trip). No probe comes sooner than twice this one's base
 * again, up to PROBE_FLOOR_MAX_NS. */
void rdma_probe_needless(struct rdma_req *r)
{
    uint64_t floor = 2 * probe_base(r);
    r->probe_floor_ns = floor < PROBE_FLOOR_MAX_NS ? floor : PROBE_FLOOR_MAX_NS;
}
