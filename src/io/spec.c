/* Backends by name (op_io_spec_parse, op_io_open_spec): what a tool's
 * flag or a topology file says, turned into an open endpoint, so that code
 * above io picks a backend without knowing its calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/io.h"

static const struct {
    const char *prefix;
    enum op_io_spec_kind kind;
    bool has_if, has_ep;
} kinds[] = {
    {"udp:", OP_IO_SPEC_UDP, false, true},
    {"xdp:", OP_IO_SPEC_XDP, true, true},
    {"xdpall:", OP_IO_SPEC_XDP_SERVED, true, true},
    {"frames:", OP_IO_SPEC_XDP_FRAMES, true, false},
};

static bool fail(char *why, size_t len, const char *text, const char *what)
{
    snprintf(why, len, "'%s': %s", text, what);
    return false;
}

/* "IF" or "IF@N" (N queues, 1..64) into out. */
static bool parse_place(const char *p, size_t n, struct op_io_spec *out)
{
    const char *at = memchr(p, '@', n);
    size_t name = at != NULL ? (size_t)(at - p) : n;
    if (name == 0 || name >= sizeof out->ifname)
        return false;
    memcpy(out->ifname, p, name);
    out->ifname[name] = '\0';
    if (at == NULL)
        return true;
    char digits[4];
    size_t d = n - name - 1;
    if (d == 0 || d >= sizeof digits)
        return false;
    memcpy(digits, at + 1, d);
    digits[d] = '\0';
    uint64_t q;
    if (op_parse_u64(digits, 1, 64, &q) != OP_OK)
        return false;
    out->queues = (uint32_t)q;
    return true;
}

static bool parse_rest(const char *text, const char *rest, bool has_if, bool has_ep,
                       struct op_io_spec *out, char *why, size_t len)
{
    const char *ep = rest;
    if (has_if) {
        const char *colon = has_ep ? strchr(rest, ':') : rest + strlen(rest);
        if (colon == NULL || !parse_place(rest, (size_t)(colon - rest), out))
            return fail(why, len, text, "an interface (IF or IF@QUEUES, 1-64 queues) is needed");
        ep = *colon == ':' ? colon + 1 : colon;
    }
    if (has_ep && !op_endpoint_parse(ep, &out->ep))
        return fail(why, len, text, "ADDR:PORT or [ADDR6]:PORT is needed");
    if (has_ep && op_addr_is_any(&out->ep.addr) && out->kind != OP_IO_SPEC_UDP)
        return fail(why, len, text, "a frame backend needs its own address, not a wildcard");
    return true;
}

bool op_io_spec_parse(const char *text, struct op_io_spec *out, char *why, size_t len)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; text != NULL && i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t n = strlen(kinds[i].prefix);
        if (strncmp(text, kinds[i].prefix, n) != 0)
            continue;
        out->kind = kinds[i].kind;
        return parse_rest(text, text + n, kinds[i].has_if, kinds[i].has_ep, out, why, len);
    }
    return fail(why, len, text != NULL ? text : "",
                "a backend is udp:EP, xdp:IF[@N]:EP, xdpall:IF[@N]:EP or frames:IF[@N]");
}

op_status_t op_io_open_spec(const struct op_io_spec *s, const struct op_log *log,
                            struct op_io **out)
{
    struct op_io_xdp_config c = {.ifname = s->ifname, .addr = s->ep.addr, .port = s->ep.port,
                                 .queues = s->queues, .zero_copy = true, .log = log};
    struct op_io *frames;
    op_status_t st;
    switch (s->kind) {
    case OP_IO_SPEC_UDP:
        return op_io_udp_open_addr(&s->ep.addr, s->ep.port, out);
    case OP_IO_SPEC_XDP:
        return op_io_xdp_open_cfg(&c, out);
    case OP_IO_SPEC_XDP_FRAMES:
        return op_io_xdp_open_frames(&c, out);
    case OP_IO_SPEC_XDP_SERVED:
        if ((st = op_io_xdp_open_frames(&c, &frames)) != OP_OK)
            return st;
        if ((st = op_io_frames_serve(frames, &s->ep.addr, s->ep.port, out)) != OP_OK)
            op_io_close(frames);
        return st;
    }
    return OP_ERR_INVAL;
}
