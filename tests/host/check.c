/* check.c - runner for check.h. Usage: test_x [name-substring] */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

int tk_check_failures;
static int passed, failed;
static const char *filter;

void tk_check_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "    %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    tk_check_failures++;
}

int tk_test_wanted(const char *name) { return !filter || strstr(name, filter) != NULL; }

void tk_run_test(const char *name, void (*fn)(void))
{
    if (!tk_test_wanted(name))
        return;
    tk_check_failures = 0;
    fn();
    if (tk_check_failures) {
        failed++;
        printf("FAIL %s\n", name);
    } else {
        passed++;
        printf("ok   %s\n", name);
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    filter = argc > 1 ? argv[1] : NULL;
    tk_tests();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

int tk_test_kernels_from_env(const char *var, const char **out, int cap)
{
    static char list[1024];
    const char *env = getenv(var);
    int n = 0;
    if (!env || !*env)
        return 0;
    snprintf(list, sizeof list, "%s", env);
    for (char *t = strtok(list, ","); t && n < cap; t = strtok(NULL, ","))
        out[n++] = t;
    return n;
}
