"""The Python GPU tests' shared pieces: raises(), and the runner (every
test_* function of a module, in definition order, filtered by a substring,
argv[1]; ok/FAIL lines with the traceback, then the "N passed, N failed"
line run_gpu.sh reads)."""
import sys
import traceback


def run_tests(namespace, argv):
    pattern = argv[1] if len(argv) > 1 else None
    passed = failed = 0
    for name, fn in list(namespace.items()):
        if not name.startswith("test_") or not callable(fn) or (pattern and pattern not in name):
            continue
        try:
            fn()
        except Exception:
            failed += 1
            print("FAIL %s" % name)
            for line in traceback.format_exc().rstrip().splitlines():
                print("    " + line)
        else:
            passed += 1
            print("ok   %s" % name)
        sys.stdout.flush()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def raises(exc, fn, *args, match=(), **kw):
    """fn(*args, **kw) must raise exc whose message contains each of match;
    returns the exception."""
    try:
        fn(*args, **kw)
    except exc as e:
        for m in ((match,) if isinstance(match, str) else match):
            assert m in str(e), "message %r lacks %r" % (str(e), m)
        return e
    except Exception as e:
        raise AssertionError("expected %s, got %s: %s" % (exc.__name__, type(e).__name__, e)) from e
    raise AssertionError("expected %s, nothing raised" % exc.__name__)
