/* transport.c - the pure parts of the transport: which one a call asks
 * for (d's setting, $TK_DIST_TRANSPORT, the default) and the chunk-major
 * layout of the copy-engine transport's windows. No GPU, no NCCL:
 * tests/host/test_dist.c checks them. */
#include <stdio.h>
#include <string.h>
#include "dist.h"

const char *tkd_transport_name(int t)
{
    return t == TK_DIST_TRANSPORT_AUTO ? "auto" : t == TK_DIST_TRANSPORT_P2P ? "p2p"
         : t == TK_DIST_TRANSPORT_CE ? "ce" : "?";
}

int tkd_transport_choose(int setting, const char *env, int *from, char *why, size_t len)
{
    if (setting >= 0) {
        *from = 1;
        return setting;
    }
    if (env && *env) {
        for (int t = TK_DIST_TRANSPORT_AUTO; t <= TK_DIST_TRANSPORT_CE; t++)
            if (!strcmp(env, tkd_transport_name(t))) {
                *from = 2;
                return t;
            }
        snprintf(why, len, "$TK_DIST_TRANSPORT: '%s' is not a transport (auto, p2p or ce)", env);
        return -1;
    }
    *from = 0;
    return TK_DIST_TRANSPORT_AUTO;
}

size_t tkd_ce_slot(const int64_t *bounds, int nranks, int i, int j, size_t row_bytes)
{
    const int64_t rows = bounds[i + 1] - bounds[i];
    return ((size_t)nranks * (size_t)bounds[i] + (size_t)j * (size_t)rows) * row_bytes;
}

size_t tkd_ce_window_bytes(int nranks, int64_t block_rows, size_t row_bytes)
{
    const size_t bytes = (size_t)nranks * (size_t)(block_rows > 0 ? block_rows : 0) * row_bytes;
    return (bytes + TKD_CE_GRAIN - 1) / TKD_CE_GRAIN * TKD_CE_GRAIN;
}
