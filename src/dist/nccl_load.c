/* nccl_load.c - NCCL loaded at run time. libtilekit_dist links no NCCL: it
 * opens libnccl.so.2 (or $TK_DIST_NCCL_LIB) at first use, so a process that
 * already loaded one (PyTorch's wheel) shares it (dlopen of a soname that is
 * loaded returns the loaded object), and a machine without NCCL still loads
 * the library and gets TK_ERR_COMM saying why. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dist.h"

int tkd_nccl_open(const char *file, tkd_nccl *t, char *why, size_t len)
{
    memset(t, 0, sizeof *t);
    void *lib = dlopen(file, RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, len, "NCCL cannot be loaded: dlopen(\"%s\"): %s (install NCCL, e.g. the nvidia-nccl-cu12 wheel, "
                 "or name its libnccl.so.2 in $TK_DIST_NCCL_LIB)", file, e ? e : "unknown error");
        return -1;
    }
    /* name, where, required */
    const struct { const char *name; void **slot; int required; } syms[] = {
        { "ncclGetVersion", (void **)&t->GetVersion, 1 },
        { "ncclGetErrorString", (void **)&t->GetErrorString, 1 },
        { "ncclGetLastError", (void **)&t->GetLastError, 0 },
        { "ncclGetUniqueId", (void **)&t->GetUniqueId, 1 },
        { "ncclCommInitRank", (void **)&t->CommInitRank, 1 },
        { "ncclCommDestroy", (void **)&t->CommDestroy, 1 },
        { "ncclCommAbort", (void **)&t->CommAbort, 1 },
        { "ncclCommCount", (void **)&t->CommCount, 1 },
        { "ncclCommCuDevice", (void **)&t->CommCuDevice, 1 },
        { "ncclCommUserRank", (void **)&t->CommUserRank, 1 },
        { "ncclCommGetAsyncError", (void **)&t->CommGetAsyncError, 1 },
        { "ncclGroupStart", (void **)&t->GroupStart, 1 },
        { "ncclGroupEnd", (void **)&t->GroupEnd, 1 },
        { "ncclSend", (void **)&t->Send, 1 },
        { "ncclRecv", (void **)&t->Recv, 1 },
        { "ncclAllGather", (void **)&t->AllGather, 1 },
        { "ncclReduceScatter", (void **)&t->ReduceScatter, 1 },
        { "ncclAllReduce", (void **)&t->AllReduce, 1 },
        { "ncclCommSplit", (void **)&t->CommSplit, 0 },
        { "ncclMemAlloc", (void **)&t->MemAlloc, 0 },
        { "ncclMemFree", (void **)&t->MemFree, 0 },
        { "ncclCommWindowRegister", (void **)&t->CommWindowRegister, 0 },
        { "ncclCommWindowDeregister", (void **)&t->CommWindowDeregister, 0 },
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(lib, syms[i].name);
        if (!*syms[i].slot && syms[i].required) {
            snprintf(why, len, "NCCL cannot be used: %s has no %s (NCCL 2.7 or newer is needed for send/recv)", file,
                     syms[i].name);
            dlclose(lib);
            memset(t, 0, sizeof *t);
            return -1;
        }
    }
    t->lib = lib;
    return 0;
}

const char *tkd_ce_missing(const tkd_nccl *t)
{
    return !t->CommSplit ? "ncclCommSplit" : !t->MemAlloc ? "ncclMemAlloc" : !t->MemFree ? "ncclMemFree"
         : !t->CommWindowRegister ? "ncclCommWindowRegister" : !t->CommWindowDeregister ? "ncclCommWindowDeregister"
         : NULL;
}

/* The process's one table: written once under pthread_once, read-only after. */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static tkd_nccl table;
static int table_ok;
static char table_why[512];

static void open_once(void)
{
    const char *file = getenv("TK_DIST_NCCL_LIB");
    table_ok = tkd_nccl_open(file && *file ? file : "libnccl.so.2", &table, table_why, sizeof table_why) == 0;
}

const tkd_nccl *tkd_nccl_get(char *why, size_t len)
{
    pthread_once(&once, open_once);
    if (!table_ok)
        snprintf(why, len, "%s", table_why);
    return table_ok ? &table : NULL;
}
