/* Unit tests of src/cli's own code: the reader of DOCA's JSON flag files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../src/cli/doca_json.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

struct seen {
    char text[512];
    int n;
    const char *refuse;
};

static bool record(const char *flag, const char *value, void *ctx)
{
    struct seen *s = ctx;
    if (s->refuse != NULL && strcmp(flag, s->refuse) == 0)
        return false;
    size_t at = strlen(s->text);
    snprintf(s->text + at, sizeof s->text - at, "%s=%s;", flag, value);
    s->n++;
    return true;
}

/* The seed's file, comments and trailing comma included. */
static const char seed_json[] =
    "{\n"
    "    \"doca_general_flags\": {\n"
    "        // -l - Set the (numeric) log level for the program <10=DISABLE, ...>\n"
    "        \"log-level\": 30\n"
    "    },\n"
    "    \"doca_program_flags\": {\n"
    "        // -s - message size in bytes\n"
    "        \"msg-size\": 10000,\n"
    "        /* -n */ \"num-msgs\": 10,\n"
    "        \"pci-addr\": \"0000:03:00.0\",   // a // inside a comment\n"
    "    }\n"
    "}\n";

static void test_json_seed_file(void **s)
{
    (void)s;
    struct seen got = {0};
    char why[256];
    assert_int_equal(cli_doca_json_flags(seed_json, strlen(seed_json), record, &got, why), OP_OK);
    assert_string_equal(got.text,
                        "log-level=30;msg-size=10000;num-msgs=10;pci-addr=0000:03:00.0;");
    assert_int_equal(got.n, 4);
    /* "//" inside a string is data, not a comment. */
    const char *url = "{\"doca_program_flags\": {\"pci-addr\": \"unix:/tmp//x\", \"v\": true}}";
    memset(&got, 0, sizeof got);
    assert_int_equal(cli_doca_json_flags(url, strlen(url), record, &got, why), OP_OK);
    assert_string_equal(got.text, "pci-addr=unix:/tmp//x;v=true;");
    /* The caller's refusal names the flag. */
    memset(&got, 0, sizeof got);
    got.refuse = "msg-size";
    assert_int_equal(cli_doca_json_flags(seed_json, strlen(seed_json), record, &got, why),
                     OP_ERR_INVAL);
    assert_string_equal(why, "param \"msg-size\"");
    assert_string_equal(got.text, "log-level=30;");
}

static void test_json_errors(void **s)
{
    (void)s;
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"{\n  \"doca_program_flags\": {\n    \"msg-size\": 10 10\n  }\n}", "line 3, column "},
        {"[1, 2]", "the top level must be an object"},
        {"{\"other\": {}}", "unknown section \"other\""},
        {"{\"doca_program_flags\": 5}", "\"doca_program_flags\" must be an object"},
        {"{\"doca_program_flags\": {\"msg-size\": [1]}}", "value of \"msg-size\" must be"},
        {"{\"doca_program_flags\": {\"msg-size\": 1.5}}", "value of \"msg-size\" must be"},
        {"{\"doca_program_flags\": {\"a\": 1, \"a\": 2}}", "line 1"},
        {"{\"doca_program_flags\": {\"a\": \"x", "line 1"},
        {"", "line "},
        {"{} /* never closed", "line 1"},
    };
    for (size_t i = 0; i < COUNT_OF(bad); i++) {
        struct seen got = {0};
        char why[256] = "";
        assert_int_equal(cli_doca_json_flags(bad[i].text, strlen(bad[i].text), record, &got, why),
                         OP_ERR_MALFORMED);
        if (strstr(why, bad[i].why) == NULL)
            fail_msg("case %zu: '%s' lacks '%s'", i, why, bad[i].why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_seed_file),
        cmocka_unit_test(test_json_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
