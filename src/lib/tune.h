/* tune.h - the tune cache: per-shape kernel choices measured on the user's
 * GPU by `tilekit tune`, read by auto-dispatch when the environment variable
 * TILEKIT_TUNE names the file (at tk_create).
 *
 * File (text):
 *   # comments and blank lines anywhere
 *   tilekit-tune 1
 *   device SMS SM NAME            the GPU it was measured on (132 90 NVIDIA H100 80GB HBM3)
 *   M N K OPA OPB OUT KERNEL      one line per problem: row-major sizes, n|t, fp32|bf16, a kernel name
 * A missing or unreadable file, one measured on another GPU (name, SM
 * version or SM count differ: stale) or any malformed line makes the whole
 * file ignored, with one message naming the file, the line and what was
 * expected (tk_create succeeds and ignores the file; tk_last_error(NULL)
 * then says why: the library never prints): the shape model decides then,
 * as without a file. Never a crash.
 * An entry whose kernel does not support the problem (an unaligned view of
 * the same shape) is skipped for that call.
 */
#ifndef TK_HOST_TUNE_H
#define TK_HOST_TUNE_H

#include <stdint.h>
#include "kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_TUNE_ENV "TILEKIT_TUNE"
#define TK_TUNE_MAGIC "tilekit-tune 1"

typedef struct tk_tune_entry {
    int64_t m, n, k;
    tk_op op_a, op_b;
    tk_dtype c_type;
    const tk_kernel *kernel;
} tk_tune_entry;

/* Parses the text of a tune file for device dev. 0 with *out (malloc'ed,
 * sorted for tk_tune_find; free it) and *n, or -1 with why ("line 7: ...",
 * "stale: ..."), nothing allocated. */
int tk_tune_parse(const char *text, const tk_device *dev, tk_tune_entry **out, int *n, char *why, size_t len);

/* Reads and parses the file at path: as tk_tune_parse, plus "cannot read". */
int tk_tune_load(const char *path, const tk_device *dev, tk_tune_entry **out, int *n, char *why, size_t len);

/* The tune cache named by $TILEKIT_TUNE for device dev (tk_create): 0 with
 * *out and *n (none when the variable is unset or empty), or -1 with
 * nothing loaded and why ("TILEKIT_TUNE=PATH ignored: ..."). */
int tk_tune_from_env(const tk_device *dev, tk_tune_entry **out, int *n, char *why, size_t len);

/* The tuned kernel for a normalized (row-major) problem, or NULL. */
const tk_kernel *tk_tune_find(const tk_tune_entry *e, int n, const tk_args *a);

#ifdef __cplusplus
}
#endif
#endif /* TK_HOST_TUNE_H */
