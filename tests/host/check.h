/* check.h - the tests' tiny framework. A test file defines
 * `void tk_tests(void)` calling TK_TEST(fn) for each test function; inside,
 * CHECK(cond, fmt, ...) records a failure with its message and location.
 * The runner prints "N passed, N failed" last and exits non-zero on any
 * failure. */
#ifndef TK_TESTS_CHECK_H
#define TK_TESTS_CHECK_H

#include <stdio.h>

extern int tk_check_failures;   /* failures inside the current test */

void tk_check_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void tk_run_test(const char *name, void (*fn)(void));
/* Whether tk_run_test would run a test of this name (the runner's
 * name-substring filter): a file can skip the setup of tests it filters out. */
int tk_test_wanted(const char *name);

/* The kernels a GPU test runs, from environment variable `var` (a comma
 * list, e.g. TK_VERIFY_KERNELS=auto,k31_wgmma_cluster): at most cap names
 * into out, pointing into a copy of the variable kept by this function
 * (one list per program). Returns how many; 0 when the variable is unset
 * or empty (the test then takes its default list). */
int tk_test_kernels_from_env(const char *var, const char **out, int cap);

/* Defined by each test file. */
void tk_tests(void);

#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (!(cond))                                       \
            tk_check_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

#define TK_TEST(fn) tk_run_test(#fn, fn)

#endif
