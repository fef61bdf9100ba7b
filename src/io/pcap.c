/* Capture files: the writer (one stdio stream with a large buffer, a sticky
 * errno) and the merge of several captures into one, in time order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "io_internal.h"

/* Big enough that writing a capture costs a system call per ~100 packets of
 * a 9 KiB burst, not one per packet. */
#define PCAP_STDIO_BUF (1u << 20)

struct op_pcap {
    FILE *f;
    uint64_t pkts;
    int err; /* the first failure (an errno value); 0 none */
};

static void fail(struct op_pcap *w, int err)
{
    if (w->err == 0)
        w->err = err != 0 ? err : EIO;
}

op_status_t op_pcap_open(const char *path, struct op_pcap **out)
{
    uint8_t hdr[OP_PCAP_FILE_HDR_LEN];
    struct op_pcap *w = calloc(1, sizeof *w);
    if (w == NULL)
        return OP_ERR_NOMEM;
    w->f = fopen(path, "wb");
    if (w->f == NULL) {
        op_status_t st = op_status_from_errno(errno);
        free(w);
        return st;
    }
    (void)setvbuf(w->f, NULL, _IOFBF, PCAP_STDIO_BUF);
    op_pcap_file_header(hdr);
    if (fwrite(hdr, 1, sizeof hdr, w->f) != sizeof hdr)
        fail(w, errno);
    *out = w;
    return OP_OK;
}

static void put(struct op_pcap *w, const void *p, size_t len)
{
    if (w->err == 0 && fwrite(p, 1, len, w->f) != len)
        fail(w, errno);
}

void op_pcap_write(struct op_pcap *w, uint64_t ts_ns, const struct op_flow *flow,
                   const uint8_t *data, size_t len)
{
    uint8_t hdr[OP_PCAP_PKT_HDR_MAX];
    size_t n = op_pcap_packet_headers(hdr, ts_ns, flow, len);
    if (n == 0) {
        fail(w, EMSGSIZE);
        return;
    }
    put(w, hdr, n);
    put(w, data, len);
    w->pkts += w->err == 0;
}

void io_pcap_write_pkt(struct op_pcap *w, uint64_t ts_ns, const struct op_flow *flow,
                       const struct op_pkt *p)
{
    if (p->ext == NULL) {
        op_pcap_write(w, ts_ns, flow, p->data, p->len);
        return;
    }
    uint8_t hdr[OP_PCAP_PKT_HDR_MAX];
    size_t n = op_pcap_packet_headers(hdr, ts_ns, flow, op_pkt_wire_len(p));
    if (n == 0) {
        fail(w, EMSGSIZE);
        return;
    }
    uint32_t at = p->ext_at < p->len ? p->ext_at : p->len;
    put(w, hdr, n);
    put(w, p->data, at);
    put(w, p->ext, p->ext_len);
    put(w, p->data + at, p->len - at);
    w->pkts += w->err == 0;
}

void op_pcap_write_frame(struct op_pcap *w, uint64_t ts_ns, const uint8_t *frame, size_t len)
{
    uint8_t hdr[OP_PCAP_REC_HDR_LEN];
    if (!op_pcap_record_header(hdr, ts_ns, len)) {
        fail(w, EMSGSIZE);
        return;
    }
    put(w, hdr, sizeof hdr);
    put(w, frame, len);
    w->pkts += w->err == 0;
}

uint64_t op_pcap_count(const struct op_pcap *w) { return w->pkts; }

op_status_t op_pcap_close(struct op_pcap *w)
{
    if (w == NULL)
        return OP_OK;
    if (fclose(w->f) != 0)
        fail(w, errno);
    int err = w->err;
    free(w);
    return err == 0 ? OP_OK : op_status_from_errno(err);
}

/* ---- merge */

struct merge_in {
    FILE *f;
    uint8_t *rec; /* record header then frame */
    uint64_t ts;
    uint32_t len;
    bool live;
};

/* The next record of m into m->rec: 0 and m->live false at the end, an
 * errno value when the file breaks off or holds something else. */
static int next_record(struct merge_in *m)
{
    size_t got = fread(m->rec, 1, OP_PCAP_REC_HDR_LEN, m->f);
    m->live = false;
    if (got == 0 && feof(m->f))
        return 0;
    if (got != OP_PCAP_REC_HDR_LEN)
        return ferror(m->f) ? EIO : EBADMSG;
    if (op_pcap_record_parse(m->rec, &m->ts, &m->len) != OP_OK)
        return EBADMSG;
    if (fread(m->rec + OP_PCAP_REC_HDR_LEN, 1, m->len, m->f) != m->len)
        return ferror(m->f) ? EIO : EBADMSG;
    m->live = true;
    return 0;
}

static int open_input(struct merge_in *m, const char *path)
{
    uint8_t hdr[OP_PCAP_FILE_HDR_LEN];
    m->rec = malloc(OP_PCAP_REC_HDR_LEN + OP_PCAP_SNAPLEN);
    if (m->rec == NULL)
        return ENOMEM;
    m->f = fopen(path, "rb");
    if (m->f == NULL)
        return errno;
    if (fread(hdr, 1, sizeof hdr, m->f) != sizeof hdr || !op_pcap_file_header_ok(hdr))
        return EBADMSG;
    return next_record(m);
}

/* The input whose next packet is the earliest; -1 when all are done. */
static int earliest(const struct merge_in *in, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (in[i].live && (best < 0 || in[i].ts < in[best].ts))
            best = i;
    return best;
}

static int merge_inputs(struct op_pcap *w, struct merge_in *in, const char *const *paths, int n)
{
    for (int i = 0; i < n; i++) {
        int err = open_input(&in[i], paths[i]);
        if (err != 0)
            return err;
    }
    int i;
    while (w->err == 0 && (i = earliest(in, n)) >= 0) {
        put(w, in[i].rec, OP_PCAP_REC_HDR_LEN + in[i].len);
        w->pkts += w->err == 0;
        int err = next_record(&in[i]);
        if (err != 0)
            return err;
    }
    return 0;
}

op_status_t op_pcap_merge(struct op_pcap *w, const char *const *paths, int n)
{
    struct merge_in *in = calloc(n > 0 ? (size_t)n : 1, sizeof *in);
    int err = in != NULL ? merge_inputs(w, in, paths, n) : ENOMEM;
    for (int i = 0; in != NULL && i < n; i++) {
        if (in[i].f != NULL)
            fclose(in[i].f);
        free(in[i].rec);
    }
    free(in);
    if (err != 0)
        fail(w, err);
    return w->err == 0 ? OP_OK : op_status_from_errno(w->err);
}
