"""tilekit.distributed against PyTorch on 2+ GPUs (issue 41), under torchrun:

    python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/dist_torch.py \
        [--tokens 2048,8192,32768] [--iters 10] [--json FILE] [--trace]

Llama-3-70B's tensor-parallel projections (hidden 8192, ffn 28672, 64 query
and 8 key/value heads of 128) split over the ranks, and its MLP block, each
timed three ways in one process per GPU, the same inputs:

  seq     NCCL's collective on the default process group, then torch.matmul
          (all_gather_into_tensor + x @ w.T; x @ w.T + reduce_scatter_tensor);
  seq_tk  the same with tilekit.matmul for the products: the same GEMMs as
          tilekit's with the collectives in sequence (issue 41's "the same
          model with sequential collectives");
  torch   PyTorch's overlapped operations on symmetric memory
          (torch.ops.symm_mem.fused_all_gather_matmul and
          fused_matmul_reduce_scatter), where they run on this machine with
          NVLink multicast off (TORCH_SYMM_MEM_DISABLE_MULTICAST=1); the
          error is printed where they cannot;
  tilekit tilekit.distributed.all_gather_matmul / matmul_reduce_scatter
          (the MLP: tilekit.distributed.TensorParallelMLP).

Each time is the slowest rank's median of --iters calls (CUDA events, a
barrier before each call). The MLP block's sequential baseline is the same
shards with the collectives before and after (gather x, gate and up, SiLU,
down, reduce-scatter). Every tilekit result is compared with the seq one
(relative error printed). Rank 0 prints a markdown table.

--trace: instead, rank 0 prints the GPU timeline (torch.profiler: each
kernel and copy, its stream, start and length in us) of one call of each
way for qkv and o at the first --tokens: whether the exchange ran beside
the GEMM (copy engines or SMs) or after it.
"""
import argparse
import json
import os
import sys

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)   # no NVLink multicast on the device machines

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import tilekit  # noqa: E402
import tilekit.distributed as tkd  # noqa: E402

HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM = 8192, 28672, 64, 8, 128


def timed(fn, iters):
    """The slowest rank's median time of fn(), us."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        dist.barrier()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    times.sort()
    t = torch.tensor([times[len(times) // 2]], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def rel(got, want):
    got, want = got.float(), want.float()
    return ((got - want).norm() / want.norm().clamp_min(1e-6)).item()


def finish():
    """Every rank, last: tilekit's communicators closed, then the process group."""
    dist.barrier()
    for c in list(tkd._comms.values()):
        c.close()
    dist.destroy_process_group()


def symm_group():
    """The default group's name with symmetric memory enabled, or the error."""
    try:
        import torch.distributed._symmetric_memory as symm
        name = dist.group.WORLD.group_name
        if hasattr(symm, "enable_symm_mem_for_group"):
            symm.enable_symm_mem_for_group(name)
        return name, None
    except Exception as e:   # noqa: BLE001 - reported, not hidden
        return None, "%s: %s" % (type(e).__name__, e)


def trace(name, fn, rank):
    """One call of fn under torch.profiler; rank 0 prints its GPU events."""
    import tempfile
    from torch.profiler import ProfilerActivity, profile
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    if rank != 0:
        return
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        ev = [e for e in json.load(open(f.name))["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if not ev:
        print("trace %s: no GPU events recorded" % name)
        return
    t0 = min(e["ts"] for e in ev)
    end = max(e["ts"] + e["dur"] for e in ev) - t0
    print("trace %s: %d GPU events over %.0f us" % (name, len(ev), end))
    for e in sorted(ev, key=lambda e: e["ts"]):
        print("  stream %-4s %8.1f +%8.1f  %-8s %s" % (e.get("tid"), e["ts"] - t0, e["dur"], e["cat"][:8],
                                                    e["name"][:90]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="2048,8192,32768")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--json", default="")
    ap.add_argument("--trace", action="store_true")
    args = ap.parse_args()
    dist.init_process_group("nccl")
    rank, R = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    torch.manual_seed(1234 + rank)
    group_name, symm_err = symm_group()
    rows = []

    def record(op, tokens, seq, seq_tk, torch_t, torch_err, tk, err):
        rows.append({"op": op, "tokens": tokens, "seq_us": seq, "seq_tk_us": seq_tk, "torch_us": torch_t,
                     "torch_error": torch_err, "tilekit_us": tk, "tilekit_rel_err": err})
        if rank == 0:
            print("%-8s %6d  seq %9.1f  seq_tk %9.1f  torch %9s  tilekit %9.1f  (%.2fx seq, %.2fx seq_tk%s)  rel err %.1e"
                  % (op, tokens, seq, seq_tk, "%.1f" % torch_t if torch_t else "-", tk, seq / tk, seq_tk / tk,
                     ", %.2fx torch" % (torch_t / tk) if torch_t else "", err), flush=True)

    def try_torch(fn):
        if group_name is None:
            return None, symm_err
        try:
            return timed(fn, args.iters), None
        except Exception as e:   # noqa: BLE001 - reported in the table
            return None, "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")

    if args.trace:
        tokens = int(args.tokens.split(",")[0])
        m = tokens // R
        n = (HEADS + 2 * KV_HEADS) * HEAD_DIM // R
        x = torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, HIDDEN, device="cuda", dtype=torch.bfloat16) * HIDDEN ** -0.5
        full = torch.empty(tokens, HIDDEN, device="cuda", dtype=torch.bfloat16)
        trace("qkv seq", lambda: (dist.all_gather_into_tensor(full, x), full @ w.t()), rank)
        trace("qkv tilekit (transport %s)" % os.environ.get("TK_DIST_TRANSPORT", "auto"),
              lambda: tkd.all_gather_matmul(x, w.t()), rank)
        if group_name is not None:
            try:
                trace("qkv torch fused", lambda: torch.ops.symm_mem.fused_all_gather_matmul(
                    x, [w.t()], gather_dim=0, group_name=group_name), rank)
            except Exception as e:   # noqa: BLE001 - reported
                print("qkv torch fused: %s" % e)
        k = HEADS * HEAD_DIM // R
        xo = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16)
        wo = torch.randn(HIDDEN, k, device="cuda", dtype=torch.bfloat16) * k ** -0.5
        out = torch.empty(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
        trace("o seq", lambda: dist.reduce_scatter_tensor(out, xo @ wo.t()), rank)
        trace("o tilekit (transport %s)" % os.environ.get("TK_DIST_TRANSPORT", "auto"),
              lambda: tkd.matmul_reduce_scatter(xo, wo.t()), rank)
        finish()
        return

    for tokens in [int(t) for t in args.tokens.split(",")]:
        m = tokens // R
        # column-parallel projections: the all-gather of the tokens, then the product
        for op, n in (("qkv", (HEADS + 2 * KV_HEADS) * HEAD_DIM // R), ("gate_up", 2 * FFN // R)):
            x = torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(n, HIDDEN, device="cuda", dtype=torch.bfloat16) * HIDDEN ** -0.5
            full = torch.empty(tokens, HIDDEN, device="cuda", dtype=torch.bfloat16)

            def seq(mm=torch.matmul):   # tilekit.matmul: seq_tk
                dist.all_gather_into_tensor(full, x)
                return mm(full, w.t())

            want = seq()
            got = tkd.all_gather_matmul(x, w.t())
            err = rel(got, want)
            t_seq = timed(seq, args.iters)
            t_seq_tk = timed(lambda: seq(tilekit.matmul), args.iters)
            t_tk = timed(lambda: tkd.all_gather_matmul(x, w.t()), args.iters)
            t_torch, e_torch = try_torch(lambda: torch.ops.symm_mem.fused_all_gather_matmul(
                x, [w.t()], gather_dim=0, group_name=group_name))
            record(op, tokens, t_seq, t_seq_tk, t_torch, e_torch, t_tk, err)
            del x, w, full, want, got
        # row-parallel projections: the product, then the reduce-scatter of the sums
        for op, k in (("o", HEADS * HEAD_DIM // R), ("down", FFN // R)):
            x = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(HIDDEN, k, device="cuda", dtype=torch.bfloat16) * k ** -0.5
            out = torch.empty(m, HIDDEN, device="cuda", dtype=torch.bfloat16)

            def seq(mm=torch.matmul):   # tilekit.matmul: seq_tk
                dist.reduce_scatter_tensor(out, mm(x, w.t()))
                return out

            want = seq().clone()
            got = tkd.matmul_reduce_scatter(x, w.t())
            err = rel(got, want)
            t_seq = timed(seq, args.iters)
            t_seq_tk = timed(lambda: seq(tilekit.matmul), args.iters)
            t_tk = timed(lambda: tkd.matmul_reduce_scatter(x, w.t()), args.iters)
            t_torch, e_torch = try_torch(lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(
                x, w.t(), "sum", scatter_dim=0, group_name=group_name))
            record(op, tokens, t_seq, t_seq_tk, t_torch, e_torch, t_tk, err)
            del x, w, out, want, got
        # the MLP block: gather, gate and up, SiLU, down, reduce-scatter
        g = torch.randn(FFN // R, HIDDEN, device="cuda", dtype=torch.bfloat16) * HIDDEN ** -0.5
        u = torch.randn(FFN // R, HIDDEN, device="cuda", dtype=torch.bfloat16) * HIDDEN ** -0.5
        dw = torch.randn(HIDDEN, FFN // R, device="cuda", dtype=torch.bfloat16) * FFN ** -0.5
        x = torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
        full = torch.empty(tokens, HIDDEN, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(m, HIDDEN, device="cuda", dtype=torch.bfloat16)

        def mlp_seq():
            dist.all_gather_into_tensor(full, x)
            dist.reduce_scatter_tensor(out, (F.silu(full @ g.t()) * (full @ u.t())) @ dw.t())
            return out

        gu = torch.cat([g, u], 0).t()

        def mlp_seq_tk():
            dist.all_gather_into_tensor(full, x)
            h = tilekit.matmul(full, gu)
            dist.reduce_scatter_tensor(out, tilekit.matmul(F.silu(h[:, :FFN // R]) * h[:, FFN // R:], dw.t()))
            return out

        def mlp_tk():
            h = tkd.all_gather_matmul(x, gu)
            return tkd.matmul_reduce_scatter(F.silu(h[:, :FFN // R]) * h[:, FFN // R:], dw.t())

        with torch.no_grad():
            want = mlp_seq().clone()
            err = rel(mlp_tk(), want)
            t_seq = timed(mlp_seq, args.iters)
            t_seq_tk = timed(mlp_seq_tk, args.iters)
            t_tk = timed(mlp_tk, args.iters)
        record("mlp", tokens, t_seq, t_seq_tk, None, "not timed (no fused MLP in torch)", t_tk, err)
        del g, u, dw, x, full, out, gu, want
        torch.cuda.empty_cache()

    if rank == 0:
        import math
        for what, key in (("seq", "seq_us"), ("seq_tk", "seq_tk_us"), ("torch", "torch_us")):
            r = [row[key] / row["tilekit_us"] for row in rows if row.get(key) and row["op"] != "mlp"]
            if r:
                print("geomean tilekit vs %s (projections, %d): %.3fx" % (
                    what, len(r), math.exp(sum(math.log(v) for v in r) / len(r))))
        errs = sorted({row["torch_error"] for row in rows if row["torch_error"] and row["op"] != "mlp"})
        for e in errs:
            print("torch's fused operations did not run: %s" % e)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ranks": R, "device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    finish()


if __name__ == "__main__":
    main()
