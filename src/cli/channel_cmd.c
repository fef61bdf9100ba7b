/* `offpath secure_channel`: DOCA's secure_channel flags (and flag files)
 * into the tool's configuration; the run is src/channel's op_sc_tool_run. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "doca_json.h"
#include "offpath/channel.h"

#define TOOL "secure_channel"

enum { O_SDK_LOG = 256, O_KEY, O_PEER, O_MAX_MSG, O_TIMEOUT, O_CIPHER, O_JSON_OUT, O_PLAIN,
       O_COUNT_ };

static const struct option options[] = {
    {"help", 0, 0, 'h'}, {"version", 0, 0, 'v'}, {"log-level", 1, 0, 'l'},
    {"sdk-log-level", 1, 0, O_SDK_LOG}, {"json", 1, 0, 'j'}, {"msg-size", 1, 0, 's'},
    {"num-msgs", 1, 0, 'n'}, {"pci-addr", 1, 0, 'p'}, {"rep-pci", 1, 0, 'r'},
    {"key", 1, 0, O_KEY}, {"peer", 1, 0, O_PEER}, {"max-msg-size", 1, 0, O_MAX_MSG},
    {"timeout", 1, 0, O_TIMEOUT}, {"cipher", 1, 0, O_CIPHER}, {"json-out", 1, 0, O_JSON_OUT},
    {"insecure-plaintext", 0, 0, O_PLAIN}, {0, 0, 0, 0}};

struct sc_cli {
    int log_level, sdk_level;
    uint64_t msg_size, num_msgs, max_msg, timeout_s;
    const char *addr, *rep, *key, *peer, *json_in, *json_out;
    enum op_chan_cipher cipher;
    bool plaintext, from_json, version;
    int bad_opt; /* the flag whose value was refused */
    bool seen[O_COUNT_];
    char why[320]; /* the application's reason for a refused value */
    char strings[8192]; /* the json file's string values */
    size_t strings_used;
};

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: offpath secure_channel [DOCA Flags] [Program Flags]\n\n"
            "DOCA Flags:\n"
            "  -h, --help                Print a help synopsis\n"
            "  -v, --version             Print program version information\n"
            "  -l, --log-level           Set the (numeric) log level for the program <10=DISABLE, "
            "20=CRITICAL, 30=ERROR, 40=WARNING, 50=INFO, 60=DEBUG, 70=TRACE>\n"
            "  --sdk-log-level           Set the SDK (numeric) log level for the program (the same "
            "levels; it governs the argument parser's own lines)\n"
            "  -j, --json <path>         Parse all command flags from an input json file\n\n"
            "Program Flags:\n"
            "  -s, --msg-size            Message size to be sent (1..--max-msg-size bytes)\n"
            "  -n, --num-msgs            Number of messages to be sent (1..%llu)\n"
            "  -p, --pci-addr            The endpoint: unix:PATH, tcp:HOST:PORT or shm:NAME\n"
            "  -r, --rep-pci             Given: this is the agent side and listens; 'any' accepts "
            "any holder of the pinned key, an IPv4 address (tcp) also requires that source\n"
            "  --key <file>              Our secret key (from offpath keygen; mode 0600)\n"
            "  --peer <file>             The peer's public key, pinned: any other key is refused\n"
            "  --max-msg-size <bytes>    Largest message accepted, 1..16777216 (default %u)\n"
            "  --timeout <seconds>       Longest wait for the peer at any point, 1..3600 "
            "(default 10)\n"
            "  --cipher <name>           auto (AES-256-GCM when both CPUs have it), "
            "xchacha20poly1305 or aes256gcm\n"
            "  --json-out <file>         Write the results (counts, times, counters) as JSON\n"
            "  --insecure-plaintext      No handshake and no encryption: only the benchmark "
            "baseline (bench/channel); both sides must give it\n\n"
            "Both sides send -n messages of -s bytes (message i holds bytes (i + j) & 0xff) while\n"
            "receiving the peer's, after exchanging {num_msgs, msg_size}; each side receives the\n"
            "count the peer announced and checks every byte. Exit 0 only when all arrived intact.\n"
            "Example: offpath keygen agent; offpath keygen host\n"
            "  offpath secure_channel -s 256 -n 1000 -p tcp:127.0.0.1:7000 -r any --key agent.key "
            "--peer host.pub\n"
            "  offpath secure_channel -s 256 -n 1000 -p tcp:127.0.0.1:7000 --key host.key --peer "
            "agent.pub\n",
            OP_SC_MAX_NUM_MSGS, OP_CHAN_DEFAULT_MAX_MSG);
}

static void help(void)
{
    usage(stdout);
}

static bool set_level(struct sc_cli *c, int *level, const char *val)
{
    int l = op_log_level_parse(val);
    if (l < 0) {
        snprintf(c->why, sizeof c->why, "log level must be 10..70");
        return false;
    }
    *level = l;
    return true;
}

static bool set_u64(struct sc_cli *c, uint64_t *out, const char *val, uint64_t min, uint64_t max)
{
    if (op_parse_u64(val, min, max, out) == OP_OK)
        return true;
    snprintf(c->why, sizeof c->why, "'%s' is not an integer %llu..%llu", val,
             (unsigned long long)min, (unsigned long long)max);
    return false;
}

static bool set_cipher(struct sc_cli *c, const char *val)
{
    static const enum op_chan_cipher all[] = {OP_CHAN_CIPHER_AUTO, OP_CHAN_CIPHER_XCHACHA,
                                              OP_CHAN_CIPHER_AESGCM};
    for (size_t i = 0; i < 3; i++)
        if (strcmp(val, op_chan_cipher_name(all[i])) == 0) {
            c->cipher = all[i];
            return true;
        }
    snprintf(c->why, sizeof c->why, "'%s' is not auto, xchacha20poly1305 or aes256gcm", val);
    return false;
}

static bool apply_flag(struct sc_cli *c, int opt, const char *val)
{
    switch (opt) {
    case 'v': c->version = true; return true;
    case 'l': return set_level(c, &c->log_level, val);
    case O_SDK_LOG: return set_level(c, &c->sdk_level, val);
    case 'j': c->json_in = val; return !c->from_json;
    case 's': return set_u64(c, &c->msg_size, val, 1, OP_CHAN_LIMIT_MAX_MSG);
    case 'n': return set_u64(c, &c->num_msgs, val, 1, OP_SC_MAX_NUM_MSGS);
    case 'p': c->addr = val; return true;
    case 'r': c->rep = val; return true;
    case O_KEY: c->key = val; return true;
    case O_PEER: c->peer = val; return true;
    case O_MAX_MSG: return set_u64(c, &c->max_msg, val, 1, OP_CHAN_LIMIT_MAX_MSG);
    case O_TIMEOUT: return set_u64(c, &c->timeout_s, val, 1, 3600);
    case O_CIPHER: return set_cipher(c, val);
    case O_JSON_OUT: c->json_out = val; return true;
    case O_PLAIN: c->plaintext = val == NULL || strcmp(val, "false") != 0; return true;
    default: return false;
    }
}

static bool set_flag(int opt, const char *val, void *cfg)
{
    struct sc_cli *c = cfg;
    c->why[0] = '\0';
    if (opt >= 0 && opt < O_COUNT_)
        c->seen[opt] = true;
    if (apply_flag(c, opt, val))
        return true;
    c->bad_opt = opt;
    return false;
}

static const char *long_name(int opt)
{
    for (const struct option *o = options; o->name != NULL; o++)
        if (o->val == opt)
            return o->name;
    return "?";
}

/* DOCA's report of a refused parameter: the application's reason at its
 * log level, the parser's line at the SDK's, the plain line and usage. */
static int param_error(const struct sc_cli *c, const char *param)
{
    struct op_log app, sdk;
    op_log_init(&app, TOOL, c->log_level);
    op_log_init(&sdk, TOOL, c->sdk_level);
    app.stream = sdk.stream = stdout;
    app.doca = sdk.doca = true;
    if (c->why[0] != '\0')
        OP_ERROR(&app, "%s", c->why);
    OP_ERROR(&sdk, "Encountered an error [Invalid input] while handling param \"%s\"", param);
    fflush(stdout);
    fprintf(stderr, "Encountered an error [Invalid input] while handling param \"%s\"\n\n", param);
    usage(stderr);
    OP_ERROR(&app, "Failed to parse application input: Invalid input");
    return 2;
}

struct json_ctx {
    struct sc_cli *c;
    const char *bad;
    char bad_buf[64];
};

static bool apply_json(const char *flag, const char *value, void *ctx)
{
    struct json_ctx *j = ctx;
    snprintf(j->bad_buf, sizeof j->bad_buf, "%s", flag);
    j->bad = j->bad_buf;
    for (const struct option *o = options; o->name != NULL; o++) {
        if (strcmp(o->name, flag) != 0)
            continue;
        if (o->val >= 0 && o->val < O_COUNT_ && j->c->seen[o->val])
            return true; /* the command line wins over the file */
        /* The reader reuses value's buffer: keep a copy, flags point at it. */
        size_t len = strlen(value) + 1;
        if (len > sizeof j->c->strings - j->c->strings_used) {
            snprintf(j->c->why, sizeof j->c->why, "the json file's strings are too long");
            return false;
        }
        char *copy = j->c->strings + j->c->strings_used;
        memcpy(copy, value, len);
        j->c->strings_used += len;
        return set_flag(o->val, o->has_arg || strcmp(value, "true") == 0 ? copy : "false", j->c);
    }
    snprintf(j->c->why, sizeof j->c->why, "unknown flag \"%s\" in the json file", flag);
    return false;
}

static int read_json(struct sc_cli *c)
{
    char why[256];
    FILE *f = fopen(c->json_in, "r");
    if (f == NULL) {
        snprintf(c->why, sizeof c->why, "cannot read %s: %s", c->json_in, strerror(errno));
        return param_error(c, "json");
    }
    enum { JSON_MAX = 1 << 20 };
    char *text = malloc(JSON_MAX);
    size_t len = text != NULL ? fread(text, 1, JSON_MAX, f) : 0;
    bool too_long = len == JSON_MAX;
    fclose(f);
    if (text == NULL || too_long) {
        free(text);
        snprintf(c->why, sizeof c->why, "%s is larger than 1 MiB", c->json_in);
        return param_error(c, "json");
    }
    bool seen_cli[O_COUNT_];
    memcpy(seen_cli, c->seen, sizeof seen_cli);
    struct json_ctx j = {.c = c};
    c->from_json = true;
    op_status_t st = cli_doca_json_flags(text, len, apply_json, &j, why);
    free(text);
    if (st == OP_ERR_MALFORMED) {
        snprintf(c->why, sizeof c->why, "%s: %s", c->json_in, why);
        return param_error(c, "json");
    }
    if (st != OP_OK)
        return param_error(c, j.bad);
    for (int i = 0; i < O_COUNT_; i++)
        c->seen[i] = c->seen[i] || seen_cli[i];
    return -1;
}

/* Checks that need every flag (sizes against the maximum, mandatory ones). */
static int validate(struct sc_cli *c)
{
    static const int mandatory[] = {'s', 'n', 'p'};
    for (size_t i = 0; i < 3; i++)
        if (!c->seen[mandatory[i]]) {
            snprintf(c->why, sizeof c->why, "the flag is mandatory");
            return param_error(c, long_name(mandatory[i]));
        }
    if (c->msg_size > c->max_msg) {
        snprintf(c->why, sizeof c->why,
                 "Received message size is not supported (%llu > --max-msg-size %llu)",
                 (unsigned long long)c->msg_size, (unsigned long long)c->max_msg);
        return param_error(c, "msg-size");
    }
    if (!c->plaintext && (c->key == NULL || c->peer == NULL)) {
        snprintf(c->why, sizeof c->why, "--key and --peer are needed (offpath keygen makes them)");
        return param_error(c, c->key == NULL ? "key" : "peer");
    }
    return -1;
}

static bool build_config(struct sc_cli *c, struct op_channel_config *cfg, int *rc)
{
    char why[256], awhy[128];
    memset(cfg, 0, sizeof *cfg);
    *rc = -1;
    if (op_chan_addr_parse(c->addr, &cfg->addr, awhy) != OP_OK) {
        snprintf(c->why, sizeof c->why, "'%s': %s", c->addr, awhy);
        *rc = param_error(c, "pci-addr");
        return false;
    }
    cfg->listen = c->rep != NULL;
    if (c->rep != NULL && strcmp(c->rep, "any") != 0) {
        struct in_addr ia;
        if (cfg->addr.kind != OP_CHAN_TCP || inet_pton(AF_INET, c->rep, &ia) != 1) {
            snprintf(c->why, sizeof c->why,
                     "'%s': expected 'any' (or, over tcp, the IPv4 address of the host)", c->rep);
            *rc = param_error(c, "rep-pci");
            return false;
        }
        cfg->accept_ipv4 = ntohl(ia.s_addr);
    }
    cfg->cipher = c->cipher;
    cfg->max_msg = (uint32_t)c->max_msg;
    cfg->timeout_ns = c->timeout_s * OP_NS_PER_S;
    cfg->plaintext = c->plaintext;
    if (c->plaintext)
        return true;
    if (op_chan_read_secret(c->key, &cfg->local, why) != OP_OK) {
        snprintf(c->why, sizeof c->why, "%s", why);
        *rc = param_error(c, "key");
        return false;
    }
    if (op_chan_read_public(c->peer, cfg->peer_pub, why) != OP_OK) {
        snprintf(c->why, sizeof c->why, "%s", why);
        *rc = param_error(c, "peer");
        return false;
    }
    return true;
}

int cli_secure_channel(int argc, char **argv)
{
    struct sc_cli c = {.log_level = OP_LOG_INFO, .sdk_level = OP_LOG_ERROR,
                       .max_msg = OP_CHAN_DEFAULT_MAX_MSG, .timeout_s = 10};
    struct op_sc_tool_config run;
    int rc = cli_flags(argc, argv, "hvl:j:s:n:p:r:", options, 'h', help, set_flag, &c);
    if (rc == 2 && c.bad_opt != 0)
        return param_error(&c, long_name(c.bad_opt));
    if (rc == 2) { /* getopt has said which flag it does not know */
        usage(stderr);
        return 2;
    }
    if (rc >= 0)
        return rc;
    if (c.version) {
        printf("offpath secure_channel 0.1.0\n");
        return 0;
    }
    if (optind < argc) {
        snprintf(c.why, sizeof c.why, "unexpected argument '%s'", argv[optind]);
        return param_error(&c, argv[optind]);
    }
    if (c.json_in != NULL && (rc = read_json(&c)) >= 0)
        return rc;
    if ((rc = validate(&c)) >= 0)
        return rc;
    setvbuf(stdout, NULL, c.log_level >= OP_LOG_TRACE ? _IOFBF : _IOLBF, 1 << 16);
    if (!build_config(&c, &run.chan, &rc))
        return rc;
    run.msg_size = c.msg_size;
    run.num_msgs = c.num_msgs;
    run.max_msg = c.max_msg;
    run.log_level = c.log_level;
    run.json_out = c.json_out;
    return op_sc_tool_run(&run);
}
