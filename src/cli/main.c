/* The offpath multi-call binary: `offpath <tool> [flags]`, or invoked through a
 * symlink named after the tool. It parses nothing itself but the tool name. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        printf("usage: offpath <tool> [flags]\n");
        return argc < 2 ? 2 : 0;
    }
    fprintf(stderr, "offpath: unknown tool '%s'\n", argv[1]);
    return 2;
}
