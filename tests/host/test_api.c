/* test_api.c - the public API's argument checks, without a GPU. */
#include <string.h>
#include "tilekit.h"
#include "check.h"

static void test_status_strings(void)
{
    for (int s = 0; s <= TK_ERR_INTERNAL; s++)
        CHECK(strncmp(tk_status_string((tk_status)s), "TK_", 3) == 0, "status %d has no name", s);
    CHECK(strstr(tk_status_string((tk_status)999), "unknown") != NULL, "unknown status not flagged");
}

static void test_null_handle(void)
{
    tk_status st = tk_gemm(NULL, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 4, 4, 4, 1.0f, (void *)16, 4, (void *)16, 4, 0.0f,
                           (void *)16, TK_F32, 4, NULL, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE, "got %d", st);
    CHECK(strstr(tk_last_error(NULL), "handle") != NULL, "message: %s", tk_last_error(NULL));
}

void tk_tests(void)
{
    TK_TEST(test_status_strings);
    TK_TEST(test_null_handle);
}
