/* The XDP side of the af_xdp backends: an XSKMAP with a slot per queue, a
 * program that hands the queue's socket the UDP datagrams to our address
 * and port of either family (all else, ARP and the side channel's TCP
 * included, goes on to the kernel) or, for a whole port, every frame,
 * attached through a BPF link so that it goes away with the process however
 * the process ends. Raw bpf(2): the programs are at most 28 instructions,
 * small enough to write out, so building needs no BPF compiler and no libbpf. */
#include <errno.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "xdp_internal.h"

#define INSN(c, d, s, o, i)                                                                        \
    ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})
#define MOV64_REG(d, s) INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV64_IMM(d, i) INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define ADD64_IMM(d, i) INSN(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
#define LDX(size, d, s, o) INSN(BPF_LDX | BPF_MEM | (size), d, s, o, 0)
#define JGT_REG(d, s, o) INSN(BPF_JMP | BPF_JGT | BPF_X, d, s, o, 0)
#define JNE32_IMM(d, i, o) INSN(BPF_JMP32 | BPF_JNE | BPF_K, d, 0, o, i)
#define LD_MAP_FD(d, fd) INSN(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd), INSN(0, 0, 0, 0, 0)
#define CALL(f) INSN(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define EXIT() INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

#define R0 0
#define R1 1
#define R2 2
#define R3 3
#define R4 4
#define R5 5
#define R6 6

static long sys_bpf(int cmd, union bpf_attr *a)
{
    return syscall(__NR_bpf, cmd, a, sizeof(*a));
}

/* Loads of packet bytes are in network order on a little-endian machine:
 * compare against the byte-swapped constant. */
static int32_t wire16(uint16_t v) { return (int32_t)__builtin_bswap16(v); }
static int32_t wire32(uint32_t v) { return (int32_t)__builtin_bswap32(v); }

/* The tail every program shares: redirect to xsks_map[rx_queue] (XDP_PASS
 * when the slot is empty); R6 holds the context. */
#define REDIRECT_TAIL(map_fd)                                                                      \
    LDX(BPF_W, R2, R6, 16), /* rx_queue_index */                                                   \
        LD_MAP_FD(R1, map_fd), MOV64_IMM(R3, XDP_PASS), CALL(BPF_FUNC_redirect_map), EXIT()

/* IPv4 without options, UDP, to ip:port. Fragments never match: RoCEv2
 * is sent DF. */
static size_t program_v4(struct bpf_insn *out, int map_fd, uint32_t ip, uint16_t port)
{
    enum { PASS = 22 }; /* index of the pass branch */
    const struct bpf_insn prog[] = {
        /* 0 */ MOV64_REG(R6, R1),
        /* 1 */ LDX(BPF_W, R2, R6, 0), /* data */
        /* 2 */ LDX(BPF_W, R3, R6, 4), /* data_end */
        /* 3 */ MOV64_REG(R4, R2),
        /* 4 */ ADD64_IMM(R4, 42),
        /* 5 */ JGT_REG(R4, R3, PASS - 6),
        /* 6 */ LDX(BPF_H, R5, R2, 12),
        /* 7 */ JNE32_IMM(R5, wire16(0x0800), PASS - 8),
        /* 8 */ LDX(BPF_B, R5, R2, 14),
        /* 9 */ JNE32_IMM(R5, 0x45, PASS - 10),
        /* 10 */ LDX(BPF_B, R5, R2, 23),
        /* 11 */ JNE32_IMM(R5, 17, PASS - 12),
        /* 12 */ LDX(BPF_H, R5, R2, 36),
        /* 13 */ JNE32_IMM(R5, wire16(port), PASS - 14),
        /* 14 */ LDX(BPF_W, R5, R2, 30),
        /* 15 */ JNE32_IMM(R5, wire32(ip), PASS - 16),
        /* 16 */ REDIRECT_TAIL(map_fd),
        /* 22 */ MOV64_IMM(R0, XDP_PASS),
        /* 23 */ EXIT(),
    };
    _Static_assert(sizeof prog / sizeof prog[0] == PASS + 2, "PASS is the pass branch");
    memcpy(out, prog, sizeof prog);
    return sizeof prog / sizeof prog[0];
}

/* IPv6 with UDP as the first header, to [ip6]:port. */
static size_t program_v6(struct bpf_insn *out, int map_fd, const uint8_t ip6[16], uint16_t port)
{
    enum { PASS = 26 };
    uint32_t w[4];
    memcpy(w, ip6, 16); /* loads of packet words compare against the same bytes */
    const struct bpf_insn prog[] = {
        /* 0 */ MOV64_REG(R6, R1),
        /* 1 */ LDX(BPF_W, R2, R6, 0),
        /* 2 */ LDX(BPF_W, R3, R6, 4),
        /* 3 */ MOV64_REG(R4, R2),
        /* 4 */ ADD64_IMM(R4, 62),
        /* 5 */ JGT_REG(R4, R3, PASS - 6),
        /* 6 */ LDX(BPF_H, R5, R2, 12),
        /* 7 */ JNE32_IMM(R5, wire16(0x86dd), PASS - 8),
        /* 8 */ LDX(BPF_B, R5, R2, 20), /* next header */
        /* 9 */ JNE32_IMM(R5, 17, PASS - 10),
        /* 10 */ LDX(BPF_H, R5, R2, 56), /* UDP destination port */
        /* 11 */ JNE32_IMM(R5, wire16(port), PASS - 12),
        /* 12 */ LDX(BPF_W, R5, R2, 38), /* destination address */
        /* 13 */ JNE32_IMM(R5, (int32_t)w[0], PASS - 14),
        /* 14 */ LDX(BPF_W, R5, R2, 42),
        /* 15 */ JNE32_IMM(R5, (int32_t)w[1], PASS - 16),
        /* 16 */ LDX(BPF_W, R5, R2, 46),
        /* 17 */ JNE32_IMM(R5, (int32_t)w[2], PASS - 18),
        /* 18 */ LDX(BPF_W, R5, R2, 50),
        /* 19 */ JNE32_IMM(R5, (int32_t)w[3], PASS - 20),
        /* 20 */ REDIRECT_TAIL(map_fd),
        /* 26 */ MOV64_IMM(R0, XDP_PASS),
        /* 27 */ EXIT(),
    };
    _Static_assert(sizeof prog / sizeof prog[0] == PASS + 2, "PASS is the pass branch");
    memcpy(out, prog, sizeof prog);
    return sizeof prog / sizeof prog[0];
}

/* Every frame of a queue with a socket: the port is ours (a switch port,
 * a server that answers ARP itself); the kernel sees none of it. */
static size_t program_all(struct bpf_insn *out, int map_fd)
{
    const struct bpf_insn prog[] = {MOV64_REG(R6, R1), REDIRECT_TAIL(map_fd)};
    memcpy(out, prog, sizeof prog);
    return sizeof prog / sizeof prog[0];
}

#define PROGRAM_MAX 32

static int load_program(int map_fd, const struct op_addr *addr, uint16_t port, bool frags,
                        const struct op_log *log)
{
    struct bpf_insn prog[PROGRAM_MAX];
    size_t n = addr == NULL            ? program_all(prog, map_fd)
               : op_addr_is_ipv6(addr) ? program_v6(prog, map_fd, addr->v6, port)
                                       : program_v4(prog, map_fd, addr->v4, port);
    char verifier[4096];
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_XDP;
    /* its loads stay in the first buffer, the headers: valid with frags */
    a.prog_flags = frags ? BPF_F_XDP_HAS_FRAGS : 0;
    a.insns = (uint64_t)(uintptr_t)prog;
    a.insn_cnt = (uint32_t)n;
    a.license = (uint64_t)(uintptr_t)"Dual MIT/GPL";
    a.log_buf = (uint64_t)(uintptr_t)verifier;
    a.log_size = sizeof verifier;
    a.log_level = 1;
    verifier[0] = '\0';
    int fd = (int)sys_bpf(BPF_PROG_LOAD, &a);
    if (fd < 0) {
        fd = -errno;
        OP_ERROR(log, "AF_XDP: loading the XDP program: %s%s%.200s", strerror(-fd),
                 verifier[0] ? ": " : "", verifier);
    }
    return fd; /* or -errno */
}

static int create_map(const struct op_log *log)
{
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_XSKMAP;
    a.key_size = 4;
    a.value_size = 4;
    a.max_entries = XDP_MAX_QUEUES;
    int fd = (int)sys_bpf(BPF_MAP_CREATE, &a);
    if (fd < 0) {
        fd = -errno;
        OP_ERROR(log, "AF_XDP: creating the XSK map: %s", strerror(-fd));
    }
    return fd; /* or -errno */
}

static int attach(int prog_fd, int ifindex, unsigned flags)
{
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.link_create.prog_fd = (uint32_t)prog_fd;
    a.link_create.target_ifindex = (uint32_t)ifindex;
    a.link_create.attach_type = BPF_XDP;
    a.link_create.flags = flags;
    return (int)sys_bpf(BPF_LINK_CREATE, &a);
}

op_status_t xdp_bpf_setup(struct xdp_bpf *b, int ifindex, const struct op_addr *addr,
                          uint16_t port, bool frags, const struct op_log *log)
{
    b->map_fd = b->prog_fd = b->link_fd = -1;
    if ((b->map_fd = create_map(log)) < 0)
        return op_status_from_errno(-b->map_fd);
    if ((b->prog_fd = load_program(b->map_fd, addr, port, frags, log)) < 0)
        return op_status_from_errno(-b->prog_fd);
    /* Native mode where the driver has it (veth, real NICs); the generic
     * hook otherwise (lo, any device). */
    b->link_fd = attach(b->prog_fd, ifindex, XDP_FLAGS_DRV_MODE);
    b->native = b->link_fd >= 0;
    if (b->link_fd < 0)
        b->link_fd = attach(b->prog_fd, ifindex, XDP_FLAGS_SKB_MODE);
    if (b->link_fd < 0) {
        int e = errno;
        OP_ERROR(log, "AF_XDP: attaching XDP to interface %d: %s%s", ifindex, strerror(e),
                 e == EBUSY || e == EEXIST ? " (another XDP program is attached)" : "");
        return op_status_from_errno(e);
    }
    return OP_OK;
}

op_status_t xdp_bpf_bind_socket(struct xdp_bpf *b, uint32_t queue, int xsk_fd,
                                const struct op_log *log)
{
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_fd = (uint32_t)b->map_fd;
    a.key = (uint64_t)(uintptr_t)&queue;
    a.value = (uint64_t)(uintptr_t)&xsk_fd;
    if (sys_bpf(BPF_MAP_UPDATE_ELEM, &a) == 0)
        return OP_OK;
    int e = errno;
    OP_ERROR(log, "AF_XDP: putting the socket in the XSK map: %s", strerror(e));
    return op_status_from_errno(e);
}

void xdp_bpf_teardown(struct xdp_bpf *b)
{
    if (b->link_fd >= 0)
        close(b->link_fd); /* detaches the program */
    if (b->prog_fd >= 0)
        close(b->prog_fd);
    if (b->map_fd >= 0)
        close(b->map_fd);
    b->map_fd = b->prog_fd = b->link_fd = -1;
}
