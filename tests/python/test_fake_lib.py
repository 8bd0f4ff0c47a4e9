"""The wrapper against a fake libtilekit (fake_tilekit.c: every call
succeeds and is logged) on both backends, each in a fresh interpreter
(fakes.run): what reaches the library without a GPU, such as which handle
each thread uses and when it is destroyed. Needs a C compiler ($CC or cc)
to build the fake; fails, never skips, without one.
"""
import os
import tempfile

import fakes

PRELUDE = """if True:
    import ctypes, os, sys, threading
    import fakes
    from test_wrapper import Fake
    fake = ctypes.CDLL(os.environ["TILEKIT_LIB"])
    fake.fake_log.restype = ctypes.c_char_p

    def log():
        return fakes.log(fake.fake_log().decode())
"""


def run(body, env=None):
    """PRELUDE + body on each backend with the fake library; returns
    [(backend, output, the log file's entries)], each run having printed OK."""
    results = []
    for name, ext in fakes.backends():
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "log")
            rc, out = fakes.run(PRELUDE + body, ext, lib=fakes.fake_lib(), env=dict(env or {}, FAKE_TILEKIT_LOG=path))
            assert rc == 0 and out.rstrip().endswith("OK"), "%s backend:\n%s" % (name, out)
            with open(path) as f:
                results.append((name, out, fakes.log(f.read())))
    return results


def test_thread_handles_destroyed_when_the_thread_ends():
    """Each thread gets its own handle, destroyed on that thread when it
    ends, before join() returns; a pool's worker keeps its handle while it
    lives. The main thread's handle is never destroyed, not even at exit (a
    destroy racing the CUDA runtime's teardown)."""
    body = """
    import concurrent.futures
    import tilekit
    A, B, C = Fake((8, 4)), Fake((4, 6)), Fake((8, 6), "<f4")

    def work():
        tilekit.gemm(A, B, C)
        tilekit.supports(A, B, C)
        tilekit.gemm(A, B, C)

    work()
    main = [e[1][""] for e in log() if e[0] == "create"]
    assert len(main) == 1, log()
    print("MAIN %#x" % main[0])
    for i in range(6):
        n = len(log())
        t = threading.Thread(target=work)
        t.start()
        t.join()
        new = log()[n:]
        created = [e[1][""] for e in new if e[0] == "create"]
        destroyed = [e[1][""] for e in new if e[0] == "destroy"]
        assert len(created) == 1 and destroyed == created, new
        assert all(e[2] == t.ident for e in new if e[0] in ("create", "destroy")), (t.ident, new)
        assert [e[1]["handle"] for e in new if e[0] == "gemm"] == created * 2, new
    n = len(log())
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(work) for _ in range(20)]:
            f.result()
        created = [e[1][""] for e in log()[n:] if e[0] == "create"]
        assert 1 <= len(created) <= 2 and not [e for e in log()[n:] if e[0] == "destroy"], log()[n:]
    destroyed = [e[1][""] for e in log()[n:] if e[0] == "destroy"]
    assert sorted(destroyed) == sorted(created), log()[n:]
    work()   # the main thread's handle again
    assert [e[1]["handle"] for e in log()[-2:]] == main * 2, log()[-2:]
    print("OK")
"""
    for name, out, entries in run(body):
        main = int(out.split("MAIN ")[1].split()[0], 16)
        assert ("destroy", {"": main}) not in [(e[0], e[1]) for e in entries], \
            "%s backend: the main thread's handle was destroyed at exit" % name
        creates = sum(1 for e in entries if e[0] == "create")
        destroys = sum(1 for e in entries if e[0] == "destroy")
        assert destroys == creates - 1, "%s backend: %d handles created, %d destroyed" % (name, creates, destroys)
