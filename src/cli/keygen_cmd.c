/* `offpath keygen NAME`: the key pair secure_channel pins its peer with. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "offpath/channel.h"

static void keygen_help(void)
{
    printf("Usage: offpath keygen NAME\n\n"
           "Writes an X25519 key pair for offpath secure_channel: NAME.key (the secret key,\n"
           "mode 0600) and NAME.pub (the public key, to give to the peer, which pins it with\n"
           "--peer). Refuses to replace existing files.\n");
}

static bool keygen_set(int opt, const char *val, void *cfg)
{
    (void)opt, (void)val, (void)cfg;
    return false;
}

int cli_keygen(int argc, char **argv)
{
    static const struct option kopts[] = {{"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    struct op_chan_keypair kp;
    char why[256];
    int rc = cli_flags(argc, argv, "h", kopts, 'h', keygen_help, keygen_set, NULL);
    if (rc >= 0)
        return rc;
    if (optind + 1 != argc) {
        cli_bad("keygen", "expected one NAME (writes NAME.key and NAME.pub)");
        return 2;
    }
    if (op_chan_keypair_generate(&kp) != OP_OK) {
        cli_bad("keygen", "no random source for the key");
        return 1;
    }
    op_status_t st = op_chan_write_keys(argv[optind], &kp, why);
    memset(&kp, 0, sizeof kp);
    if (st != OP_OK) {
        cli_bad("keygen", "%s", why);
        return 1;
    }
    printf("wrote %s.key (secret, mode 0600) and %s.pub (public)\n", argv[optind], argv[optind]);
    return 0;
}
