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

    # What reached the fake library since log entry n, events numbered in
    # order of creation: ("record", event, stream), ("wait", stream, event),
    # ("destroy", event), ("gemm", stream, c).
    def trace(n=0):
        events, out, made = {}, [], 0
        for name, f, _ in log()[n:]:
            if name == "event_create":   # the fake may reuse a destroyed event's address
                events[f[""]] = made
                made += 1
            elif name == "record":
                out.append(("record", events[f["event"]], f["stream"]))
            elif name == "wait":
                out.append(("wait", f["stream"], events[f["event"]]))
            elif name == "event_destroy":
                out.append(("destroy", events[f[""]]))
            elif name == "gemm":
                out.append(("gemm", f["stream"], f["c"]))
        return out
"""

# A body's opening on the fake torch: tilekit imported with it, bf16 A
# (8 x 4) and B (4 x 6), fp32 C (8 x 6), torch's current stream 0x100.
ON_TORCH = """
    torch = fakes.fake_torch()
    sys.modules["torch"] = torch
    import tilekit
    A, B = torch.Tensor((8, 4), torch.bfloat16), torch.Tensor((4, 6), torch.bfloat16)
    C = torch.Tensor((8, 6), torch.float32)
    torch.current[0] = 0x100
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


def test_ignored_tune_file_is_a_warning():
    """The library never prints: a TILEKIT_TUNE file it ignores is reported
    through tk_last_error(NULL) after tk_create succeeds, and the package
    turns that into one RuntimeWarning per handle created (the fake library
    returns the message of FAKE_TILEKIT_LAST_ERROR)."""
    body = """
    import warnings
    import tilekit
    A, B, C = Fake((8, 4)), Fake((4, 6)), Fake((8, 6), "<f4")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tilekit.gemm(A, B, C)
        tilekit.gemm(A, B, C)
    got = [(x.category.__name__, str(x.message)) for x in w]
    assert got == [("RuntimeWarning", "tilekit: TILEKIT_TUNE=/t ignored: stale")], got
    print("OK")
"""
    run(body, env={"FAKE_TILEKIT_LAST_ERROR": "TILEKIT_TUNE=/t ignored: stale"})


def test_out_allocated_on_the_call_stream():
    """With out=None, out is allocated on the stream the call runs on: with
    stream= another stream than torch's current one, that stream is current
    around torch.empty (the caller's torch.cuda.Stream; torch's default
    stream for the legacy default stream; else an ExternalStream of it) and
    torch's current stream is back afterwards, also when torch.empty fails.
    Allocated on torch's current stream instead, the block could still be in
    use by that stream's pending kernels, or be handed out again on it while
    the call still writes it (tests/gpu/test_python.py shows both)."""
    body = ON_TORCH + """

    def call(**kw):
        del torch.log[:]
        n, current = len(log()), torch.current[0]
        y = tilekit.gemm(A, B, **kw)
        t = trace(n)
        assert len(t) == 1 and t[0][0] == "gemm" and t[0][2] == y.data_ptr(), t
        assert torch.current[0] == current, "torch's current stream left at %#x" % torch.current[0]
        return t[0][1], [e for e in torch.log if e[0] == "empty"][0][4], torch.log

    assert call() == (0x100, 0x100, [("empty", (8, 6), "float32", 0, 0x100)])
    assert call(stream=0x100)[:2] == (0x100, 0x100)   # the current stream: nothing to change
    assert [e for e in call(stream=0x100)[2] if e[0] == "set_stream"] == []
    assert call(stream=0x200)[:2] == (0x200, 0x200)
    s3 = torch.cuda.Stream(0x300, 0)
    run, alloc, tlog = call(stream=s3)
    assert (run, alloc) == (0x300, 0x300) and ("set_stream", 0, 0x300) in tlog, tlog
    run, alloc, tlog = call(stream=torch.cuda.Stream(0x400, 1))   # another device's: not made current there
    assert (run, alloc) == (0x400, 0x400) and 1 not in torch.current, (tlog, torch.current)
    assert call(stream=1)[:2] == (1, 0)   # the legacy default stream: torch's default stream (0)
    torch.current[0] = 0
    run, alloc, tlog = call(stream=1)
    assert (run, alloc) == (1, 0) and [e for e in tlog if e[0] == "set_stream"] == [], tlog   # already current
    torch.current[0] = 0x100
    assert call(stream=0)[:2] == (0, 0)
    assert call(out_dtype="bf16", stream=0x200)[2][1] == ("empty", (8, 6), "bfloat16", 0, 0x200)
    torch.fail_empty = True
    for kw in ({}, {"stream": 0x200}):
        try:
            tilekit.gemm(A, B, **kw)
        except RuntimeError as e:
            assert "out of memory" in str(e), e
        else:
            raise AssertionError("torch.empty's failure was not raised")
        assert torch.current[0] == 0x100, "torch's current stream left at %#x" % torch.current[0]
    print("OK")
"""
    run(body)


def test_streams_joined():
    """A call with a torch operand runs on torch's current stream, also when
    a CAI operand names another stream (it ran on that one, unordered with
    the work producing the torch operand); every other stream a CAI operand
    names is joined: the call's stream waits for an event recorded on it
    before the GEMM, and it waits for one recorded on the call's stream
    after. The legacy default stream (0, 1) is one stream; nothing is joined
    while a stream is being captured (the fake's 0xca0)."""
    body = ON_TORCH + """

    def call(*args, **kw):
        n = len(log())
        tilekit.gemm(*args, **kw)
        return trace(n)

    def joined(run, other, c):
        return [("record", 0, other), ("wait", run, 0), ("destroy", 0), ("gemm", run, c),
                ("record", 1, run), ("wait", other, 1), ("destroy", 1)]

    Bc, Cc = Fake((4, 6), stream=0x700), Fake((8, 6), "<f4", stream=0x900)
    cc = Cc.__cuda_array_interface__["data"][0]
    assert call(A, Bc, C) == joined(0x100, 0x700, C.data_ptr()), trace()
    assert call(A, B, Cc) == joined(0x100, 0x900, cc), trace()
    t = call(A, Bc, Cc)
    assert t[:6] == [("record", 0, 0x900), ("wait", 0x100, 0), ("destroy", 0), ("record", 1, 0x700),
                     ("wait", 0x100, 1), ("destroy", 1)] and t[6] == ("gemm", 0x100, cc), t
    assert t[7:] == [("record", 2, 0x100), ("wait", 0x900, 2), ("destroy", 2), ("record", 3, 0x100),
                     ("wait", 0x700, 3), ("destroy", 3)], t
    n = len(log())
    y = tilekit.gemm(A, Bc)   # out=None: allocated on the call's stream, torch's current one
    assert trace(n) == joined(0x100, 0x700, y.data_ptr()) and torch.log[-1] == ("empty", (8, 6), "float32", 0, 0x100)
    assert call(A, Bc, C, stream=0x700) == [("gemm", 0x700, C.data_ptr())]   # stream= that stream: nothing to join
    assert call(A, Bc, Fake((8, 6), "<f4"), stream=0x500)[3][:2] == ("gemm", 0x500)
    torch.current[0] = 0
    assert call(A, Fake((4, 6), stream=1), C) == [("gemm", 0, C.data_ptr())]   # both the legacy default stream
    torch.current[0] = 0xca0   # being captured
    assert call(A, Bc, C) == [("gemm", 0xca0, C.data_ptr())]
    torch.current[0] = 0x100
    assert call(A, Fake((4, 6), stream=0xca0), C) == [("gemm", 0x100, C.data_ptr())]
    # no torch operand: out's CAI stream, then A's, then B's; the others joined
    Ac = Fake((8, 4), stream=0x500)
    assert call(Ac, Fake((4, 6)), Cc) == joined(0x900, 0x500, cc), trace()
    assert call(Ac, Fake((4, 6), stream=0x500), Fake((8, 6), "<f4"))[0][:2] == ("gemm", 0x500)
    print("OK")
"""
    run(body)
