/* dist_fork.h - one process per GPU without MPI, for the distributed test
 * and bench (issue 41). The parent never touches CUDA (a child of a process
 * that initialized CUDA may not use it): it counts the GPUs in a probe
 * child, then forks R children; child 0 makes NCCL's unique id and hands it
 * to the others through shared memory; each child takes GPU `rank`, joins
 * the communicator (tk_dist_comm_init) and runs the given function.
 *
 * Nothing hangs: each child has a watchdog thread that, past the timeout,
 * aborts its communicator (tk_dist_comm_abort: NCCL's kernels then return)
 * and exits 124; the parent kills every child still running 20 s after
 * that. A child exits 0 when its function returned 0 and no CHECK failed.
 *
 * The device machines keep NVLink multicast off; tkf_no_multicast() sets
 * the three variables (without overriding a value already there) before
 * anything loads NCCL. */
#ifndef TK_TESTS_DIST_FORK_H
#define TK_TESTS_DIST_FORK_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "tilekit_dist.h"

#define TKF_MAX_RANKS 8

static inline void tkf_no_multicast(void)
{
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 0);
    setenv("NVSHMEM_DISABLE_NVLS", "1", 0);
}

/* The number of CUDA devices, asked in a child so that this process never
 * initializes CUDA; -1 if the probe failed. */
static inline int tkf_gpu_count(void)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess)
            n = 0;
        ssize_t w = write(fd[1], &n, sizeof n);
        _exit(w == (ssize_t)sizeof n ? 0 : 1);
    }
    close(fd[1]);
    int n = -1;
    if (pid < 0 || read(fd[0], &n, sizeof n) != (ssize_t)sizeof n)
        n = -1;
    close(fd[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return n;
}

typedef int (*tkf_fn)(int rank, int nranks, struct ncclComm *comm, void *arg);

typedef struct tkf_shared {
    volatile int ready;                  /* 1: id written; -1: rank 0 could not make one */
    unsigned char id[TK_DIST_UNIQUE_ID_BYTES];
} tkf_shared;

typedef struct tkf_watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, rank, timeout_s;
    struct ncclComm *comm;
} tkf_watch;

static void *tkf_watchdog(void *p)
{
    tkf_watch *w = p;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += w->timeout_s;
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (!w->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
    int fire = !w->done;
    pthread_mutex_unlock(&w->mu);
    if (fire) {
        fprintf(stderr, "rank %d: timed out after %d s: aborting the communicator (ncclCommAbort)\n", w->rank,
                w->timeout_s);
        if (w->comm)
            tk_dist_comm_abort(w->comm);
        _exit(124);
    }
    return NULL;
}

/* The child's side: never returns. */
static inline void tkf_child(int rank, int nranks, int timeout_s, tkf_shared *sh, tkf_fn fn, void *arg)
{
    tkf_watch w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, rank, timeout_s, NULL };
    pthread_t th;
    if (pthread_create(&th, NULL, tkf_watchdog, &w)) {
        fprintf(stderr, "rank %d: no watchdog thread\n", rank);
        _exit(3);
    }
    cudaError_t e = cudaSetDevice(rank);
    if (e != cudaSuccess) {
        fprintf(stderr, "rank %d: cudaSetDevice(%d): %s\n", rank, rank, cudaGetErrorString(e));
        _exit(3);
    }
    if (rank == 0) {
        tk_status st = tk_dist_unique_id(sh->id);
        if (st)
            fprintf(stderr, "rank 0: tk_dist_unique_id: %s\n", tk_dist_last_error(NULL));
        __sync_synchronize();
        sh->ready = st ? -1 : 1;
    }
    while (!sh->ready) {
        struct timespec nap = { 0, 1000000 };
        nanosleep(&nap, NULL);   /* the watchdog ends a wait that lasts */
    }
    __sync_synchronize();
    if (sh->ready < 0)
        _exit(3);
    struct ncclComm *comm = NULL;
    if (tk_dist_comm_init(&comm, nranks, (const void *)sh->id, rank)) {
        fprintf(stderr, "rank %d: %s\n", rank, tk_dist_last_error(NULL));
        _exit(3);
    }
    pthread_mutex_lock(&w.mu);
    w.comm = comm;
    pthread_mutex_unlock(&w.mu);
    int rc = fn(rank, nranks, comm, arg);
    if (rc != 125)   /* 125: the function aborted the communicator itself */
        tk_dist_comm_destroy(comm);
    pthread_mutex_lock(&w.mu);
    w.done = 1;
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.mu);
    pthread_join(th, NULL);
    fflush(stdout);
    fflush(stderr);
    _exit(rc == 125 ? 0 : rc ? rc : 0);
}

/* Runs fn on nranks GPUs, one process each. 0 when every child exited 0;
 * else 1 with why (each rank's exit status, or the kill). */
static inline int tkf_run(int nranks, int timeout_s, tkf_fn fn, void *arg, char *why, size_t len)
{
    if (nranks < 1 || nranks > TKF_MAX_RANKS) {
        snprintf(why, len, "%d ranks (1..%d)", nranks, TKF_MAX_RANKS);
        return 1;
    }
    tkf_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        snprintf(why, len, "mmap: %s", strerror(errno));
        return 1;
    }
    memset(sh, 0, sizeof *sh);
    fflush(stdout);
    fflush(stderr);
    pid_t pid[TKF_MAX_RANKS];
    int status[TKF_MAX_RANKS], left = 0;
    for (int r = 0; r < nranks; r++) {
        pid[r] = fork();
        if (pid[r] == 0)
            tkf_child(r, nranks, timeout_s, sh, fn, arg);
        status[r] = -1;
        left += pid[r] > 0;
    }
    time_t deadline = time(NULL) + timeout_s + 20;
    int killed = 0;
    while (left > 0) {
        for (int r = 0; r < nranks; r++) {
            if (pid[r] <= 0 || status[r] != -1)
                continue;
            int st = 0;
            pid_t got = waitpid(pid[r], &st, WNOHANG);
            if (got == pid[r]) {
                status[r] = st;
                left--;
            }
        }
        if (left > 0 && time(NULL) > deadline && !killed) {
            for (int r = 0; r < nranks; r++)
                if (pid[r] > 0 && status[r] == -1)
                    kill(pid[r], SIGKILL);
            killed = 1;
        }
        if (left > 0) {
            struct timespec nap = { 0, 5000000 };
            nanosleep(&nap, NULL);
        }
    }
    munmap(sh, sizeof *sh);
    int bad = 0, n = 0;
    why[0] = '\0';
    for (int r = 0; r < nranks; r++) {
        int ok = pid[r] > 0 && WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0;
        if (ok)
            continue;
        bad = 1;
        if (pid[r] <= 0)
            n += snprintf(why + n, n < (int)len ? len - n : 0, "rank %d: fork failed; ", r);
        else if (WIFSIGNALED(status[r]))
            n += snprintf(why + n, n < (int)len ? len - n : 0, "rank %d: signal %d%s; ", r, WTERMSIG(status[r]),
                          killed ? " (killed after the timeout)" : "");
        else
            n += snprintf(why + n, n < (int)len ? len - n : 0, "rank %d: exit %d%s; ", r, WEXITSTATUS(status[r]),
                          WEXITSTATUS(status[r]) == 124 ? " (timed out)" : "");
    }
    return bad;
}

#endif /* TK_TESTS_DIST_FORK_H */
