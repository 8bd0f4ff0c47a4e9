/* lab_group_sizes.c - the lab's own group sizes for
 * tests/python/test_grouped_suite.py (built there with src/lab/lab_group.c
 * and lab_num.c): `lab_group_sizes SEED SPEC...` prints one line per SPEC,
 * its sizes comma-separated, or "error " and the lab's message. */
#include <stdio.h>
#include <stdlib.h>
#include "lab/lab.h"

static tk_lab_group_spec spec;   /* 8 KB */
static int64_t sizes[TK_LAB_GROUPS_MAX];

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s SEED SPEC...\n", argv[0]);
        return 2;
    }
    const uint64_t seed = strtoull(argv[1], NULL, 10);
    for (int i = 2; i < argc; i++) {
        char why[512];
        if (tk_lab_group_spec_parse(argv[i], &spec, why, sizeof why)) {
            printf("error %s\n", why);
            continue;
        }
        tk_lab_group_sizes(&spec, seed, sizes);
        for (int g = 0; g < spec.count; g++)
            printf("%s%lld", g ? "," : "", (long long)sizes[g]);
        printf("\n");
    }
    return 0;
}
