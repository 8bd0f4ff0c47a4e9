"""bench/grouped_suite.py - the part of torch_bench.py's grouped and bmm modes
that needs neither torch nor a GPU (tests/python/test_grouped_suite.py checks
it on the CPU): a shape suite's lines, a --groups SPEC's sizes as the lab
makes them, and the x torch summary and table rows.

The sizes are src/lab/lab_group.c's, ported: balanced (equal as possible,
the first TOTAL % G groups one more), empty (every 4th group empty, the
others balanced) and skewed (G/4 groups, at least one, empty; the others
shares 1/r^1.5 of TOTAL in integers; which group gets which share a
Fisher-Yates permutation drawn from the seed with the lab's splitmix64), so
`torch_bench.py grouped --seed S` times the groups `tilekit bench --suite
moe --seed S` times. The suite reader follows src/lab/lab_suite.c: `#`
starts a comment, `include NAME` reads NAME.txt of the same folder, a line
is `M N K opA opB` or one of the grouped forms of bench/shapes/moe.txt's
header.
"""
import math
import os
import re

GROUPS_MAX = 1024           # TK_LAB_GROUPS_MAX
SIZE_MAX = 1 << 24          # TK_LAB_SIZE_MAX: M, N, K and a TOTAL at most
BATCH_MAX = 65536           # TK_LAB_BATCH_MAX
DEPTH_MAX = 8               # includes nested at most
THRESHOLD = 0.9             # TK_LAB_SUITE_BELOW: "below 0.9x"
MASK64 = (1 << 64) - 1
DISTS = ("balanced", "skewed", "empty")

# form: (fields after the form, where the SPEC (batch: COUNT) is, where M, N, K are; None: the SPEC's sum)
FORMS = {
    "rows": (5, 0, None, 1, 2, "rows SPEC N K opA opB"),
    "k": (5, 2, 0, 1, None, "k M N SPEC opA opB"),
    "masked": (6, 0, 1, 2, 3, "masked SPEC M N K opA opB"),
    "batch": (6, 0, 1, 2, 3, "batch COUNT M N K opA opB"),
}


# ---- a --groups SPEC ----

def _count(s, lo, hi, what, text):
    """A decimal integer lo..hi, digits only (lab_group.c's parse_count)."""
    if not s:
        raise ValueError("'%s': %s is empty (expected an integer %d..%d)" % (text, what, lo, hi))
    if not all("0" <= c <= "9" for c in s):
        raise ValueError("'%s': %s '%s' is not an integer (expected %d..%d)" % (text, what, s, lo, hi))
    if not lo <= int(s) <= hi:
        raise ValueError("'%s': %s %s is out of range (expected %d..%d)" % (text, what, s, lo, hi))
    return int(s)


def parse_spec(text):
    """A SPEC as (dist, count, total, sizes): dist 'list' (sizes the list)
    or one of DISTS (sizes None). ValueError, worded as the lab's, when the
    lab refuses it."""
    if ":" not in text:
        sizes = []
        for i, item in enumerate(text.split(",")):   # in order, as the lab reads them: its first complaint
            if i == GROUPS_MAX:
                raise ValueError("'%.40s..': more than %d sizes (expected at most %d groups)"
                                 % (text, GROUPS_MAX, GROUPS_MAX))
            if not item:
                raise ValueError("'%s': size %d is empty (expected SIZE[,SIZE..] or G:TOTAL:balanced|skewed|empty)"
                                 % (text, i + 1))
            sizes.append(_count(item, 0, SIZE_MAX, "size %d" % (i + 1), text))
        if not 1 <= sum(sizes) <= SIZE_MAX:
            raise ValueError("'%s': the sizes sum to %d (expected 1..%d)" % (text, sum(sizes), SIZE_MAX))
        return "list", len(sizes), sum(sizes), sizes
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError("'%s' is not G:TOTAL:balanced|skewed|empty (or a list SIZE[,SIZE..])" % text)
    g = _count(parts[0], 1, GROUPS_MAX, "G", text)
    total = _count(parts[1], 1, SIZE_MAX, "TOTAL", text)
    if parts[2] not in DISTS:
        raise ValueError("'%s': '%s' is not balanced, skewed or empty" % (text, parts[2]))
    if parts[2] == "skewed" and g < 2:
        raise ValueError("'%s': skewed needs G >= 2 (a quarter of the groups, at least one, get none)" % text)
    if parts[2] == "empty" and g < 4:
        raise ValueError("'%s': empty needs G >= 4 (every 4th group is empty)" % text)
    return parts[2], g, total, None


def mix64(z):
    """The splitmix64 finalizer (tk_lab_mix64, src/lab/lab_rand.h)."""
    z &= MASK64
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & MASK64
    return z ^ (z >> 31)


def _apportion(total, w):
    """total split in proportion to w: floors, then one more to the largest
    remainders (the earlier share on a tie), as lab_group.c's apportion."""
    s = sum(w)
    out = [total * x // s for x in w]
    rem = [total * x % s for x in w]
    for _ in range(total - sum(out)):
        best = rem.index(max(rem))          # the first of equal remainders
        out[best] += 1
        rem[best] = 0
    return out


def _skewed(g, total, seed):
    none = max(1, g // 4)
    ne = g - none
    # 2^30 / q^1.5 in integers: q * sqrt(q) * 2^15 = q * isqrt(q * 2^30)
    share = _apportion(total, [(1 << 45) // (q * math.isqrt(q << 30)) for q in range(1, ne + 1)])
    perm = list(range(g))
    ctr = mix64(seed ^ 0x5e3d)
    for i in range(g - 1, 0, -1):           # Fisher-Yates
        ctr = (ctr + 1) & MASK64
        j = mix64(ctr) % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    sizes = [0] * g
    for r in range(g):
        sizes[perm[r]] = share[r] if r < ne else 0
    return sizes


def group_sizes(text, seed=1):
    """The group sizes of SPEC text with skewed's order from seed
    (tk_lab_group_sizes)."""
    dist, g, total, sizes = parse_spec(text)
    if dist == "list":
        return sizes
    if dist == "skewed":
        return _skewed(g, total, seed & MASK64)
    ne = g - g // 4 if dist == "empty" else g
    q, r = divmod(total, ne)
    out, t = [], 0
    for i in range(g):
        if dist == "empty" and i % 4 == 3:
            out.append(0)
        else:
            out.append(q + (t < r))
            t += 1
    return out


# ---- a suite ----

def _size(at, field, s, hi=SIZE_MAX):
    """A size field, 1..hi (strtoll's digits: an optional sign, no '_')."""
    if not re.fullmatch(r"[+-]?[0-9]+", s):
        raise ValueError("%s: %s: '%s' is not an integer" % (at, field, s))
    v = int(s)
    if not 1 <= v <= hi:
        raise ValueError("%s: %s: %s is out of range (expected 1..%d)" % (at, field, s, hi))
    return v


def _op(at, field, s):
    if s not in ("n", "t"):
        raise ValueError("%s: %s: '%s' is not n or t" % (at, field, s))
    return s


def parse_line(words, at):
    """One line's words (comment cut, not empty) as a dict: form ('dense'
    or a FORMS key), groups (the SPEC, or None), count (groups or
    products, 1 for dense), m, n, k (a SPEC's dimension: its sum), op_a,
    op_b. ValueError naming `at` (path:line)."""
    shown = " ".join(words)
    form = words[0]
    if form not in FORMS:
        if form[0] not in "0123456789+-":
            raise ValueError("%s: '%s' is neither M (an integer) nor a form (rows, k, masked, batch)" % (at, form))
        if len(words) != 5:
            raise ValueError("%s: 'M N K opA opB' expected, got '%s'" % (at, shown))
        return {"form": "dense", "groups": None, "count": 1, "m": _size(at, "M", words[0]),
                "n": _size(at, "N", words[1]), "k": _size(at, "K", words[2]), "op_a": _op(at, "opA", words[3]),
                "op_b": _op(at, "opB", words[4])}
    fields, spec, im, in_, ik, usage = FORMS[form]
    x = words[1:]
    if len(x) != fields:
        raise ValueError("%s: '%s' expected, got '%s'" % (at, usage, shown))
    e = {"form": form, "groups": None}
    if form == "batch":
        e["count"] = _size(at, "COUNT", x[spec], BATCH_MAX)
    else:
        try:
            _, e["count"], total, _ = parse_spec(x[spec])
        except ValueError as err:
            raise ValueError("%s: groups: %s" % (at, err)) from None
        e["groups"] = x[spec]
    for key, i, name in (("m", im, "M"), ("n", in_, "N"), ("k", ik, "K")):
        e[key] = total if i is None else _size(at, name, x[i])
    e["op_a"], e["op_b"] = _op(at, "opA", x[-2]), _op(at, "opB", x[-1])
    return e


def read_suite(path, _open=()):
    """The lines of a suite file, includes followed, each parse_line's dict
    with suite (the file's name without .txt), line (its number) and text
    (the line as written, comment cut). ValueError naming the file and line."""
    _open += (os.path.realpath(path),)
    stem = os.path.splitext(os.path.basename(path))[0]
    out = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            at = "%s:%d" % (path, lineno)
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if words[0] != "include":
                e = parse_line(words, at)
                e.update(suite=stem, line=lineno, text=" ".join(words))
                out.append(e)
                continue
            if len(words) != 2 or "/" in words[1]:
                raise ValueError("%s: 'include NAME' expected (a suite of the same folder), got '%s'"
                                 % (at, " ".join(words)))
            inc = os.path.join(os.path.dirname(path), words[1] + ("" if words[1].endswith(".txt") else ".txt"))
            if os.path.realpath(inc) in _open:
                raise ValueError("%s: include '%s': include cycle" % (at, words[1]))
            if len(_open) > DEPTH_MAX:
                raise ValueError("%s: include '%s': includes nested more than %d deep" % (at, words[1], DEPTH_MAX))
            out += read_suite(inc, _open)
    if not out:
        raise ValueError("%s: no shape in the suite" % path)
    return out


def flop(e):
    """2 M N K, per product for batch lines (a SPEC's dimension is its sum)."""
    return 2.0 * e["m"] * e["n"] * e["k"] * (e["count"] if e["form"] == "batch" else 1)


# ---- the summary and the table ----

def summarize(results, threshold=THRESHOLD):
    """lines, measured, not_measured, geomean, min, min_line, below of
    results (dicts with 'label' and 'ratio_torch', None where not
    measured), as the lab's suite summary computes them."""
    got = [r for r in results if r.get("ratio_torch") is not None]
    s = {"lines": len(results), "measured": len(got), "not_measured": len(results) - len(got), "geomean": None,
         "min": None, "min_line": None, "below": sum(1 for r in got if r["ratio_torch"] < threshold)}
    if got:
        s["geomean"] = math.exp(sum(math.log(r["ratio_torch"]) for r in got) / len(got))
        low = min(got, key=lambda r: r["ratio_torch"])     # the first of equal minima
        s["min"], s["min_line"] = low["ratio_torch"], low["label"]
    return s


def summary_line(s, yardstick, threshold=THRESHOLD):
    if not s["measured"]:
        return "summary: no line measured against %s (%d lines)" % (yardstick, s["lines"])
    return ("summary: geomean x %s %.3f over %d of %d lines; min %.3f (%s); %d below %gx"
            % (yardstick, s["geomean"], s["measured"], s["lines"], s["min"], s["min_line"], s["below"], threshold))


def groups_cell(e, sizes):
    if e["form"] == "batch":
        return "batch %d" % e["count"]
    empty = sizes.count(0)
    return "%d" % len(sizes) + (" (%d empty)" % empty if empty else "")


def _fmt(v, spec):
    return "-" if v is None else spec % v


def table_row(r):
    """One Markdown row: line, groups, TFLOP/s of torch and tilekit, x torch, max rel err, note."""
    t, k = r["torch"], r["tilekit"]
    return "| %s | %s | %s | %s | %s | %s | %s |" % (r["label"], r["groups_cell"], _fmt(t.get("tflops"), "%.1f"),
                                                   _fmt(k.get("tflops"), "%.1f"), _fmt(r["ratio_torch"], "%.3f"),
                                                   _fmt(r["max_rel_err"], "%.1e"),
                                                   (r["note"] or "").replace("|", "\\|"))
