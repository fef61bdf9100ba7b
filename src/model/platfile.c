/* Platform files: "key value" lines, '#' comments; "preset NAME" first
 * starts from a preset. Every malformed line is refused with its number and
 * the reason. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

enum kind { F_DOUBLE, F_UNSIGNED, F_U16, F_U32 };

static const struct field {
    const char *name;
    size_t off;
    enum kind kind;
} fields[] = {
#define D(n) {#n, offsetof(struct op_model_platform, n), F_DOUBLE}
    D(link_bw), D(wire_lat), D(switch_lat), D(spine_bw), D(sw_chunk_s), D(sw_byte_s),
    D(host_msg_s), D(nic_msg_s), D(host_byte_s), D(leader_pkt_s), D(leader_byte_s),
    D(wake_s), D(sw_wake_s), D(ctx_s), D(crowd_f), D(host_crowd_f), D(runq_s),
    D(check_byte_s), D(host_wake_s),
    D(mpi_call_s), D(mpi_byte_s), D(mpi_node_s), D(shm_level_s),
    D(shm_xsock_s), D(shm_byte_s), D(rto_min_s), D(fwd_frame_s), D(late_loss),
    D(host_hot_bytes), D(host_hot_f), D(spin_s),
#undef D
    {"sockets", offsetof(struct op_model_platform, sockets), F_UNSIGNED},
    {"rack_nodes", offsetof(struct op_model_platform, rack_nodes), F_UNSIGNED},
    {"shared_cores", offsetof(struct op_model_platform, shared_cores), F_UNSIGNED},
    {"max_data", offsetof(struct op_model_platform, max_data), F_U16},
    {"window", offsetof(struct op_model_platform, window), F_U16},
    {"frame_data", offsetof(struct op_model_platform, frame_data), F_U16},
    {"socket_max_bytes", offsetof(struct op_model_platform, socket_max_bytes), F_U32},
};

static bool set_field(struct op_model_platform *p, const struct field *f, const char *v)
{
    char *end;
    errno = 0;
    char *at = (char *)p + f->off;
    if (f->kind == F_DOUBLE) {
        double d = strtod(v, &end);
        if (end == v || *end != '\0' || errno != 0 || !isfinite(d) || d < 0)
            return false;
        memcpy(at, &d, sizeof(d));
        return true;
    }
    unsigned long long u = strtoull(v, &end, 10);
    unsigned long long max = f->kind == F_U16 ? 65535 : 4294967295ull;
    if (end == v || *end != '\0' || errno != 0 || v[0] == '-' || u > max)
        return false;
    if (f->kind == F_U16) {
        uint16_t x = (uint16_t)u;
        memcpy(at, &x, sizeof(x));
    } else if (f->kind == F_U32) {
        uint32_t x = (uint32_t)u;
        memcpy(at, &x, sizeof(x));
    } else {
        unsigned x = (unsigned)u;
        memcpy(at, &x, sizeof(x));
    }
    return true;
}

static op_status_t line(const char *key, const char *val, bool first, struct op_model_platform *p,
                        const char **why)
{
    if (strcmp(key, "preset") == 0) {
        if (!first)
            return *why = "preset must come first", OP_ERR_MALFORMED;
        if (op_model_preset(val, p) != OP_OK)
            return *why = "unknown preset", OP_ERR_MALFORMED;
        return OP_OK;
    }
    if (strcmp(key, "name") == 0) {
        if (strlen(val) >= sizeof(p->name))
            return *why = "name too long", OP_ERR_MALFORMED;
        snprintf(p->name, sizeof(p->name), "%s", val);
        return OP_OK;
    }
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (strcmp(key, fields[i].name) == 0)
            return set_field(p, &fields[i], val) ? OP_OK
                                                 : (*why = "bad value", OP_ERR_MALFORMED);
    return *why = "unknown key", OP_ERR_MALFORMED;
}

op_status_t op_model_platform_parse(const char *text, struct op_model_platform *out,
                                    char *why, size_t why_len)
{
    struct op_model_platform p;
    op_model_preset("25G", &p);
    unsigned n = 0;
    bool first = true;
    while (*text != '\0') {
        const char *eol = strchr(text, '\n');
        size_t len = eol ? (size_t)(eol - text) : strlen(text);
        char buf[256], key[64], val[160], extra[2];
        n++;
        if (len >= sizeof(buf)) {
            snprintf(why, why_len, "line %u: too long", n);
            return OP_ERR_MALFORMED;
        }
        memcpy(buf, text, len);
        buf[len] = '\0';
        text += len + (eol ? 1 : 0);
        char *hash = strchr(buf, '#');
        if (hash != NULL)
            *hash = '\0';
        int got = sscanf(buf, "%63s %159s %1s", key, val, extra);
        if (got <= 0)
            continue;
        const char *reason = NULL;
        if (got != 2)
            reason = got == 1 ? "a key without a value" : "more than one value";
        else if (line(key, val, first, &p, &reason) == OP_OK)
            reason = NULL;
        if (reason != NULL) {
            snprintf(why, why_len, "line %u: %s", n, reason);
            return OP_ERR_MALFORMED;
        }
        first = false;
    }
    if (mdl_platform_check(&p) != OP_OK) {
        snprintf(why, why_len, "a size, bandwidth or count is zero");
        return OP_ERR_INVAL;
    }
    *out = p;
    return OP_OK;
}

op_status_t op_model_platform_load(const char *path, struct op_model_platform *out, char *why,
                                   size_t why_len)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(why, why_len, "%s", strerror(errno));
        return op_status_from_errno(errno);
    }
    char text[16384];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    bool big = !feof(f);
    fclose(f);
    if (big) {
        snprintf(why, why_len, "larger than %zu bytes", sizeof(text) - 1);
        return OP_ERR_MALFORMED;
    }
    text[n] = '\0';
    if (strlen(text) != n) {
        snprintf(why, why_len, "a NUL byte in the file");
        return OP_ERR_MALFORMED;
    }
    return op_model_platform_parse(text, out, why, why_len);
}

void op_model_platform_print(const struct op_model_platform *p, FILE *out)
{
    fprintf(out, "name %s\n", p->name[0] ? p->name : "custom");
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const char *at = (const char *)p + fields[i].off;
        if (fields[i].kind == F_DOUBLE) {
            double d;
            memcpy(&d, at, sizeof(d));
            fprintf(out, "%s %.17g\n", fields[i].name, d);
        } else if (fields[i].kind == F_U16) {
            uint16_t x;
            memcpy(&x, at, sizeof(x));
            fprintf(out, "%s %u\n", fields[i].name, x);
        } else {
            unsigned x;
            memcpy(&x, at, sizeof(x));
            fprintf(out, "%s %u\n", fields[i].name, x);
        }
    }
}
