"""A Llama decoder stack's forward split tensor-parallel over 2+ GPUs (issue
41: "a 2-rank transformers Llama forward with the tensor-parallel layers:
faster than the same model with sequential collectives"), under torchrun:

    python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/dist_llama.py \
        [--layers 2] [--tokens 2048,8192] [--iters 10] [--json FILE] [--no-reference]

Prefill (batch 1, T tokens) of Llama-3-70B's decoder layers (hidden 8192,
64 query and 8 key/value heads of 128, ffn 28672, RMSNorm eps 1e-5, rotary
theta 500000 without Llama 3's frequency scaling; bf16, random weights of
std 1/sqrt(fan_in), the same on every rank). Between the layers each rank
holds its T/R rows of the tokens (sequence parallel); per layer: RMSNorm on
the rows; q, k and v in one column-parallel product (every token, this
rank's heads/R query and kv_heads/R key/value heads); rotary embeddings at
positions 0..T-1; causal attention over all T tokens on this rank's heads
(the kv heads repeated for GQA); o row-parallel (back to this rank's rows);
residual; RMSNorm; the gated MLP (gate and up column-parallel, down
row-parallel); residual. Three forms, the same weights and input:

  tilekit    tilekit.distributed's layers: ColumnParallelLinear (q, k, v),
             RowParallelLinear.from_linear (o), TensorParallelMLP: the
             collectives overlapped with the GEMMs;
  seq_tk     the same shards with the collectives in sequence:
             dist.all_gather_into_tensor then tilekit.matmul; tilekit.matmul
             then dist.reduce_scatter_tensor ("the same model with
             sequential collectives");
  seq_torch  seq_tk with torch's matmul (x @ w.T, cuBLAS).

Each time is the slowest rank's median of --iters forwards (CUDA events, a
barrier before each: dist_torch.timed). The relative errors of tilekit and
seq_tk against seq_torch are printed, and rank 0 also runs the unsplit
forward on one GPU and compares every rank's rows with it (--no-reference:
not). Rank 0 prints a markdown table ("tilekit x seq_tk": seq_tk's time
over tilekit's, above 1 where tilekit is faster); --json writes its rows.
The model's math (decoder_layer and what it calls) takes the products as
arguments, so that tests/python/test_dist_llama.py checks the split on
the CPU.
"""
import argparse
import json
import os
import sys

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)   # no NVLink multicast on the device machines

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import tilekit  # noqa: E402
import tilekit.distributed as tkd  # noqa: E402
from dist_torch import finish, rel, timed  # noqa: E402

LLAMA3_70B = {"hidden": 8192, "heads": 64, "kv_heads": 8, "head_dim": 128, "ffn": 28672, "eps": 1e-5,
              "theta": 500000.0}


# ---- the model's math: torch only, the products given ----

def rms_norm(x, weight, eps):
    """transformers' LlamaRMSNorm: the mean square in fp32, then the weight."""
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rope_cos_sin(tokens, head_dim, theta, dtype, device=None):
    """cos and sin (tokens, head_dim) at positions 0..tokens-1, in fp32 then
    dtype (transformers' LlamaRotaryEmbedding, no frequency scaling)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim)
    freqs = torch.arange(tokens, dtype=torch.float32, device=device)[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], -1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x, cos, sin):
    """x (heads, tokens, head_dim) rotated by its token's angles (rotate_half)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def decoder_layer(x, layer, cos, sin, heads, kv_heads, eps):
    """One Llama decoder layer on this rank's rows x (T/R, hidden). layer:
    attn_norm, mlp_norm (weights) and the products qkv(h) -> every token's
    q, k, v of this rank's heads (T, (heads + 2 kv_heads) * head_dim),
    o(a) -> this rank's rows of the attention output (T/R, hidden), mlp(h)
    -> this rank's rows of the MLP's (T/R, hidden). heads, kv_heads: this
    rank's. cos, sin: (T, head_dim) at positions 0..T-1."""
    qkv = layer["qkv"](rms_norm(x, layer["attn_norm"], eps))
    tokens, d = qkv.shape[0], cos.shape[-1]
    q, k, v = (t.reshape(tokens, -1, d).transpose(0, 1) for t in qkv.split([heads * d, kv_heads * d,
                                                                            kv_heads * d], -1))
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    # GQA: query head i reads kv head i // (heads / kv_heads), on every rank
    # (each holds a contiguous run of both)
    k, v = (t.repeat_interleave(heads // kv_heads, 0) for t in (k, v))
    a = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
    x = x + layer["o"](a.transpose(0, 1).reshape(tokens, heads * d))
    return x + layer["mlp"](rms_norm(x, layer["mlp_norm"], eps))


def forward(x, layers, cfg, ranks):
    """The stack on this rank's rows x (T/R, hidden): every layer's
    decoder_layer, the positions those of all R * x.shape[0] tokens."""
    cos, sin = rope_cos_sin(x.shape[0] * ranks, cfg["head_dim"], cfg["theta"], x.dtype, x.device)
    for layer in layers:
        x = decoder_layer(x, layer, cos, sin, cfg["heads"] // ranks, cfg["kv_heads"] // ranks, cfg["eps"])
    return x


def make_weights(cfg, seed, dtype, device=None):
    """One layer's full weights (nn.Linear layout, out x in), std
    1/sqrt(fan_in); norm weights near 1. The same seed gives the same on
    every rank."""
    g = torch.Generator(device=device).manual_seed(seed)
    h, d, f = cfg["hidden"], cfg["head_dim"], cfg["ffn"]
    shapes = {"q": (cfg["heads"] * d, h), "k": (cfg["kv_heads"] * d, h), "v": (cfg["kv_heads"] * d, h),
              "o": (h, cfg["heads"] * d), "gate": (f, h), "up": (f, h), "down": (h, f)}
    w = {n: (torch.randn(s, generator=g, device=device) * s[1] ** -0.5).to(dtype) for n, s in shapes.items()}
    for n in ("attn_norm", "mlp_norm"):
        w[n] = (1 + 0.1 * torch.randn(h, generator=g, device=device)).to(dtype)
    return w


def shard(w, rank, ranks):
    """This rank's part of one layer's full weights: qkv (its q rows, then
    k, then v), o (its input columns), gate_up (its gate rows, then up),
    down (its input columns); the norms whole."""
    def rows(n):
        return w[n].chunk(ranks, 0)[rank]

    return {"qkv": torch.cat([rows("q"), rows("k"), rows("v")]).contiguous(),
            "o": w["o"].chunk(ranks, 1)[rank].contiguous(),
            "gate_up": torch.cat([rows("gate"), rows("up")]).contiguous(),
            "down": w["down"].chunk(ranks, 1)[rank].contiguous(),
            "attn_norm": w["attn_norm"], "mlp_norm": w["mlp_norm"]}


def sequential_layer(p, column, row):
    """decoder_layer's layer from shards p, the products column(h, w) ->
    every token's h @ w.T (the gather first) and row(a, w) -> this rank's
    rows of the ranks' summed a @ w.T."""
    ffn = p["down"].shape[1]

    def mlp(h):
        gu = column(h, p["gate_up"])
        return row(F.silu(gu[:, :ffn]) * gu[:, ffn:], p["down"])

    return {"qkv": lambda h: column(h, p["qkv"]), "o": lambda a: row(a, p["o"]), "mlp": mlp,
            "attn_norm": p["attn_norm"], "mlp_norm": p["mlp_norm"]}


# ---- the three forms on the GPUs ----

def _linear(weight):
    """What from_linear and TensorParallelMLP read of an nn.Linear."""
    return argparse.Namespace(weight=weight, bias=None)


def tilekit_layer(w):
    """decoder_layer's layer on tilekit.distributed's modules, made from the
    full weights w (each module takes this rank's share)."""
    q, k, v = (tkd.ColumnParallelLinear.from_linear(_linear(w[n])) for n in "qkv")
    qkv = tkd.ColumnParallelLinear(torch.cat([q.weight, k.weight, v.weight]).detach())
    mlp = argparse.Namespace(gate_proj=_linear(w["gate"]), up_proj=_linear(w["up"]), down_proj=_linear(w["down"]),
                             act_fn=F.silu)
    return {"qkv": qkv, "o": tkd.RowParallelLinear.from_linear(_linear(w["o"])), "mlp": tkd.TensorParallelMLP(mlp),
            "attn_norm": w["attn_norm"], "mlp_norm": w["mlp_norm"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--tokens", default="2048,8192")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--json", default="")
    ap.add_argument("--no-reference", action="store_true", help="skip rank 0's single-GPU forward")
    args = ap.parse_args()
    dist.init_process_group("nccl")
    rank, R = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    cfg, bf16 = LLAMA3_70B, torch.bfloat16
    reference = not args.no_reference

    def gather(x):
        full = torch.empty(x.shape[0] * R, x.shape[1], dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(full, x)
        return full

    def reduce_scatter(y):
        out = torch.empty(y.shape[0] // R, y.shape[1], dtype=y.dtype, device=y.device)
        dist.reduce_scatter_tensor(out, y)
        return out

    products = {"seq_tk": tilekit.matmul, "seq_torch": lambda a, b: a @ b}
    forms = {"tilekit": [], "seq_tk": [], "seq_torch": []}
    full_layers = []
    for i in range(args.layers):
        w = make_weights(cfg, 1000 + i, bf16, "cuda")
        forms["tilekit"].append(tilekit_layer(w))
        p = shard(w, rank, R)
        for name, mm in products.items():
            forms[name].append(sequential_layer(p, lambda h, wt, mm=mm: mm(gather(h), wt.t()),
                                                lambda a, wt, mm=mm: reduce_scatter(mm(a, wt.t()))))
        if reference and rank == 0:
            full_layers.append(sequential_layer(shard(w, 0, 1), lambda h, wt: h @ wt.t(), lambda a, wt: a @ wt.t()))
        del w
    torch.cuda.empty_cache()

    rows = []
    for tokens in [int(t) for t in args.tokens.split(",")]:
        g = torch.Generator(device="cuda").manual_seed(tokens)
        x_full = torch.randn(tokens, cfg["hidden"], generator=g, device="cuda").to(bf16)
        x = x_full.chunk(R)[rank].contiguous()
        row = {"tokens": tokens, "layers": args.layers, "ranks": R}
        with torch.no_grad():
            out = {name: forward(x, layers, cfg, R) for name, layers in forms.items()}
            for name in ("tilekit", "seq_tk"):
                row[name + "_rel_err"] = rel(out[name], out["seq_torch"])
            got = gather(out["tilekit"])
            if reference and rank == 0:
                row["reference_rel_err"] = rel(got, forward(x_full, full_layers, cfg, 1))
            for name, layers in forms.items():
                row[name + "_ms"] = timed(lambda: forward(x, layers, cfg, R), args.iters) / 1000.0
        errs = torch.tensor([row["tilekit_rel_err"], row["seq_tk_rel_err"]], device="cuda")
        dist.all_reduce(errs, op=dist.ReduceOp.MAX)   # the worst rank's
        row["tilekit_rel_err"], row["seq_tk_rel_err"] = errs.tolist()
        rows.append(row)
        if rank == 0:
            print("tokens %d: tilekit %.2f ms, seq_tk %.2f ms, seq_torch %.2f ms; rel err against seq_torch: "
                  "tilekit %.1e, seq_tk %.1e%s" % (tokens, row["tilekit_ms"], row["seq_tk_ms"], row["seq_torch_ms"],
                                                   row["tilekit_rel_err"], row["seq_tk_rel_err"],
                                                   "; tilekit against one GPU %.1e" % row["reference_rel_err"]
                                                   if "reference_rel_err" in row else ""), flush=True)
        del x_full, x, out, got

    if rank == 0:
        print("\n%d ranks, %s, Llama-3-70B layers, bf16 (slowest rank's median of %d)\n"
              % (R, torch.cuda.get_device_name(), args.iters))
        print("| tokens | layers | tilekit ms | seq_tk ms | seq_torch ms | tilekit x seq_tk | tilekit x seq_torch "
              "| max rel err |")
        print("|--:|--:|--:|--:|--:|--:|--:|--:|")
        for r in rows:
            err = max(r["tilekit_rel_err"], r["seq_tk_rel_err"], r.get("reference_rel_err", 0.0))
            print("| %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.1e |" % (
                r["tokens"], r["layers"], r["tilekit_ms"], r["seq_tk_ms"], r["seq_torch_ms"],
                r["seq_tk_ms"] / r["tilekit_ms"], r["seq_torch_ms"] / r["tilekit_ms"], err))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ranks": R, "device": torch.cuda.get_device_name(), "config": cfg, "rows": rows}, f,
                          indent=1)
    finish()


if __name__ == "__main__":
    main()
