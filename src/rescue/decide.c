/* The leaders' decision on a call some could not finish (offpath/rescue.h).
 * Every input is an answer a peer gave; a state once left is never entered
 * again for the same call (in the call -> completed or gave up; gave up ->
 * redone), which is what makes the outcomes exclusive: a call is redone only
 * if every leader gave it up, and then none can have completed it through
 * the switch, so none fetches it; a call anyone completed through the switch
 * is never given up by all, so none redoes it. */
#include "offpath/rescue.h"

static const char *const verdict_names[] = {
    [OP_RSC_FETCH] = "fetch", [OP_RSC_WAIT_PEER] = "wait for a late peer",
    [OP_RSC_GIVE_UP] = "give up", [OP_RSC_HOLD] = "hold", [OP_RSC_REDO] = "redo",
};

const char *op_rsc_verdict_name(enum op_rsc_verdict v)
{
    return (unsigned)v <= OP_RSC_REDO ? verdict_names[v] : "?";
}

static bool gave_up(const struct op_rsc_peer *p, uint64_t seq)
{
    return p->answered && p->state == OP_RSC_GAVE_UP && p->seq == seq;
}

/* In the call long enough that the switch would have answered it. */
static bool waited_in_call(const struct op_rsc_peer *p, uint64_t seq, uint32_t patience_ms)
{
    return p->answered && p->state == OP_RSC_IN_CALL && p->seq == seq &&
           p->in_call_ms >= patience_ms;
}

enum op_rsc_verdict op_rsc_decide(const struct op_rsc_peer *peers, int n, uint64_t seq,
                                  bool self_gave_up, uint32_t patience_ms, int *from)
{
    int all_gave_up = 1, all_there = 1, any_gave_up = 0;
    for (int i = 0; i < n; i++) {
        const struct op_rsc_peer *p = &peers[i];
        if (p->answered && p->completed >= seq) {
            *from = i;
            return OP_RSC_FETCH;
        }
        all_gave_up &= gave_up(p, seq);
        any_gave_up |= gave_up(p, seq);
        all_there &= gave_up(p, seq) || waited_in_call(p, seq, patience_ms);
    }
    if (self_gave_up)
        return all_gave_up ? OP_RSC_REDO : OP_RSC_HOLD;
    /* everyone has waited for the switch as long as it should take, or
     * someone already stopped waiting: the switch will not finish this call */
    if (any_gave_up || all_there)
        return OP_RSC_GIVE_UP;
    return OP_RSC_WAIT_PEER;
}
