/* libFuzzer target for the rescue messages leaders exchange (a peer's
 * datagrams reach this decoder from the network). Properties: nothing
 * crashes; a message the decoder takes keeps its data inside the input and
 * encodes back to exactly the input's bytes (nothing is accepted that the
 * encoder would not write); the decision over peers built from it stays one
 * of the five verdicts. */
#include <stdlib.h>
#include <string.h>

#include "offpath/rescue.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct op_rsc_msg m;
    if (op_rsc_decode(data, size, &m) != OP_OK)
        return 0;
    require(m.data >= data && m.data + m.len <= data + size);
    uint8_t out[OP_RSC_MAX_MSG];
    size_t n = op_rsc_encode(&m, out, sizeof(out));
    require(n == size && memcmp(out, data, size) == 0);
    struct op_rsc_peer p = {.answered = true, .state = m.state, .seq = m.seq,
                            .completed = m.completed, .total = m.total, .in_call_ms = m.offset};
    int from = -1;
    enum op_rsc_verdict v = op_rsc_decide(&p, 1, m.seq, m.type == OP_RSC_DATA, m.len, &from);
    require(v <= OP_RSC_REDO && (v != OP_RSC_FETCH || from == 0));
    return 0;
}
