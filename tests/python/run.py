"""Runs every test_* function of tests/python/test_*.py, in file and definition
order, with no dependencies beyond the standard library (no pytest, no numpy,
no GPU). Prints "ok"/"FAIL" per test and "N passed, N failed" last; exits
non-zero on any failure. Usage: python3 tests/python/run.py [name-substring]

Tests that need libtilekit load it from $TILEKIT_LIB (tests/run_cpu.sh sets
it) or build/libtilekit.so; if it cannot be loaded they fail, never skip.
With TILEKIT_TEST_INSTALLED=1 they test the installed tilekit package (its
own extension and library) instead of the checkout's python/.
"""
import importlib.util
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if not os.environ.get("TILEKIT_TEST_INSTALLED"):   # else: the tilekit that is installed
    sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)


def main():
    pattern = sys.argv[1] if len(sys.argv) > 1 else None
    passed = failed = 0
    for fname in sorted(os.listdir(HERE)):
        if not (fname.startswith("test_") and fname.endswith(".py")):
            continue
        modname = fname[:-3]
        try:
            spec = importlib.util.spec_from_file_location(modname, os.path.join(HERE, fname))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        except Exception:
            print("FAIL %s (import)" % modname)
            traceback.print_exc(file=sys.stdout)
            failed += 1
            continue
        # functions in definition order (module dicts keep insertion order)
        for name, fn in list(vars(mod).items()):
            if not (name.startswith("test_") and callable(fn) and getattr(fn, "__module__", None) == modname):
                continue
            full = "%s.%s" % (modname, name)
            if pattern and pattern not in full:
                continue
            try:
                fn()
            except Exception:
                failed += 1
                print("FAIL %s" % full)
                for line in traceback.format_exc().rstrip().splitlines():
                    print("    " + line)
            else:
                passed += 1
                print("ok   %s" % full)
            sys.stdout.flush()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
