/* libFuzzer target for the CM parser and exchange: the input's first byte
 * is control (bit 0: seal the ICRC so the MAD is reached; bit 1: deliver to
 * the active side instead of the passive one; bit 2: the connections are
 * UD, resolved by SIDR_REQ / SIDR_REP, beside an RC listener; bit 3: the
 * listener of several clients reads it on a socket of every address), the
 * rest a RoCEv2 payload to QP 1; the listener of several clients gets it
 * too (a refusal it builds must decode). Properties: the MAD decoder never reads past its input, what decodes
 * re-encodes to a MAD that decodes to the same message, and the CM engine
 * survives any input (ASan/UBSan find the rest). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/rdmasim.h"
#include "offpath/wire/cm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond)
        abort();
}

static void mad_round_trip(const uint8_t *mad, size_t len)
{
    struct op_cm_msg m, again;
    enum op_cm_err why;
    uint8_t b[OP_CM_MAD_LEN];
    if (op_cm_mad_decode(mad, len, &m, &why) != OP_OK) {
        require(why != OP_CM_E_ok);
        return;
    }
    op_cm_mad_encode(&m, b);
    require(op_cm_mad_decode(b, sizeof b, &again, &why) == OP_OK);
    require(memcmp(&m, &again, sizeof m) == 0);
}

static void listener_input(const struct op_pkt *in, bool wildcard)
{
    struct op_rdma_cm_listener *l;
    uint8_t rbuf[OP_IO_BUF_SIZE];
    struct op_pkt p = *in, reply = {.data = rbuf};
    uint32_t client;
    if (wildcard)
        p.flow.dst.v4 = 0;
    require(op_rdma_cm_listener_create(OP_ROCE_UDP_PORT, 1, &l) == OP_OK);
    for (int i = 0; i < 3; i++) { /* a new client, the same again, then full */
        if (op_rdma_cm_listener_input(l, &p, &reply, &client) == OP_RDMA_CM_REFUSED) {
            struct op_cm_msg m;
            enum op_cm_err why;
            require(op_cm_packet_decode(&reply.flow, reply.data, reply.len, &m, &why) == OP_OK);
        }
        p.flow.src_port = (uint16_t)(p.flow.src_port + (i == 1));
    }
    op_rdma_cm_listener_destroy(l);
}

static bool never(void *arg)
{
    (void)arg;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > OP_IO_BUF_SIZE)
        return 0;
    uint8_t ctl = data[0], buf[OP_IO_BUF_SIZE];
    size_t len = size - 1;
    memcpy(buf, data + 1, len);
    mad_round_trip(buf, len);
    if (len > OP_BTH_LEN + OP_DETH_LEN)
        mad_round_trip(buf + OP_BTH_LEN + OP_DETH_LEN, len - OP_BTH_LEN - OP_DETH_LEN);

    struct rsim s;
    struct op_rdma_cm *a, *b;
    rsim_init(&s, 7);
    const struct op_rdma_cm_config cfg = {.nconn = 2, .retry_ns = OP_NS_PER_MS, .max_retries = 2};
    require(op_rdma_cm_create(s.dev[0], &cfg, &a) == OP_OK);
    require(op_rdma_cm_create(s.dev[1], &cfg, &b) == OP_OK);
    const struct op_rdma_cm_side side = {.qpn = 0x11, .psn = 1, .mtu = 1024};
    struct op_rdma_cm_side ud = side;
    ud.transport = OP_RDMA_CM_UD;
    ud.qkey = 0x11111111u;
    bool sidr = (ctl & 4) != 0;
    require(op_rdma_cm_listen(b, 0, &side) == OP_OK &&
            op_rdma_cm_listen(b, 1, sidr ? &ud : &side) == OP_OK);
    s.link[0].dead = true; /* the input is the only thing the passive side hears */
    require(op_rdma_cm_connect(a, 0, sidr ? &ud : &side, RSIM_IP_B, OP_ROCE_UDP_PORT, 0, &s.q) ==
            OP_OK);
    bool to_active = (ctl & 2) != 0;
    struct op_pkt p = {.flow = {.src.v4 = to_active ? RSIM_IP_B : RSIM_IP_A,
                                .dst.v4 = to_active ? RSIM_IP_A : RSIM_IP_B,
                                .src_port = OP_ROCE_UDP_PORT, .dst_port = OP_ROCE_UDP_PORT},
                       .data = buf, .len = (uint32_t)len};
    if (len >= OP_BTH_LEN) /* to QP 1 whatever the input says, or the device drops it first */
        buf[5] = buf[6] = 0, buf[7] = OP_CM_GSI_QPN;
    if ((ctl & 1) && len >= OP_ICRC_LEN)
        (void)op_icrc_seal(&p.flow, buf, len - OP_ICRC_LEN, sizeof buf);
    listener_input(&p, (ctl & 8) != 0);
    rsim_deliver(&s, &p);
    (void)rsim_run(&s, never, NULL, 10 * OP_NS_PER_MS);
    for (uint32_t i = 0; i < 2; i++)
        require(op_rdma_cm_error(a, i) != NULL && op_rdma_cm_error(b, i) != NULL);
    rsim_free(&s);
    return 0;
}
