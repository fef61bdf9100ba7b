/* The flags the agent's tools share (`offpath allreduce`, `offpath
 * dpa_all_to_all -r daemon`): where a daemon listens, its peers, its keys. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "offpath/agent.h"

bool cli_agent_keys(const char *tool, const char *key, const char *peer,
                    struct op_chan_keypair *kp, uint8_t *peer_pub)
{
    char why[256];
    if (key == NULL || peer == NULL) {
        cli_bad(tool, "--key and --peer are needed (offpath keygen makes key pairs)");
        return false;
    }
    if (op_chan_read_secret(key, kp, why) != OP_OK) {
        cli_bad(tool, "--key %s: %s", key, why);
        return false;
    }
    if (op_chan_read_public(peer, peer_pub, why) != OP_OK) {
        cli_bad(tool, "--peer %s: %s", peer, why);
        return false;
    }
    return true;
}

bool cli_agent_addresses(const char *tool, const char *flag, const char *text,
                         uint16_t default_port, uint32_t max, uint32_t *ip, uint16_t *port,
                         uint32_t *n)
{
    char list[4096];
    snprintf(list, sizeof list, "%s", text != NULL ? text : "");
    *n = 0;
    for (char *save, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        port[*n] = default_port;
        if (*n == max || op_parse_ipv4(tok, &ip[*n], &port[*n]) != OP_OK) {
            cli_bad(tool, "invalid value '%s' in %s: IP[:PORT], at most %u", tok, flag, max);
            return false;
        }
        (*n)++;
    }
    return true;
}

bool cli_agent_flag(const char *tool, int opt, const char *v, struct cli_agent_flags *f,
                    bool *known)
{
    uint16_t no_port = 0;
    *known = true;
    switch (opt) {
    case 't': return cli_u64(tool, "-t (--listen-port)", v, 1, 65534, &f->listen_port);
    case 'c': return cli_u64(tool, "-c (--num-clients)", v, 1, OP_AGENT_MAX_CLIENTS, &f->clients);
    case 'a': f->addresses = v; return true;
    case CLI_AGENT_OPT_KEY: f->key = v; return true;
    case CLI_AGENT_OPT_PEER: f->peer = v; return true;
    case CLI_AGENT_OPT_TIMEOUT: return cli_u64(tool, "--timeout", v, 1, 3600, &f->timeout_s);
    case 'l':
        if ((f->log_level = op_log_level_parse(v)) >= 0)
            return true;
        cli_bad(tool, "invalid value '%s' for -l (--log-level): 10..70", v);
        return false;
    case CLI_AGENT_OPT_IP:
        if (op_parse_ipv4(v, &f->ip, &no_port) == OP_OK && no_port == 0)
            return true;
        cli_bad(tool, "invalid value '%s' for --ip (expected an IPv4 address)", v);
        return false;
    }
    *known = false;
    return false;
}

int cli_agent_daemon_net(const char *tool, const struct cli_agent_flags *f, uint16_t default_port,
                         struct op_agent_daemon_net *net)
{
    *net = (struct op_agent_daemon_net){.ip = f->ip, .port = (uint16_t)f->listen_port,
                                        .clients = (uint32_t)f->clients,
                                        .timeout_ns = f->timeout_s * OP_NS_PER_S};
    if (f->listen_port == 0 || f->clients == 0) {
        cli_bad(tool, "a daemon needs -t (--listen-port) and -c (--num-clients)");
        return 2;
    }
    if (!cli_agent_addresses(tool, "-a (--address)", f->addresses, default_port,
                             OP_AGENT_MAX_DAEMONS, net->daemon_ip, net->daemon_port,
                             &net->n_daemons))
        return 2;
    if (net->n_daemons == 0) {
        cli_bad(tool, "-a (--address) is needed: every daemon's IP:PORT");
        return 2;
    }
    return cli_agent_keys(tool, f->key, f->peer, &net->key, net->clients_pub) ? 0 : 2;
}
