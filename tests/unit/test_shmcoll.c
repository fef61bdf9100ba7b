/* shmcoll: real processes (fork) reduce and broadcast through one segment;
 * every rank checks every byte against a reference folded in rank order. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "offpath/reduce.h"
#include "offpath/shmcoll.h"

struct case_ {
    unsigned type, op;
    size_t count;
};

static const struct case_ cases[] = {
    {OP_RED_INT32, OP_RED_SUM, 1},      {OP_RED_INT32, OP_RED_SUM, 10000},
    {OP_RED_FLOAT64, OP_RED_SUM, 7},    {OP_RED_FLOAT64, OP_RED_SUM, 3001},
    {OP_RED_UINT32, OP_RED_MAX, 100},   {OP_RED_INT8, OP_RED_PROD, 333},
    {OP_RED_FLOAT32, OP_RED_MIN, 4097}, {OP_RED_UINT64, OP_RED_BXOR, 65},
    {OP_RED_INT16, OP_RED_LAND, 19},    {OP_RED_INT32, OP_RED_SUM, 0},
};

static char seg_name[OP_SHM_NAME_MAX];

/* Element i of rank r's input: varied bits, negative values, fractions. */
static void fill(unsigned type, unsigned rank, size_t count, void *buf)
{
    size_t esz = op_red_type_size(type);
    for (size_t i = 0; i < count; i++) {
        unsigned char *e = (unsigned char *)buf + i * esz;
        double x = ((double)(i % 97) - 40.0) * 0.37 + rank * 1.5;
        int64_t v = (int64_t)((i * 2654435761u) ^ (rank * 40503u)) - (int64_t)(i % 3);
        if (type == OP_RED_FLOAT32) {
            float f = (float)x;
            memcpy(e, &f, esz);
        } else if (type == OP_RED_FLOAT64) {
            memcpy(e, &x, esz);
        } else {
            memcpy(e, &v, esz); /* little endian: the low bytes */
        }
    }
}

static void *reference(const struct case_ *c, unsigned n)
{
    size_t bytes = c->count * op_red_type_size(c->type) + 1;
    unsigned char *acc = malloc(bytes), *in = malloc(bytes);
    fill(c->type, 0, c->count, acc);
    for (unsigned r = 1; r < n; r++) {
        fill(c->type, r, c->count, in);
        op_reduce(c->op, c->type, acc, in, c->count);
    }
    free(in);
    return acc;
}

/* One rank's part in every case, `rounds` times over; 0 if all was right. */
static int run_rank(struct op_shm_group *g, unsigned n, unsigned rounds, bool in_place)
{
    int bad = 0;
    for (unsigned round = 0; round < rounds; round++) {
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
            const struct case_ *c = &cases[k];
            size_t bytes = c->count * op_red_type_size(c->type);
            unsigned char *in = malloc(bytes + 1), *out = malloc(bytes + 1);
            fill(c->type, op_shm_rank(g), c->count, in);
            memset(out, 0xa5, bytes + 1);
            void *dst = in_place ? in : out;
            op_shm_reduce(g, in, op_shm_rank(g) == 0 ? dst : NULL, c->count, c->type, c->op);
            if (op_shm_rank(g) != 0)
                dst = out;
            op_shm_bcast(g, dst, bytes);
            void *want = reference(c, n);
            bad |= memcmp(dst, want, bytes) != 0;
            bad |= !in_place && out[bytes] != 0xa5; /* nothing past the end */
            free(want);
            free(in);
            free(out);
        }
    }
    return bad;
}

static void run_group(unsigned n, size_t slot, unsigned rounds, bool in_place)
{
    snprintf(seg_name, sizeof(seg_name), "/offpath-test-%d-%u", (int)getpid(), n);
    struct op_shm_group *g = NULL;
    assert_int_equal(op_shm_create(seg_name, n, slot, &g), OP_OK);
    pid_t kids[16];
    for (unsigned r = 1; r < n; r++) {
        kids[r] = fork();
        assert_true(kids[r] >= 0);
        if (kids[r] == 0) {
            struct op_shm_group *mine = NULL;
            if (op_shm_attach(seg_name, r, &mine) != OP_OK)
                _exit(2);
            int bad = run_rank(mine, n, rounds, in_place);
            op_shm_free(mine);
            _exit(bad);
        }
    }
    int bad = run_rank(g, n, rounds, in_place);
    for (unsigned r = 1; r < n; r++) {
        int status = 0;
        assert_int_equal(waitpid(kids[r], &status, 0), kids[r]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    op_shm_unlink(seg_name);
    op_shm_free(g);
    assert_int_equal(bad, 0);
}

static void test_one_rank(void **state)
{
    (void)state;
    run_group(1, OP_SHM_SLOT_DEFAULT, 2, false);
}

static void test_two_ranks_tiny_slots(void **state)
{
    (void)state;
    run_group(2, 64, 3, false); /* 64-byte slots: every message in many steps */
}

static void test_five_ranks_oversubscribed(void **state)
{
    (void)state;
    run_group(5, 1000, 20, false); /* slot rounded down to 960 bytes */
}

static void test_three_ranks_in_place(void **state)
{
    (void)state;
    run_group(3, OP_SHM_SLOT_DEFAULT, 5, true);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    struct op_shm_group *g = NULL;
    assert_int_equal(op_shm_create(NULL, 2, 4096, &g), OP_ERR_INVAL);
    assert_int_equal(op_shm_create("/offpath-test-x", 0, 4096, &g), OP_ERR_INVAL);
    assert_int_equal(op_shm_create("/offpath-test-x", 2, 8, &g), OP_ERR_INVAL);
    assert_int_equal(op_shm_attach("/offpath-test-does-not-exist", 0, &g),
                     op_status_from_errno(ENOENT));
    assert_null(g);
}

static void test_attach_rejects_foreign_segments(void **state)
{
    (void)state;
    char name[OP_SHM_NAME_MAX];
    snprintf(name, sizeof(name), "/offpath-test-bad-%d", (int)getpid());
    struct op_shm_group *g = NULL, *h = NULL;
    assert_int_equal(op_shm_create(name, 2, 4096, &g), OP_OK);
    assert_int_equal(op_shm_create(name, 2, 4096, &h), op_status_from_errno(EEXIST)); /* taken */
    assert_int_equal(op_shm_attach(name, 2, &h), OP_ERR_MALFORMED); /* no rank 2 */
    assert_null(h);
    op_shm_unlink(name);
    op_shm_free(g);

    /* a segment of the right size but someone else's bytes */
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(fd >= 0);
    unsigned char junk[8192];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (unsigned char)(i * 131u + 7u);
    assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
    close(fd);
    assert_int_equal(op_shm_attach(name, 0, &h), OP_ERR_MALFORMED);
    assert_null(h);
    fd = shm_open(name, O_RDWR | O_TRUNC, 0600); /* and an empty one */
    close(fd);
    assert_int_equal(op_shm_attach(name, 0, &h), OP_ERR_MALFORMED);
    op_shm_unlink(name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank),
        cmocka_unit_test(test_two_ranks_tiny_slots),
        cmocka_unit_test(test_five_ranks_oversubscribed),
        cmocka_unit_test(test_three_ranks_in_place),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_attach_rejects_foreign_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
