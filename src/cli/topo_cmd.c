/* `offpath topo up|down|hosts|exec FILE`: a topology file's hosts, TORs and
 * SPINEs as network namespaces on rate-limited veth links (src/nstopo). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "offpath/nstopo.h"

#define TOOL "topo"

enum { OPT_STATE = 256, OPT_NO_SWITCHES };

static const struct option options[] = {{"json", 0, 0, 'j'},
                                        {"verbose", 0, 0, 'v'},
                                        {"state", 1, 0, OPT_STATE},
                                        {"no-switches", 0, 0, OPT_NO_SWITCHES},
                                        {"help", 0, 0, 'h'},
                                        {0, 0, 0, 0}};

static void help(void)
{
    printf("Usage: offpath topo up FILE [--no-switches] [--state PATH] [--json] [-v] [-- SWITCH OPTIONS]\n"
           "       offpath topo down FILE [--state PATH] [--json]\n"
           "       offpath topo hosts FILE [--json]\n"
           "       offpath topo switches FILE [--json]\n"
           "       offpath topo exec FILE HOST -- COMMAND [ARGS...]\n\n"
           "Builds the topology FILE describes (docs/topo.md): every host, tor and spine a\n"
           "network namespace opt-<topo>-<node>, every link a veth pair with a tbf of the\n"
           "link's rate and queue on both ends, static routes along shortest paths, and in\n"
           "every tor and spine an `offpath switch --ports all` on the path: it forwards\n"
           "every frame at the links' rates and aggregates INC (its output and counters in\n"
           "/run/offpath/topo-<topo>-<node>.log and .json). Needs root.\n\n"
           "  up      build it; refuses when any of its namespaces exists; options after\n"
           "          '--' go to every switch (e.g. -- --window 128 --max-data 1408)\n"
           "  down    stop every process in its namespaces, remove every namespace (and so\n"
           "          every veth and XDP program) it made, also after up was killed: the\n"
           "          state file lists them before they exist\n"
           "  hosts   the hosts' addresses, one a line\n"
           "  switches  the switches' fabric file for this topology (switch --topology,\n"
           "          inc_test, OFFPATH_TOPOLOGY): a line a spine, a line a tor with its\n"
           "          hosts' address range and its spines\n"
           "  exec    run COMMAND in HOST's namespace (HOST: its name or address); the exit\n"
           "          status is COMMAND's\n\n"
           "  --no-switches up: no switches; the kernel forwards in tors and spines\n"
           "  --state PATH  the state file (default /run/offpath/topo-<topo>.state)\n"
           "  -j, --json    up: the namespaces; down: the outcome; hosts: name, address, netns\n"
           "  -v, --verbose print every ip/tc command as it runs\n"
           "  -h, --help    this text\n"
           "Exit status: 0 done, 1 a command failed, 2 a bad parameter or file (the line named).\n");
}

static bool set(int opt, const char *val, void *arg)
{
    struct op_nstopo_cfg *cfg = arg;
    if (opt == 'j')
        cfg->json = true;
    else if (opt == 'v')
        cfg->verbose = true;
    else if (opt == OPT_STATE)
        cfg->state = val;
    else if (opt == OPT_NO_SWITCHES)
        cfg->no_switches = true;
    else
        return false;
    return true;
}

static bool parse_action(const char *word, enum op_nstopo_action *out)
{
    static const char *const names[] = {"up", "down", "hosts", "exec", "switches"};
    static const enum op_nstopo_action actions[] = {OP_NSTOPO_UP, OP_NSTOPO_DOWN, OP_NSTOPO_HOSTS,
                                                    OP_NSTOPO_EXEC, OP_NSTOPO_SWITCHES};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(word, names[i]) == 0) {
            *out = actions[i];
            return true;
        }
    cli_bad(TOOL, "unknown action '%s' (up, down, hosts, exec, switches)", word);
    return false;
}

int cli_topo(int argc, char **argv)
{
    struct op_nstopo_cfg cfg = {0};
    /* exec's COMMAND keeps its own flags: cut argv at "--" before getopt sees it */
    int cut = argc;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) {
            cut = i;
            break;
        }
    int rc = cli_flags(cut, argv, "jvh", options, 'h', help, set, &cfg);
    if (rc >= 0)
        return rc;
    int n = cut - optind;
    if (n < 1) {
        cli_bad(TOOL, "expected an action (up, down, hosts, exec, switches) and FILE; see --help");
        return 2;
    }
    if (!parse_action(argv[optind], &cfg.action))
        return 2;
    int want = cfg.action == OP_NSTOPO_EXEC ? 3 : 2;
    if (n != want) {
        cli_bad(TOOL, "%s expects %s", argv[optind],
                want == 3 ? "FILE HOST -- COMMAND" : "one FILE");
        return 2;
    }
    cfg.file = argv[optind + 1];
    if (cfg.action == OP_NSTOPO_EXEC) {
        cfg.host = argv[optind + 2];
        if (cut + 1 >= argc) {
            cli_bad(TOOL, "exec expects a COMMAND after '--'");
            return 2;
        }
        cfg.argv = argv + cut + 1;
    } else if (cfg.action == OP_NSTOPO_UP && cut != argc && !cfg.no_switches) {
        cfg.argv = argv + cut + 1; /* the switches' own options */
    } else if (cut != argc) {
        cli_bad(TOOL, "'--' and what follows belong to exec, or to up's switches");
        return 2;
    }
    if (cfg.state != NULL && cfg.state[0] == '\0') {
        cli_bad(TOOL, "empty --state");
        return 2;
    }
    return op_nstopo_run(&cfg);
}
