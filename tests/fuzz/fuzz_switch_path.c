/* libFuzzer target for the switch on the path (op_sw_path_*): any frames on
 * any of three ports, an INC engine above. Input: records of a byte (the
 * port: its value mod 3), a 16-bit length (little-endian, cut to what is
 * left and to 2048) and the frame's bytes; the path runs after every 8.
 * Properties: nothing crashes; on every port each frame received is
 * counted once (control, forwarded, to_inc or a drop); every frame sent
 * leaves with that port's MAC as its source and a whole Ethernet header. */
#include <stdlib.h>
#include <string.h>

#include "../unit/frame_mock.h"
#include "offpath/switch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PORTS 3

static void require(int cond)
{
    if (!cond)
        abort();
}

static void config(struct op_sw_path_config *c, struct mock *m[PORTS])
{
    static const uint8_t own6[16] = {0xfd, [15] = 0xfe}, peer6[16] = {0xfd, [15] = 1};
    memset(c, 0, sizeof *c);
    c->own4 = op_addr_ipv4(0x0a0000feu);
    c->own6 = op_addr_ipv6(own6);
    c->inc_port = 4791;
    c->n_ports = PORTS;
    for (int i = 0; i < PORTS; i++) {
        const uint8_t mac[6] = {2, 0, 0, 0, 0, (uint8_t)(0xa0 + i)};
        m[i] = mock_new_mac(mac);
        c->ports[i].io = &m[i]->io;
        c->ports[i].peer4 = op_addr_ipv4(0x0a000001u + (uint32_t)i);
        c->routes[c->n_routes].dst = c->ports[i].peer4;
        c->routes[c->n_routes].n_ports = 1;
        c->routes[c->n_routes++].ports[0] = (uint8_t)i;
    }
    c->ports[0].peer6 = op_addr_ipv6(peer6);
    c->routes[c->n_routes].dst = c->ports[0].peer6;
    c->routes[c->n_routes].n_ports = 1;
    c->routes[c->n_routes++].ports[0] = 0;
    struct op_sw_route *far = &c->routes[c->n_routes++];
    far->dst = op_addr_ipv4(0x0a000063u);
    far->n_ports = 2;
    far->ports[0] = 1;
    far->ports[1] = 2;
    c->ports[2].rate_bps = 1000000000; /* one shaped port */
    c->ports[2].queue_bytes = 65536;
}

static void check(struct op_sw_path *p, struct mock *m[PORTS])
{
    for (int i = 0; i < PORTS; i++) {
        uint64_t v[OP_SW_PATH_C_COUNT_];
        op_sw_path_counters(p, i, v);
        uint64_t fates = v[OP_SW_PATH_C_control] + v[OP_SW_PATH_C_forwarded] +
                         v[OP_SW_PATH_C_to_inc] + v[OP_SW_PATH_C_drop_no_route] +
                         v[OP_SW_PATH_C_drop_no_neigh] + v[OP_SW_PATH_C_drop_ttl] +
                         v[OP_SW_PATH_C_drop_local] + v[OP_SW_PATH_C_drop_other] +
                         v[OP_SW_PATH_C_drop_injected];
        require(v[OP_SW_PATH_C_rx_frames] == fates);
        require(v[OP_SW_PATH_C_rx_frames] == (uint64_t)m[i]->in_at);
        for (int k = 0; k < m[i]->n_out; k++)
            require(m[i]->out_len[k] >= 14 && memcmp(m[i]->out[k] + 6, m[i]->io.mac, 6) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct op_topo topo;
    static bool topo_ok;
    if (!topo_ok) {
        char err[128];
        require(op_topo_parse("tor t1 10.0.0.254 hosts 10.0.0.1-10.0.0.3\n", &topo, err,
                              sizeof err) == OP_OK);
        topo_ok = true;
    }
    struct op_sw_config sc;
    op_sw_config_default(&sc);
    sc.topo = &topo;
    struct op_sw *sw = NULL;
    require(op_sw_create(&sc, &sw) == OP_OK);
    struct op_sw_path_config *c = malloc(sizeof *c);
    struct mock *m[PORTS];
    require(c != NULL);
    config(c, m);
    struct op_sw_path *p = NULL;
    char err[256];
    require(op_sw_path_create(c, sw, NULL, &p, err, sizeof err) == OP_OK);
    size_t at = 0;
    for (int rec = 0; at + 3 <= size && rec < 256; rec++) {
        struct mock *to = m[data[at] % PORTS];
        size_t len = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;
        at += 3;
        len = len > size - at ? size - at : len;
        len = len > 2048 ? 2048 : len;
        memcpy(to->in[to->n_in], data + at, len);
        to->in_len[to->n_in++] = (uint32_t)len;
        at += len;
        if (rec % 8 == 7)
            (void)op_sw_path_run_once(p, 0);
    }
    (void)op_sw_path_run_once(p, 0);
    check(p, m);
    op_sw_path_destroy(p);
    op_sw_destroy(sw);
    free(c);
    return 0;
}
