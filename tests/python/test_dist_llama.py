"""bench/dist_llama.py's model math on the CPU, no GPU, no NCCL: a small
Llama stack (8 query and 4 key/value heads: GQA) split over 2 and 4 fake
ranks, one thread each, whose all-gather and reduce-scatter meet at a
barrier, in float64. Every rank's rows after the stack must match the
unsplit forward's (the head split of q, k, v and o, the kv heads each rank
repeats, the rotary positions of all the tokens, the residual on the
rows, the MLP's shards); and the unsplit forward must match transformers'
LlamaDecoderLayer with the same weights, where transformers is installed.

Needs torch (.ci/run's torch-cpu step runs it); without it the file
defines no test and says so.
"""
import importlib.util
import os
import threading

try:
    import torch
except ImportError as e:
    torch = None
    print("test_dist_llama: skipped (%s; .ci/run's torch-cpu step runs it with torch)" % e)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = {"hidden": 64, "heads": 8, "kv_heads": 4, "head_dim": 16, "ffn": 96, "eps": 1e-5, "theta": 500000.0}
TOKENS, LAYERS = 24, 2
TOL = 1e-10     # float64: the split sums in another order, nothing else differs


def _bench():
    spec = importlib.util.spec_from_file_location("dist_llama", os.path.join(ROOT, "bench", "dist_llama.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake_ranks(ranks, body):
    """body(rank, gather, reduce_scatter) on one thread per rank; gather(x)
    and reduce_scatter(y) are the ranks' collectives (every rank calls them
    in the same order). Returns the bodies' results in rank order."""
    barrier = threading.Barrier(ranks, timeout=60)
    slots, results, errors = [None] * ranks, [None] * ranks, []

    def exchange(rank, t):
        slots[rank] = t
        barrier.wait()
        everyone = list(slots)
        barrier.wait()   # nobody writes the next slot before all have read this one
        return everyone

    def run(rank):
        try:
            results[rank] = body(rank, lambda x: torch.cat(exchange(rank, x)),
                                 lambda y: sum(exchange(rank, y)).chunk(ranks)[rank])
        except Exception as e:   # noqa: BLE001 - re-raised below
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def _rel(got, want):
    return ((got - want).norm() / want.norm()).item()


if torch is not None:
    dl = _bench()

    def _setup():
        weights = [dl.make_weights(SMALL, 7 + i, torch.float64) for i in range(LAYERS)]
        x = torch.randn(TOKENS, SMALL["hidden"], generator=torch.Generator().manual_seed(3), dtype=torch.float64)
        return weights, x

    def _unsplit(weights, x):
        layers = [dl.sequential_layer(dl.shard(w, 0, 1), lambda h, wt: h @ wt.t(), lambda a, wt: a @ wt.t())
                  for w in weights]
        return dl.forward(x, layers, SMALL, 1)

    def test_split_matches_unsplit():
        weights, x = _setup()
        want = _unsplit(weights, x)
        for ranks in (2, 4):
            def body(rank, gather, reduce_scatter):
                layers = [dl.sequential_layer(dl.shard(w, rank, ranks), lambda h, wt: gather(h) @ wt.t(),
                                              lambda a, wt: reduce_scatter(a @ wt.t())) for w in weights]
                return dl.forward(x.chunk(ranks)[rank], layers, SMALL, ranks)

            got = torch.cat(_fake_ranks(ranks, body))
            err = _rel(got, want)
            assert err < TOL, "%d ranks: relative error %.3g against the unsplit forward" % (ranks, err)

    def test_fake_ranks_fail_loudly():
        def body(rank, gather, reduce_scatter):
            if rank == 1:
                raise ValueError("rank 1 broke")
            return gather(torch.zeros(1))

        try:
            _fake_ranks(2, body)
        except (ValueError, threading.BrokenBarrierError):
            return
        raise AssertionError("a failing fake rank was not reported")

    def test_unsplit_matches_transformers():
        try:
            from transformers import LlamaConfig
            from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding
        except ImportError as e:
            print("    (transformers not installed: %s; the split is still checked against the unsplit math)" % e)
            return
        weights, x = _setup()
        cfg = LlamaConfig(hidden_size=SMALL["hidden"], intermediate_size=SMALL["ffn"],
                          num_attention_heads=SMALL["heads"], num_key_value_heads=SMALL["kv_heads"],
                          head_dim=SMALL["head_dim"], rms_norm_eps=SMALL["eps"], rope_theta=SMALL["theta"],
                          num_hidden_layers=LAYERS, attn_implementation="sdpa")
        names = {"self_attn.q_proj": "q", "self_attn.k_proj": "k", "self_attn.v_proj": "v", "self_attn.o_proj": "o",
                 "mlp.gate_proj": "gate", "mlp.up_proj": "up", "mlp.down_proj": "down",
                 "input_layernorm": "attn_norm", "post_attention_layernorm": "mlp_norm"}
        h = x[None]
        position_ids = torch.arange(TOKENS)[None]
        cos_sin = LlamaRotaryEmbedding(cfg)(h, position_ids)
        for i, w in enumerate(weights):
            layer = LlamaDecoderLayer(cfg, i).to(torch.float64).eval()
            layer.load_state_dict({n + ".weight": w[k] for n, k in names.items()})
            with torch.no_grad():
                h = layer(h, position_ids=position_ids, position_embeddings=cos_sin)
            h = h[0] if isinstance(h, tuple) else h
        err = _rel(_unsplit(weights, x), h[0])
        # its cos and sin are fp32 cast to float64, as ours are
        assert err < TOL, "relative error %.3g against transformers' LlamaDecoderLayer" % err

    def test_layers_then_functions():
        """bench/dist_llama.py makes tilekit's layers before any call:
        tilekit.distributed makes its modules and its autograd Functions
        lazily into one dict, and the modules first once left the
        Functions out (a KeyError 'ag' in the first forward, 2 x H200)."""
        import tilekit.distributed as tkd
        for first in ("modules", "functions"):
            tkd._functions.clear()
            if first == "modules":
                assert tkd.ColumnParallelLinear is not None
            f = tkd._autograd(torch)
            assert "ag" in f and "rs" in f, (first, sorted(f))
            assert tkd.TensorParallelMLP is not None and "RowParallelLinear" in tkd._functions
