/* Tests for mpirun --topo's pure parts: which host a rank's node is, the
 * prefix MPI's TCP is told to use, the data an INC packet carries over the
 * links, and the PMIx server URIs the rank wrapper repoints at its relay
 * (other URIs, and malformed ones, left alone). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../src/launch/launch_internal.h"

/* hosts listed rack by rack in turn, as the system test lists them */
static const char two_racks[] =
    "topo tr\n"
    "spine s1 10.255.0.1\ntor t1 10.1.0.254\ntor t2 10.2.0.254\n"
    "host h1 10.1.0.1\nhost h5 10.2.0.1\nhost h2 10.1.0.2\nhost h6 10.2.0.4\n"
    "link h1 t1 rate 1gbit queue 256kb\nlink h2 t1 rate 1gbit queue 256kb\n"
    "link h5 t2 rate 1gbit queue 256kb\nlink h6 t2 rate 1gbit queue 256kb\n"
    "link t1 s1 rate 2gbit queue 512kb\nlink t2 s1 rate 2gbit queue 512kb\n";

static struct op_nstopo topo;

static void load(const char *text)
{
    struct op_nstopo_stats st;
    char err[256];
    assert_int_equal(op_nstopo_parse(text, &topo, &st, err, sizeof(err)), OP_OK);
}

static void test_nodes_are_hosts_in_file_order(void **state)
{
    (void)state;
    load(two_racks);
    const char *want[] = {"h1", "h5", "h2", "h6"};
    for (int k = 0; k < 4; k++)
        assert_string_equal(topo.nodes[launch_host_node(&topo, k)].name, want[k]);
    assert_int_equal(launch_host_node(&topo, 4), -1);
}

static void test_hosts_prefix(void **state)
{
    (void)state;
    char cidr[24];
    load(two_racks); /* 10.1.0.1 .. 10.2.0.4, the spine and tors not counted */
    launch_hosts_cidr(&topo, cidr, sizeof(cidr));
    assert_string_equal(cidr, "10.0.0.0/14");
    load("topo one\ntor t 10.9.0.254\nhost a 10.9.0.7\nlink a t rate 1gbit queue 64kb\n");
    launch_hosts_cidr(&topo, cidr, sizeof(cidr));
    assert_string_equal(cidr, "10.9.0.7/32");
    load("topo far\ntor t 10.9.0.254\nhost a 10.9.0.7\nhost b 200.1.1.1\n"
         "link a t rate 1gbit queue 64kb\nlink b t rate 1gbit queue 64kb\n");
    launch_hosts_cidr(&topo, cidr, sizeof(cidr));
    assert_string_equal(cidr, "0.0.0.0/0");
}

static void test_data_fits_1500(void **state)
{
    (void)state;
    /* 1500 - IPv4 20 - UDP 8 - BTH 12 - DETH 8 - INC 36 - ICRC 4 = 1412, to 8s */
    assert_int_equal(launch_data_fits(1500), 1408);
    assert_int_equal(launch_data_fits(3800), 3712);
    assert_int_equal(launch_data_fits(9000), OP_INC_MAX_DATA);
}

static void test_pmix_uris(void **state)
{
    (void)state;
    char out[128];
    const char *uri = "1893793792.0;tcp4://127.0.0.1:52067";
    assert_int_equal(launch_uri_port(uri), 52067);
    assert_true(launch_uri_repoint(uri, 4000, out, sizeof(out)));
    assert_string_equal(out, "1893793792.0;tcp4://127.0.0.1:4000");
    assert_false(launch_uri_repoint(uri, 4000, out, 20)); /* too short: refused, not cut */
    const char *bad[] = {"1.0;tcp4://127.0.0.1:", "1.0;tcp4://127.0.0.1:70000",
                         "1.0;tcp4://127.0.0.1:52x", "1.0;tcp6://[::1]:52067",
                         "1.0;tcp4://10.0.0.1:52067", "", NULL};
    for (int i = 0; i < 7; i++) {
        assert_int_equal(launch_uri_port(bad[i]), 0);
        if (bad[i] != NULL)
            assert_false(launch_uri_repoint(bad[i], 4000, out, sizeof(out)));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nodes_are_hosts_in_file_order),
        cmocka_unit_test(test_hosts_prefix),
        cmocka_unit_test(test_data_fits_1500),
        cmocka_unit_test(test_pmix_uris),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
