"""Tiny random transformers models (2 layers) of the families that
tilekit.patch(fuse_mlp=True) recognises, from one description for both
torch tests: tests/python/test_torch_cpu.py ("cpu" widths, 64) and
tests/gpu/test_torch.py ("gpu" widths, 256). Needs torch and transformers;
not a test file (run.py collects test_*.py alone); torch is imported by
build() alone, so the lists load without it."""

SIZES = {"cpu": dict(vocab=96, hidden=64, inter=88, bert_inter=88, head_dim=16, positions=64),
         "gpu": dict(vocab=1000, hidden=256, inter=688, bert_inter=1024, head_dim=64, positions=512)}
GATED = ("llama", "mistral", "qwen2", "qwen3")
MODELS = GATED + ("gpt2", "bert")
# the fused class each model's MLPs get (one per layer)
FUSED_KIND = {"llama": "FusedGatedMLP", "mistral": "FusedGatedMLP", "qwen2": "FusedGatedMLP",
              "qwen3": "FusedGatedMLP", "gpt2": "FusedConv1DMLP", "bert": "FusedFeedForward"}


def build(name, size, seed=0, **kw):
    """Model `name` of SIZES[size] with random weights (torch.manual_seed(seed)), fp32 on the CPU;
    kw goes into its config."""
    import torch
    import transformers as t
    s = SIZES[size]
    torch.manual_seed(seed)
    common = dict(vocab_size=s["vocab"], num_hidden_layers=2, hidden_size=s["hidden"], num_attention_heads=4,
                  max_position_embeddings=s["positions"])
    if name in GATED:
        cfg_cls, model_cls = {"llama": (t.LlamaConfig, t.LlamaForCausalLM),
                              "mistral": (t.MistralConfig, t.MistralForCausalLM),
                              "qwen2": (t.Qwen2Config, t.Qwen2ForCausalLM),
                              "qwen3": (t.Qwen3Config, t.Qwen3ForCausalLM)}[name]
        extra = dict(intermediate_size=s["inter"], num_key_value_heads=2, head_dim=s["head_dim"])
        extra.update(kw)
        return model_cls(cfg_cls(**common, **extra))
    if name == "gpt2":
        return t.GPT2LMHeadModel(t.GPT2Config(vocab_size=s["vocab"], n_layer=2, n_embd=s["hidden"], n_head=4,
                                              n_positions=s["positions"], resid_pdrop=0.0, embd_pdrop=0.0,
                                              attn_pdrop=0.0, **kw))
    if name == "bert":
        return t.BertModel(t.BertConfig(**common, intermediate_size=s["bert_inter"], hidden_dropout_prob=0.0,
                                        attention_probs_dropout_prob=0.0, **kw))
    raise AssertionError(name)
