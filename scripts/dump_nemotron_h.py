#!/usr/bin/env python3
"""A tiny random-weight Nemotron-H language model (transformers `nemotron_h`, the
decoder of Nemotron 3.5 Transcribe) and the numbers transformers computes with
it: the fixture of steno's Nemotron-H parity test (tests/test_nemotron_h.c).

The config uses every block kind of the hybrid pattern: Mamba-2 mixers (two
chunks of the reference's chunked scan and a padded third over the prompt,
dt clamped at time_step_min for some heads), grouped-query attention (4 query
heads over 2 key/value heads, no RoPE), a relu² MLP and mixture-of-experts
blocks (sigmoid scores, the score-correction bias, 2 groups of which the top 1
is kept, top-2 experts, normalised and scaled by routed_scaling_factor, and
the shared expert).

Writes, deterministically (fixed seeds):
  tests/fixtures/nemotron_h_tiny.gguf      the model, F32, architecture
      `nemotron_h`: the decoder part of docs/nemotron-transcribe-gguf.md (§7)
      with the key prefix nemotron_h. (there: nemotron3_5_transcribe.lm.):
      keys of the config fields' names, tensors lm.embed_tokens.weight,
      lm.layers.N.{norm,mixer.*}, lm.norm.weight, lm_head.weight
  tests/fixtures/nemotron_h_tiny.ref.gguf  ref.prompt (ids); prefill.logits
      [prompt][vocab] and prefill.hidden.i [prompt][hidden] (transformers'
      hidden_states[i + 1]: the residual after layer i, the last one after
      the final norm) over the prompt without a cache; greedy generate's
      ref.tokens and generate.logits [steps][vocab] (the prompt with the cache,
      then the one-token recurrent path); ref.margin, the smallest top-1/top-2
      logit gap of all of them (greedy decisions are far from ties).

    /root/venv/bin/python scripts/dump_nemotron_h.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gguf
import numpy as np
import torch
from gguf import GGUFValueType as VT
from transformers import NemotronHConfig, NemotronHForCausalLM

ROOT = Path(__file__).resolve().parent.parent
torch.set_grad_enabled(False)

SEED = 1505
PROMPT_LEN, NEW_TOKENS = 11, 10
CONFIG = dict(
    vocab_size=320, hidden_size=64,
    layers_block_type=["linear_attention", "full_attention", "mlp", "moe", "linear_attention",
                       "moe"],
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=96,
    mamba_num_heads=4, mamba_head_dim=16, ssm_state_size=16, n_groups=2, conv_kernel=4,
    chunk_size=4, time_step_min=0.02, use_conv_bias=True, use_bias=False, mlp_bias=False,
    n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
    moe_shared_expert_intermediate_size=48, n_group=2, topk_group=1, norm_topk_prob=True,
    routed_scaling_factor=2.5, layer_norm_epsilon=1e-5, tie_word_embeddings=False,
    pad_token_id=0, bos_token_id=1, eos_token_id=2,
)
# --wide (not committed, an ad-hoc check): Nemotron 3.5 Transcribe's per-head sizes (Mamba-2
# heads of 64 with 8 groups of 128 states, attention heads of 128 over 2 key/value heads,
# top-6 routing over one group) in a narrow, shallow model, over a prompt of 150 tokens
# (two chunks of 128 of the reference's scan). Its files are written under the tiny's names
# into --out, so the test runs on them with STENO_SOURCE_DIR pointing above that folder.
WIDE = dict(CONFIG, hidden_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=128,
            mamba_num_heads=4, mamba_head_dim=64, ssm_state_size=128, n_groups=2, chunk_size=128,
            n_routed_experts=16, num_experts_per_tok=6, n_group=1,
            topk_group=1, moe_intermediate_size=64, moe_shared_expert_intermediate_size=96,
            intermediate_size=128,
            layers_block_type=["linear_attention", "moe", "full_attention", "linear_attention",
                               "mlp", "moe"])
WIDE_PROMPT = 150

# Config fields written as keys (nemotron_h.<name>, the names of the decoder's keys in
# docs/nemotron-transcribe-gguf.md §7, whose prefix there is nemotron3_5_transcribe.lm.).
U32_KEYS = ["vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "intermediate_size", "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups",
            "conv_kernel", "expand", "chunk_size", "n_routed_experts", "num_experts_per_tok",
            "n_shared_experts", "moe_intermediate_size", "moe_shared_expert_intermediate_size",
            "n_group", "topk_group", "max_position_embeddings", "bos_token_id", "eos_token_id",
            "pad_token_id"]
F32_KEYS = ["time_step_min", "time_step_max", "time_step_floor", "routed_scaling_factor",
            "layer_norm_epsilon"]
BOOL_KEYS = ["use_conv_bias", "mamba_proj_bias", "mlp_bias", "attention_bias", "norm_topk_prob",
             "residual_in_fp32", "tie_word_embeddings"]
STR_KEYS = ["mlp_hidden_act", "mamba_hidden_act"]


def gguf_name(hf: str) -> str:
    """The layout's tensor name of a transformers NemotronHForCausalLM parameter (NeMo's
    llm.model. names with lm. for llm.model.)."""
    name = hf.replace("model.embeddings.", "lm.embed_tokens.").replace("model.norm_f.", "lm.norm.")
    name = name.replace("model.layers.", "lm.layers.")
    if name.endswith(("mixer.experts.up_proj", "mixer.experts.down_proj")):
        name += ".weight"
    return name


def build(seed: int, config: dict = CONFIG) -> NemotronHForCausalLM:
    """The model with every parameter drawn again from one generator: linear weights
    N(0, 1/fan_in) so that activations keep their scale through the blocks, norms
    1 + N(0, 0.1²), A_log log U(1, 8), D 1 + N(0, 0.3²), dt_bias the inverse softplus
    of U(0.005, 0.2) (some dt fall under time_step_min: the prefill clamp binds), the
    router's correction bias N(0, 0.1²), embeddings N(0, 1)."""
    cfg = NemotronHConfig(**config)
    torch.manual_seed(seed)
    m = NemotronHForCausalLM(cfg).eval().float()
    g = torch.Generator().manual_seed(seed)
    rn = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    for name, p in m.named_parameters():
        if name.endswith(("norm.weight", "norm_f.weight")):
            p.copy_(1 + 0.1 * rn(p.shape))
        elif name.endswith("A_log"):
            p.copy_(torch.log(1 + 7 * torch.rand(p.shape, generator=g)))
        elif name.endswith(".D"):
            p.copy_(1 + 0.3 * rn(p.shape))
        elif name.endswith("dt_bias"):
            dt = 0.005 + 0.195 * torch.rand(p.shape, generator=g)
            p.copy_(dt + torch.log(-torch.expm1(-dt)))
        elif name.endswith("conv1d.weight"):
            p.copy_(rn(p.shape) / p.shape[-1] ** 0.5)
        elif name.endswith("bias"):
            p.copy_(0.1 * rn(p.shape))
        elif name.endswith("embeddings.weight"):
            p.copy_(rn(p.shape))
        elif p.dim() >= 2:
            p.copy_(rn(p.shape) / p.shape[-1] ** 0.5)
        else:
            raise AssertionError(f"no init for {name} {tuple(p.shape)}")
    for name, b in m.named_buffers():
        if name.endswith("e_score_correction_bias"):
            b.copy_(0.1 * rn(b.shape))
    # The logits' spread: greedy decisions far from ties.
    m.lm_head.weight.mul_(4.0)
    return m


def margins(logits: torch.Tensor) -> torch.Tensor:
    top = logits.topk(2, dim=-1).values
    return top[..., 0] - top[..., 1]


def run(m: NemotronHForCausalLM, ids: torch.Tensor) -> dict:
    out = m(input_ids=ids, output_hidden_states=True, use_cache=False)
    gen = m.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None,
                     pad_token_id=0, output_logits=True, return_dict_in_generate=True,
                     use_cache=True)
    tokens = gen.sequences[0, ids.shape[1]:]
    steps = torch.stack([s[0] for s in gen.logits])            # [new][V]
    # The reference clamps dt at time_step_min in the chunked scan (prefill) but not in
    # the one-token update: one pass over prompt + generated tokens differs from the
    # cached steps wherever the clamp binds (steno does as the reference does).
    full = m(input_ids=gen.sequences, use_cache=False).logits[0, ids.shape[1] - 1:-1]
    print(f"cached steps vs one full pass: max |diff| {(full - steps).abs().max().item():.3g}")
    assert torch.equal(steps.argmax(-1), tokens)
    clamped = 0
    for layer in m.model.layers:
        if layer.block_type == "linear_attention":
            mx = layer.mixer
            h = layer.norm(m.model.embeddings(ids))  # exact for layer 0 only: a lower bound
            dt = torch.nn.functional.softplus(mx.in_proj(h)[..., -mx.num_heads:] + mx.dt_bias)
            clamped += int((dt < m.config.time_step_min).sum())
    assert clamped > 0, "the prefill's dt clamp never binds"
    return dict(logits=out.logits[0], hidden=[h[0] for h in out.hidden_states[1:]],
                tokens=tokens, steps=steps,
                margin=min(margins(out.logits[0]).min().item(), margins(steps).min().item()))


def write_model(m: NemotronHForCausalLM, path: Path) -> None:
    cfg = m.config
    w = gguf.GGUFWriter(str(path), "nemotron_h")
    k = "nemotron_h."
    for name in U32_KEYS:
        w.add_key_value(k + name, int(getattr(cfg, name)), VT.UINT32)
    for name in F32_KEYS:
        w.add_key_value(k + name, float(getattr(cfg, name)), VT.FLOAT32)
    for name in BOOL_KEYS:
        w.add_key_value(k + name, bool(getattr(cfg, name)), VT.BOOL)
    for name in STR_KEYS:
        w.add_key_value(k + name, str(getattr(cfg, name)), VT.STRING)
    w.add_key_value(k + "layers_block_type", list(cfg.layers_block_type), VT.ARRAY,
                    sub_type=VT.STRING)
    w.add_key_value(k + "time_step_limit", [float(x) for x in cfg.time_step_limit], VT.ARRAY,
                    sub_type=VT.FLOAT32)
    for name, t in m.state_dict().items():
        w.add_tensor(gguf_name(name), np.ascontiguousarray(t.float().numpy()))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_ref(r: dict, ids: torch.Tensor, path: Path, seed: int) -> None:
    w = gguf.GGUFWriter(str(path), "steno-ref")
    ints = lambda key, v: w.add_key_value(key, [int(x) for x in v], VT.ARRAY, sub_type=VT.INT32)  # noqa: E731
    w.add_key_value("ref.model", "nemotron_h_tiny.gguf", VT.STRING)
    w.add_key_value("ref.seed", seed, VT.UINT32)
    w.add_key_value("ref.source", f"transformers {__import__('transformers').__version__}, "
                    f"torch {torch.__version__}", VT.STRING)
    ints("ref.prompt", ids[0].tolist())
    ints("ref.tokens", r["tokens"].tolist())
    w.add_key_value("ref.margin", float(r["margin"]), VT.FLOAT32)
    w.add_tensor("prefill.logits", r["logits"].numpy())
    for i, h in enumerate(r["hidden"]):
        w.add_tensor(f"prefill.hidden.{i}", h.numpy())
    w.add_tensor("generate.logits", r["steps"].numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures")
    ap.add_argument("--wide", action="store_true", help="the wide check's files (see WIDE)")
    a = ap.parse_args()
    config, length = (WIDE, WIDE_PROMPT) if a.wide else (CONFIG, PROMPT_LEN)
    m = build(SEED, config)
    ids = torch.randint(3, config["vocab_size"], (1, length), generator=torch.Generator().manual_seed(SEED + 1))
    r = run(m, ids)
    assert r["margin"] > 2e-3, f"a greedy decision within {r['margin']} of a tie"
    write_model(m, a.out / "nemotron_h_tiny.gguf")
    write_ref(r, ids, a.out / "nemotron_h_tiny.ref.gguf", SEED)
    print(f"prompt {ids[0].tolist()}\ntokens {r['tokens'].tolist()}\nmargin {r['margin']:.4g}")


if __name__ == "__main__":
    main()
