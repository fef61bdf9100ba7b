/* `offpath dpa_all_to_all -r daemon`: the agent daemon an MPI job's
 * `dpa_all_to_all -d` offloads its all-to-all to (the DPU's role; src/agent
 * a2a_daemon.c). It runs in `offpath` itself, not under mpirun. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "offpath/agent.h"

#define TOOL "dpa_all_to_all"
#define DEFAULT_PORT 18515

struct a2a_flags {
    struct cli_agent_flags a;
    uint64_t sessions;
};

static void usage(void)
{
    printf("usage: offpath dpa_all_to_all -r daemon -t PORT -c CLIENTS -a ADDR:PORT[,...]\n"
           "                              --key DAEMONS.key --peer CLIENTS.pub\n"
           "  -t, --listen-port P   ranks connect here, the other daemons at P + 1\n"
           "  -c, --num-clients N   ranks this daemon serves (1..64): daemon j of the -a list\n"
           "                        serves ranks j * N .. j * N + N - 1\n"
           "  -a, --address LIST    every daemon as IP:PORT, this one among them, one order\n"
           "                        on all daemons (the ranks' -d list)\n"
           "      --ip ADDR         this daemon's address (default 127.0.0.1)\n"
           "      --key FILE        the daemons' secret key; --peer FILE the ranks' public key\n"
           "      --timeout S       longest wait for a peer, seconds (default 30)\n"
           "      --sessions N      exit after N sessions (a run opens one for its first\n"
           "                        size's matrices, then one for each -m and -t pair;\n"
           "                        default: serve until killed)\n"
           "  -l, --log-level L     10..70 (default 50)\n");
}

enum { OPT_SESSIONS = CLI_AGENT_OPT_NEXT };

static bool set(int opt, const char *v, void *cfg)
{
    struct a2a_flags *f = cfg;
    bool known;
    bool ok = cli_agent_flag(TOOL, opt, v, &f->a, &known);
    if (known)
        return ok;
    if (opt == OPT_SESSIONS)
        return cli_u64(TOOL, "--sessions", v, 1, UINT32_MAX, &f->sessions);
    if (opt == 'r' && strcmp(v, "daemon") == 0)
        return true;
    if (opt == 'r')
        cli_bad(TOOL, "invalid value '%s' for -r (--role): daemon (ranks are MPI processes)", v);
    return false;
}

static int run(const struct a2a_flags *f)
{
    struct op_log log;
    struct op_a2a_daemon_config c = {.sessions = f->sessions};
    int rc = cli_agent_daemon_net(TOOL, &f->a, DEFAULT_PORT, &c.net);
    if (rc != 0)
        return rc;
    op_log_init(&log, "a2a_daemon", f->a.log_level);
    log.doca = true;
    c.net.log = &log;
    return op_a2a_daemon_run(&c, NULL) == OP_OK ? 0 : 1;
}

bool cli_a2a_is_daemon(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-r") == 0 || strcmp(argv[i], "--role") == 0 ||
            strncmp(argv[i], "--role=", 7) == 0 || strncmp(argv[i], "-r", 2) == 0)
            return true;
    return false;
}

int cli_a2a_daemon(int argc, char **argv)
{
    static const struct option opts[] = {
        {"role", required_argument, NULL, 'r'},        {"listen-port", required_argument, NULL, 't'},
        {"num-clients", required_argument, NULL, 'c'}, {"address", required_argument, NULL, 'a'},
        {"key", required_argument, NULL, CLI_AGENT_OPT_KEY},
        {"peer", required_argument, NULL, CLI_AGENT_OPT_PEER},
        {"ip", required_argument, NULL, CLI_AGENT_OPT_IP},
        {"timeout", required_argument, NULL, CLI_AGENT_OPT_TIMEOUT},
        {"sessions", required_argument, NULL, OPT_SESSIONS},
        {"log-level", required_argument, NULL, 'l'},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct a2a_flags f = {.a = CLI_AGENT_DEFAULTS};
    int rc = cli_flags(argc, argv, "r:t:c:a:l:h", opts, 'h', usage, set, &f);
    if (rc >= 0)
        return rc;
    if (optind < argc) {
        cli_bad(TOOL, "unexpected argument '%s'", argv[optind]);
        return 2;
    }
    return run(&f);
}
