"""Issue 37's Python API against the fake libtilekit (fake_tilekit.c), on
both backends, each in a fresh interpreter (test_fake_lib.run): what
reaches the library without a GPU. A plan runs on the stream gemm would
choose (torch's current one, stream=, CAI streams joined), on the handle
of the thread that made it and in no other thread; it is destroyed by
close() or when collected; the settings reach the thread's handle.
"""
from test_fake_lib import ON_TORCH, run


def test_plan_runs_and_settings():
    body = ON_TORCH + """
    import gc
    from test_wrapper import runtime_errors_in_a_thread
    n = len(log())
    p = tilekit.plan(A, B, C)
    made = [e for e in log()[n:] if e[0] == "plan_create"]
    assert p.kernel == "k01_naive" and len(made) == 1, (p.kernel, made)
    handle, ptr = made[0][1]["handle"], made[0][1]["plan"]

    def runs(n):
        return [(e[1]["handle"], e[1]["plan"], e[1]["stream"], e[1]["c"]) for e in log()[n:] if e[0] == "plan_run"]

    n = len(log())
    assert p(A, B, C) is C
    assert p.run(A, B, C, stream=0x200) is C
    assert runs(n) == [(handle, ptr, 0x100, C.data_ptr()), (handle, ptr, 0x200, C.data_ptr())], runs(n)
    # gemm on this thread uses the same handle
    n = len(log())
    tilekit.gemm(A, B, C)
    assert [e[1]["handle"] for e in log()[n:] if e[0] == "gemm"] == [handle]
    # CAI operands alone: their stream
    Cc = Fake((8, 6), "<f4", stream=0x300)
    n = len(log())
    tilekit.plan(Fake((8, 4)), Fake((4, 6)), Cc).run(Fake((8, 4)), Fake((4, 6)), Cc)
    t = [(e[0], e[1].get("stream")) for e in log()[n:] if e[0] in ("wait", "record", "plan_run")]
    assert t == [("plan_run", 0x300)], t
    # a CAI out naming another stream than torch's: the run waits for it, and it for the run
    n = len(log())
    tilekit.plan(A, B, Cc).run(A, B, Cc)
    t = [(e[0], e[1].get("stream")) for e in log()[n:] if e[0] in ("wait", "record", "plan_run")]
    assert t == [("record", 0x300), ("wait", 0x100), ("plan_run", 0x100), ("record", 0x100), ("wait", 0x300)], t
    # another thread: refused before the library
    n = len(log())
    got = runtime_errors_in_a_thread(p.run, A, B, C)
    assert got and runs(n) == [], (got, runs(n))
    n = len(log())
    p.close()
    assert [e[1][""] for e in log()[n:] if e[0] == "plan_destroy"] == [ptr]
    q = tilekit.plan(A, B, C)
    n = len(log())
    del q
    gc.collect()
    assert len([e for e in log()[n:] if e[0] == "plan_destroy"]) == 1, log()[n:]
    # the settings reach this thread's handle
    n = len(log())
    tilekit.set_workspace(0x7000000, 1 << 20)
    tilekit.set_workspace_limit(4096)
    tilekit.set_workspace_limit(None)
    tilekit.set_split_k(False)
    tilekit.release_workspaces(stream=0x500)
    got = [(e[0], e[1]) for e in log()[n:] if e[0] != "set_device"]
    assert got == [("set_workspace", {"handle": handle, "ptr": 0x7000000, "bytes": str(1 << 20)}),
                   ("set_workspace_limit", {"handle": handle, "bytes": "4096"}),
                   ("set_workspace_limit", {"handle": handle, "bytes": str(2 ** 64 - 1)}),
                   ("set_split_k", {"handle": handle, "mode": "1"}),
                   ("release", {"handle": handle, "stream": 0x500})], got
    print("OK")
"""
    run(body)
