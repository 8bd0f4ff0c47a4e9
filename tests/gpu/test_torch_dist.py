"""tilekit.distributed on 2 GPUs (issue 41), under torchrun:

    python3 -m torch.distributed.run --standalone --nproc-per-node 2 tests/gpu/test_torch_dist.py

Every rank makes every rank's data from the same seeds, so each checks its
result against the single-GPU computation of the whole (torch, fp32
accumulation) without any collective of its own: all_gather_matmul and
matmul_reduce_scatter (values, the gathered input, the same bits over 5
runs), their gradients, ColumnParallelLinear and RowParallelLinear, a
tensor-parallel Llama MLP (transformers' LlamaMLP where transformers is
installed, else a module of the same shape) and the projections of an
attention block (q, k, v column-parallel by heads, o row-parallel) around
torch's scaled_dot_product_attention. Rank 0 prints "N passed, N failed"
last; the exit status is non-zero when any rank failed.
"""
import os
import sys
import traceback

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)   # no NVLink multicast on the device machines

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import tilekit.distributed as tkd  # noqa: E402

R = RANK = 0


def rand(seed, *shape, scale=1.0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16).cuda()


def close(got, want, what, tol=2e-2):
    got, want = got.float(), want.float()
    err = ((got - want).norm() / want.norm().clamp_min(1e-6)).item()
    assert err < tol, "%s: relative error %.3g (tolerance %.3g)" % (what, err, tol)


def test_all_gather_matmul():
    m, k, n = 384, 512, 320
    xs = [rand(10 + r, m, k) for r in range(R)]
    w = rand(100 + RANK, n, k, scale=0.05)                     # an nn.Linear weight: y = x w^T
    y, gathered = tkd.all_gather_matmul(xs[RANK], w.t(), return_gathered=True)
    full = torch.cat(xs)
    assert torch.equal(gathered, full), "the gathered input differs"
    close(y, full.float() @ w.float().t(), "all_gather_matmul")
    for _ in range(5):
        assert torch.equal(tkd.all_gather_matmul(xs[RANK], w.t()), y), "not the same bits on a second run"


def test_matmul_reduce_scatter():
    m, k, n = 512, 256, 384
    xs = [rand(20 + r, m, k) for r in range(R)]
    ws = [rand(200 + r, n, k, scale=0.05) for r in range(R)]
    z = tkd.matmul_reduce_scatter(xs[RANK], ws[RANK].t())
    want = sum(x.float() @ w.float().t() for x, w in zip(xs, ws))
    rows = slice(RANK * m // R, (RANK + 1) * m // R)
    assert z.shape == (m // R, n), z.shape
    close(z, want[rows], "matmul_reduce_scatter", tol=1e-2)
    for _ in range(5):
        assert torch.equal(tkd.matmul_reduce_scatter(xs[RANK], ws[RANK].t()), z), "not the same bits on a second run"


def test_gradients():
    m, k, n = 256, 256, 192
    xs = [rand(30 + r, m, k).requires_grad_() for r in range(R)]
    w = [rand(300 + r, n, k, scale=0.05).requires_grad_() for r in range(R)]
    # column-parallel then row-parallel, as an MLP: h = all_gather(x) w_r^T; z = reduce_scatter(h w2_r)
    w2 = [rand(400 + r, k, n, scale=0.05).requires_grad_() for r in range(R)]
    h = tkd.all_gather_matmul(xs[RANK], w[RANK].t())
    z = tkd.matmul_reduce_scatter(h, w2[RANK].t())
    g = rand(500 + RANK, m, k)
    (z.float() * g.float()).sum().backward()
    # the whole on one GPU, fp32
    xf = torch.cat([x.detach().float() for x in xs]).requires_grad_()
    wf = [x.detach().float().requires_grad_() for x in w]
    w2f = [x.detach().float().requires_grad_() for x in w2]
    zf = sum((xf @ a.t()) @ b.t() for a, b in zip(wf, w2f))
    gf = torch.cat([rand(500 + r, m, k).float() for r in range(R)])
    (zf * gf).sum().backward()
    close(xs[RANK].grad, xf.grad[RANK * m:(RANK + 1) * m], "d x_shard", tol=3e-2)
    close(w[RANK].grad, wf[RANK].grad, "d w (column-parallel)", tol=3e-2)
    close(w2[RANK].grad, w2f[RANK].grad, "d w (row-parallel)", tol=3e-2)


class _MLP(torch.nn.Module):
    """LlamaMLP's shape, where transformers is not installed."""

    def __init__(self, hidden, ffn):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden, ffn, bias=False)
        self.up_proj = torch.nn.Linear(hidden, ffn, bias=False)
        self.down_proj = torch.nn.Linear(ffn, hidden, bias=False)
        self.act_fn = torch.nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


def llama_mlp(hidden, ffn):
    torch.manual_seed(7)
    try:
        from transformers.models.llama.modeling_llama import LlamaConfig, LlamaMLP
        mlp = LlamaMLP(LlamaConfig(hidden_size=hidden, intermediate_size=ffn, hidden_act="silu"))
    except ImportError:
        mlp = _MLP(hidden, ffn)
    return mlp.to("cuda", torch.bfloat16)


def test_llama_mlp():
    hidden, ffn, tokens = 512, 1376, 256
    mlp = llama_mlp(hidden, ffn)
    tp = tkd.TensorParallelMLP(mlp)
    x = rand(40, tokens, hidden)
    rows = slice(RANK * tokens // R, (RANK + 1) * tokens // R)
    with torch.no_grad():
        want = mlp(x)
        got = tp(x[rows])
    close(got, want[rows], "tensor-parallel Llama MLP", tol=3e-2)


def test_attention_projections():
    """q, k, v column-parallel by heads, o row-parallel (a Llama attention
    block's four projections; no rotary embedding here), causal SDPA on
    this rank's heads over every token."""
    hidden, heads, kv_heads, hd, tokens = 512, 8, 2, 64, 256
    torch.manual_seed(9)
    q = torch.nn.Linear(hidden, heads * hd, bias=False).to("cuda", torch.bfloat16)
    k = torch.nn.Linear(hidden, kv_heads * hd, bias=False).to("cuda", torch.bfloat16)
    v = torch.nn.Linear(hidden, kv_heads * hd, bias=False).to("cuda", torch.bfloat16)
    o = torch.nn.Linear(heads * hd, hidden, bias=False).to("cuda", torch.bfloat16)
    x = rand(50, tokens, hidden)

    def attend(qq, kk, vv, nh, nkv):
        qq = qq.view(tokens, nh, hd).transpose(0, 1)
        kk = kk.view(tokens, nkv, hd).transpose(0, 1).repeat_interleave(nh // nkv, 0)
        vv = vv.view(tokens, nkv, hd).transpose(0, 1).repeat_interleave(nh // nkv, 0)
        a = torch.nn.functional.scaled_dot_product_attention(qq, kk, vv, is_causal=True)
        return a.transpose(0, 1).reshape(tokens, nh * hd)

    with torch.no_grad():
        want = o(attend(q(x), k(x), v(x), heads, kv_heads))
        cq, ck, cv = (tkd.ColumnParallelLinear.from_linear(p) for p in (q, k, v))
        ro = tkd.RowParallelLinear.from_linear(o)
        rows = slice(RANK * tokens // R, (RANK + 1) * tokens // R)
        xs = x[rows]
        got = ro(attend(cq(xs), ck(xs), cv(xs), heads // R, kv_heads // R))
    close(got, want[rows], "tensor-parallel attention projections", tol=3e-2)


def main():
    global R, RANK
    dist.init_process_group("nccl")
    R, RANK = dist.get_world_size(), dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", RANK)))
    passed = failed = 0
    for name, fn in list(globals().items()):
        if not (name.startswith("test_") and callable(fn)):
            continue
        try:
            fn()
            torch.cuda.synchronize()
            ok = 1
        except Exception:
            ok = 0
            print("rank %d: %s:\n%s" % (RANK, name, traceback.format_exc()), file=sys.stderr)
        flags = torch.tensor([ok], device="cuda")
        dist.all_reduce(flags, op=dist.ReduceOp.MIN)
        ok = int(flags.item())
        passed += ok
        failed += 1 - ok
        if RANK == 0:
            print("%s %s" % ("ok  " if ok else "FAIL", name), flush=True)
    info = tkd.communicator().info()
    if RANK == 0:
        print("tilekit.distributed: %s" % info)
        print("%d passed, %d failed" % (passed, failed), flush=True)
    tkd.communicator().close()
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
