/* DPDK under offpath: the EAL from a config struct (vdevs amended with an
 * XDP program), a port with its queues (RSS across them) and an
 * mbuf pool packed as the AF_XDP PMD needs it, the port's drops. Built
 * only where libdpdk is found, into a library the `offpath` binary links
 * (liboffpath and the MPI library never carry DPDK). The DNS models run
 * their lcores on it; the rx/tx bursts stay theirs until the port becomes
 * an op_io backend. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>

#include "offpath/io.h"

#define MAX_EAL_ARGS 128
#define MAX_XDP_VDEVS 8

struct op_io_dpdk {
    uint16_t port;
    uint8_t mac[6];
    struct rte_mempool *pool;
    bool started;
};

#define FAIL_IF(cond, ...) OP_FAIL_IF(cond, err, errlen, __VA_ARGS__)

/* An AF_XDP vdev without xdp_prog= gets the caller's program (the DNS
 * models': TCP and ARP replies to the kernel, the rest to DPDK). */
static char *with_xdp_prog(char *arg, const char *prog, char *buf, size_t n)
{
    const char *dev = strncmp(arg, "--vdev=", 7) == 0 ? arg + 7 : arg;
    if (prog == NULL || strncmp(dev, "net_af_xdp", 10) != 0 || strstr(dev, "xdp_prog=") != NULL ||
        access(prog, R_OK) != 0 || snprintf(buf, n, "%s,xdp_prog=%s", arg, prog) >= (int)n)
        return arg;
    return buf;
}

op_status_t op_io_dpdk_eal_init(const struct op_io_dpdk_config *c, char *err, size_t errlen)
{
    char name[64];
    char *argv[MAX_EAL_ARGS + 2];
    char vdev[MAX_XDP_VDEVS][512];
    FAIL_IF(c->n_eal_args < 0 || c->n_eal_args > MAX_EAL_ARGS, "too many EAL arguments");
    snprintf(name, sizeof name, "%s", c->name != NULL ? c->name : "offpath");
    argv[0] = name;
    for (int i = 0, k = 0; i < c->n_eal_args; i++) {
        char *arg = c->eal_args[i];
        argv[1 + i] = k < MAX_XDP_VDEVS ? with_xdp_prog(arg, c->xdp_prog, vdev[k], sizeof(vdev[k]))
                                        : arg;
        k += argv[1 + i] != arg;
    }
    argv[1 + c->n_eal_args] = NULL;
    /* no hugepages mounted or allowed (a container, a laptop): the EAL says
     * only "Permission denied" */
    bool no_huge = false;
    for (int i = 0; i < c->n_eal_args; i++)
        no_huge |= strcmp(c->eal_args[i], "--no-huge") == 0;
    FAIL_IF(rte_eal_init(1 + c->n_eal_args, argv) < 0, "EAL: %s%s", rte_strerror(rte_errno),
            !no_huge && (rte_errno == EACCES || rte_errno == ENOMEM)
                ? " (no usable hugepages? add --no-huge -m 512 to the EAL arguments)"
                : "");
    return OP_OK;
}

void op_io_dpdk_eal_cleanup(void) { rte_eal_cleanup(); }

unsigned op_io_dpdk_ports(void) { return rte_eth_dev_count_avail(); }

bool op_io_dpdk_lcore_shares_cpu(unsigned lcore)
{
    rte_cpuset_t mine = rte_lcore_cpuset(lcore);
    unsigned other;
    RTE_LCORE_FOREACH_WORKER(other)
    {
        rte_cpuset_t theirs = rte_lcore_cpuset(other), both;
        CPU_AND(&both, &mine, &theirs);
        if (other != lcore && CPU_COUNT(&both) > 0)
            return true;
    }
    return false;
}

static op_status_t port_setup(struct op_io_dpdk *p, const struct op_io_dpdk_config *c, char *err,
                              size_t errlen)
{
    struct rte_eth_dev_info info;
    unsigned nq = c->queues;
    FAIL_IF(rte_eth_dev_info_get(p->port, &info) != 0, "port %u: no device info", p->port);
    FAIL_IF(nq > info.max_rx_queues || nq > info.max_tx_queues,
            "port %u has %u RX/%u TX queues, %u needed (af_xdp: queue_count=N, af_packet: "
            "qpairs=N)", p->port, info.max_rx_queues, info.max_tx_queues, nq);
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof(conf));
    if (nq > 1) { /* RSS: a flow stays on one queue, so one lcore */
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf =
            (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
    }
    FAIL_IF(rte_eth_dev_configure(p->port, (uint16_t)nq, (uint16_t)nq, &conf) != 0,
            "port %u: configure with %u queues failed", p->port, nq);
    uint16_t rxd = (uint16_t)c->rx_desc, txd = (uint16_t)c->tx_desc;
    FAIL_IF(rte_eth_dev_adjust_nb_rx_tx_desc(p->port, &rxd, &txd) != 0, "descriptor counts");
    int sock = rte_eth_dev_socket_id(p->port);
    for (unsigned q = 0; q < nq; q++) {
        FAIL_IF(rte_eth_rx_queue_setup(p->port, (uint16_t)q, rxd, (unsigned)sock, NULL,
                                       p->pool) != 0, "RX queue %u setup failed", q);
        FAIL_IF(rte_eth_tx_queue_setup(p->port, (uint16_t)q, txd, (unsigned)sock, NULL) != 0,
                "TX queue %u setup failed", q);
    }
    FAIL_IF(rte_eth_dev_start(p->port) != 0, "port %u: start failed", p->port);
    p->started = true;
    struct rte_ether_addr mac;
    FAIL_IF(rte_eth_macaddr_get(p->port, &mac) != 0, "port %u: no MAC address", p->port);
    memcpy(p->mac, mac.addr_bytes, 6);
    return OP_OK;
}

/* The AF_XDP PMD (DPDK 22.11) registers the pool as its UMEM assuming the
 * objects are packed from the first one: populated_size x object size. A
 * default pool without hugepages puts each object on its own 4 KiB page
 * (objects may not straddle pages), so the last ~40% of the mbufs lie
 * past the UMEM: the kernel takes their fill-ring entries as invalid and
 * drops them silently (no XDP_STATISTICS counter shows it). Light load
 * recycles a few hundred cached mbufs and never meets them; an overload
 * cycles the whole pool, every fill entry is lost within a second, and RX
 * stops for good (the PMD refills only for frames it receives). So for
 * that PMD the pool is packed: no page constraint (it does no DMA by IOVA). */
static struct rte_mempool *pool_packed(const struct op_io_dpdk_config *c, const char *name)
{
    struct rte_pktmbuf_pool_private priv = {.mbuf_data_room_size = RTE_MBUF_DEFAULT_BUF_SIZE};
    struct rte_mempool *mp = rte_mempool_create_empty(
        name, c->mbufs, sizeof(struct rte_mbuf) + RTE_MBUF_DEFAULT_BUF_SIZE,
        c->mbuf_cache, sizeof(priv), (int)rte_socket_id(), RTE_MEMPOOL_F_NO_IOVA_CONTIG);
    if (mp == NULL)
        return NULL;
    if (rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL) != 0) {
        rte_mempool_free(mp);
        return NULL;
    }
    rte_pktmbuf_pool_init(mp, &priv);
    if (rte_mempool_populate_default(mp) < 0) {
        rte_mempool_free(mp);
        return NULL;
    }
    rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
    return mp;
}

struct packed_check {
    uintptr_t base;
    size_t size;
    bool packed;
};

static void packed_obj(struct rte_mempool *mp, void *arg, void *obj, unsigned idx)
{
    struct packed_check *c = arg;
    (void)mp;
    if ((uintptr_t)obj != c->base + (size_t)idx * c->size)
        c->packed = false;
}

/* Is object i exactly at the first object + i x its size? */
static bool pool_is_packed(struct rte_mempool *mp)
{
    const struct rte_mempool_memhdr *h = STAILQ_FIRST(&mp->mem_list);
    struct packed_check c = {
        .base = (uintptr_t)h->addr + mp->header_size,
        .size = rte_mempool_calc_obj_size(mp->elt_size, mp->flags, NULL),
        .packed = mp->nb_mem_chunks == 1};
    rte_mempool_obj_iter(mp, packed_obj, &c);
    return c.packed;
}

static bool port_is_af_xdp(uint16_t port)
{
    struct rte_eth_dev_info info;
    return rte_eth_dev_info_get(port, &info) == 0 && info.driver_name != NULL &&
           strcmp(info.driver_name, "net_af_xdp") == 0;
}

static op_status_t pool_setup(struct op_io_dpdk *p, const struct op_io_dpdk_config *c, char *err,
                              size_t errlen)
{
    bool af_xdp = port_is_af_xdp(p->port);
    char name[RTE_MEMPOOL_NAMESIZE]; /* a pool a port: names are the EAL's keys */
    snprintf(name, sizeof name, "ofio_mbufs%u", p->port);
    p->pool = af_xdp ? pool_packed(c, name)
                     : rte_pktmbuf_pool_create(name, c->mbufs, c->mbuf_cache, 0,
                                               RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
    FAIL_IF(p->pool == NULL, "mbuf pool of %u: %s", c->mbufs, rte_strerror(rte_errno));
    FAIL_IF(af_xdp && !pool_is_packed(p->pool),
            "mbuf pool of %u is not one packed run (the AF_XDP PMD would lose the mbufs "
            "past it): give EAL more memory (-m)", c->mbufs);
    return OP_OK;
}

op_status_t op_io_dpdk_port_open(const struct op_io_dpdk_config *c, struct op_io_dpdk **out,
                                 char *err, size_t errlen)
{
    struct op_io_dpdk *p = calloc(1, sizeof(*p));
    FAIL_IF(p == NULL, "out of memory");
    *out = p; /* op_io_dpdk_close undoes what was set up, whatever failed */
    uint16_t pid;
    unsigned k = 0;
    bool found = false;
    RTE_ETH_FOREACH_DEV(pid)
    {
        if ((found = k++ == c->port)) {
            p->port = pid;
            break;
        }
    }
    FAIL_IF(!found, "no DPDK port %u: the EAL found %u (give each a --vdev or an -a)", c->port, k);
    op_status_t st = pool_setup(p, c, err, errlen);
    return st == OP_OK ? port_setup(p, c, err, errlen) : st;
}

uint16_t op_io_dpdk_port_id(const struct op_io_dpdk *p) { return p->port; }

/* iface=IF among a device's comma-separated arguments */
static void iface_arg(const char *args, char *iface, size_t cap)
{
    for (const char *a = args; a != NULL; a = strchr(a, ',')) {
        a += *a == ',';
        if (strncmp(a, "iface=", 6) == 0) {
            snprintf(iface, cap, "%.*s", (int)strcspn(a + 6, ","), a + 6);
            return;
        }
    }
}

void op_io_dpdk_port_names(const struct op_io_dpdk *p, char *dev, char *iface, size_t cap)
{
    struct rte_eth_dev_info info;
    dev[0] = iface[0] = '\0';
    if (rte_eth_dev_info_get(p->port, &info) != 0 || info.device == NULL)
        return;
    snprintf(dev, cap, "%s", rte_dev_name(info.device));
    const struct rte_devargs *da = rte_dev_devargs(info.device);
    if (da != NULL)
        iface_arg(da->args, iface, cap);
}

unsigned op_io_dpdk_rx(const struct op_io_dpdk *p, uint16_t q, struct rte_mbuf **m, unsigned n)
{
    return rte_eth_rx_burst(p->port, q, m, (uint16_t)n);
}

unsigned op_io_dpdk_tx(const struct op_io_dpdk *p, uint16_t q, struct rte_mbuf **m, unsigned n)
{
    return rte_eth_tx_burst(p->port, q, m, (uint16_t)n);
}

void op_io_dpdk_mac(const struct op_io_dpdk *p, uint8_t mac[6]) { memcpy(mac, p->mac, 6); }

struct rte_mempool *op_io_dpdk_pool(const struct op_io_dpdk *p) { return p->pool; }

void op_io_dpdk_stats(const struct op_io_dpdk *p, struct op_io_dpdk_drops *out)
{
    struct rte_eth_stats st;
    *out = (struct op_io_dpdk_drops){0};
    if (p == NULL || !p->started || rte_eth_stats_get(p->port, &st) != 0)
        return;
    *out = (struct op_io_dpdk_drops){.imissed = st.imissed, .rx_nombuf = st.rx_nombuf,
                                     .oerrors = st.oerrors};
}

void op_io_dpdk_close(struct op_io_dpdk *p)
{
    if (p == NULL)
        return;
    if (p->started) {
        rte_eth_dev_stop(p->port);
        rte_eth_dev_close(p->port); /* af_xdp detaches its XDP program here */
    }
    rte_mempool_free(p->pool);
    free(p);
}
