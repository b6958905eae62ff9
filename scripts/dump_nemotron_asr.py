#!/usr/bin/env python3
"""Build a tiny random-init transformers Nemotron 3.5 ASR Streaming model
(Nemotron3_5AsrForRNNT: cache-aware FastConformer, chunked_limited attention,
causal convs, RNN-T head, language prompt MLP), write it as a Parakeet GGUF with
the streaming and prompt keys (spec gguf-conformer-families.md 1.2, 3), and dump
what transformers computes with it for tests/test_nemotron_asr.c and
tests/test_stream.c:

    python scripts/dump_nemotron_asr.py     # writes tests/fixtures/nemotron_asr_tiny{,.ref}.gguf

The reference holds, for the speech clip: the log-mel features; the offline
run (the whole utterance under the chunked mask) per language prompt: encoder
output, joint encoder projection, tokens and frames; and the cache-aware
streaming run (use_cache=True chunk by chunk, 1 + 8R mel frames first, then
8(R + 1), the last padded with zero frames as transformers asks): every
chunk's encoder output and the tokens and frames of RNN-T greedy decoding
carried across the chunks. Everything is seeded; one torch thread.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dump_parakeet as dp  # noqa: E402

import gguf  # noqa: E402
from gguf import GGUFValueType as VT  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SR, HOP = 16000, 160

# Like nemotron-3.5-asr-streaming-0.6b in small: 128 mels, no biases, no
# xscaling, layer-norm conv module, causal convs, chunked_limited [L, R] with
# L a multiple of R + 1 (as [56, 13] is), a prompt MLP over d + P inputs.
SEED = 4242
LEFT, RIGHT = 8, 3                   # chunk of 4 encoder frames, 2 chunks of left context
CHOICES = [(8, 3), (8, 1), (8, 0)]   # att_context_size_choices, R descending (pair 0 = default)
ENCODER = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
               conv_kernel_size=5, subsampling_conv_channels=8, num_mel_bins=128,
               attention_bias=False, convolution_bias=False, scale_input=False,
               sliding_window=LEFT + 1, default_num_lookahead_tokens=RIGHT,
               dropout=0.0, dropout_positions=0.0, layerdrop=0.0, activation_dropout=0.0,
               attention_dropout=0.0)
PRED_H, PRED_LAYERS = 24, 1
NUM_PROMPTS, PROMPT_H = 8, 48
# locale -> prompt slot; "auto" is the language-ID slot (prompt.auto_id)
PROMPTS = {"en-US": 0, "en": 0, "de-DE": 1, "de": 1, "fr-FR": 2, "auto": 7}
AUTO_ID = 7
RUNS = {"auto": AUTO_ID, "de": 1}     # offline runs: name -> prompt id (streaming uses auto)
# The tiny SentencePiece list plus one language tag typed CONTROL, as 3.5's <ll-RR> pieces are.
PIECES = dp.TINY_PIECES + [("<en-US>", 3)]


def build_model():
    from transformers import Nemotron3_5AsrConfig, Nemotron3_5AsrForRNNT
    n_spm = len(PIECES)
    cfg = Nemotron3_5AsrConfig(vocab_size=n_spm + 1, blank_token_id=n_spm, pad_token_id=n_spm,
                               encoder_config=ENCODER, decoder_hidden_size=PRED_H,
                               num_decoder_layers=PRED_LAYERS, hidden_act="relu",
                               max_symbols_per_step=10, num_prompts=NUM_PROMPTS,
                               prompt_intermediate_size=PROMPT_H, default_prompt_id=AUTO_ID)
    torch.manual_seed(SEED)
    model = Nemotron3_5AsrForRNNT(cfg).eval()
    dp.init_weights(model, SEED)
    with torch.no_grad():   # a gentler language shift: other prompts still decode to some tokens
        model.prompt_projector.linear_1.weight[:, ENCODER["hidden_size"]:] *= 0.3
    return model


def features(pcm: np.ndarray):
    """transformers' Nemotron features (no normalization): all frames and the valid count."""
    from transformers import NemotronAsrStreamingFeatureExtractor
    fe = NemotronAsrStreamingFeatureExtractor(feature_size=ENCODER["num_mel_bins"])
    out = fe(pcm, sampling_rate=SR, return_tensors="pt")
    return out["input_features"], int(out["attention_mask"].sum())


@torch.no_grad()
def encode(model, mel: torch.Tensor, prompt_id: int, **kw):
    """(encoder output, joint encoder projection) of mel [1, T, F]."""
    out = model.get_audio_features(input_features=mel, prompt_ids=torch.tensor([prompt_id]),
                                   num_lookahead_tokens=RIGHT, **kw)
    return out.last_hidden_state[0], out.pooler_output[0], out


@torch.no_grad()
def stream(model, mel_valid: torch.Tensor, prompt_id: int):
    """The cache-aware run: chunks of 1 + 8R then 8(R + 1) mel frames, the last
    padded with zeros; returns the chunks' encoder outputs and projections."""
    first, rest = 1 + 8 * RIGHT, 8 * (RIGHT + 1)
    n = mel_valid.shape[0]
    cuts = [0, min(first, n)]
    while cuts[-1] < n:
        cuts.append(min(cuts[-1] + rest, n))
    cache = padding = None
    encs, projs, sizes = [], [], []
    for i in range(len(cuts) - 1):
        want = first if i == 0 else rest
        chunk = mel_valid[cuts[i]:cuts[i + 1]]
        chunk = torch.cat([chunk, torch.zeros(want - chunk.shape[0], chunk.shape[1])])[None]
        e, p, out = encode(model, chunk, prompt_id, cache=cache, padding_cache=padding, use_cache=True)
        cache, padding = out.cache, out.padding_cache
        encs.append(e)
        projs.append(p)
        sizes.append(e.shape[0])
    return torch.cat(encs), torch.cat(projs), sizes, cuts


@torch.no_grad()
def tune(model, mel_valid: torch.Tensor, g) -> None:
    """Make the random model decode to several tokens: centre the joint encoder
    projection and the output layer over the clip's frames, then place the blank
    logit so that about a third of the frames emit (between neighbours' gaps: no
    frame sits on a tie)."""
    V, H = model.config.vocab_size, model.config.decoder_hidden_size
    e, _, _ = encode(model, mel_valid[None], AUTO_ID)
    fused = model.prompt_projector(torch.cat([e, torch.nn.functional.one_hot(
        torch.full((e.shape[0],), AUTO_ID), NUM_PROMPTS).float()], -1))
    dp._centered_linear(model.encoder_projector, fused, 1.0, g)
    dpj = model.decoder.decoder_projector
    dpj.weight.copy_(torch.randn(dpj.weight.shape, generator=g) * 2.0 / math.sqrt(H))
    dpj.bias.zero_()
    h = model.joint.head
    ep = model.encoder_projector(fused)
    out, _ = model.decoder.lstm(torch.zeros(1, 1, H))
    z = torch.relu(ep + dpj(out)[0, 0])
    w = torch.randn(h.weight.shape, generator=g) * 6.0 / math.sqrt(H) / (z.std(0) + 1e-6)
    h.weight.copy_(w)
    h.bias.copy_(-(w @ z.mean(0)))
    lg = model.joint(dpj(out)[0, 0], ep)
    gap = (lg[:, :V - 1].max(-1).values - lg[:, V - 1]).numpy()
    h.bias[V - 1] += dp._split_between(gap, 0.85)


def greedy(model, proj: torch.Tensor):
    toks, frames, steps, caps = dp.rnnt_greedy_torch(model, proj, proj.shape[0])
    margin = dp.margins(np.stack([s[1] for s in steps])) if steps else 0.0
    return toks, frames, margin, caps


def text_of(toks) -> str:
    out = "".join(PIECES[t][0] for t in toks if PIECES[t][1] == 1).replace("\u2581", " ")
    return " ".join(out.split())


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

def tensor_plan(model) -> list:
    """(GGUF name, f32 array in PyTorch order) for every tensor (spec 1.3)."""
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    s = "encoder.subsampling."
    plan = [("enc.pre_encode.conv.0.weight", sd[s + "conv_in.weight"]),
            ("enc.pre_encode.conv.0.bias", sd[s + "conv_in.bias"])]
    for i, (dw, pw) in enumerate(((2, 3), (5, 6))):
        plan += [(f"enc.pre_encode.conv.{dw}.weight", sd[f"{s}layers.{i}.depthwise_conv.weight"]),
                 (f"enc.pre_encode.conv.{dw}.bias", sd[f"{s}layers.{i}.depthwise_conv.bias"]),
                 (f"enc.pre_encode.conv.{pw}.weight", sd[f"{s}layers.{i}.pointwise_conv.weight"]),
                 (f"enc.pre_encode.conv.{pw}.bias", sd[f"{s}layers.{i}.pointwise_conv.bias"])]
    plan += [("enc.pre_encode.out.weight", sd[s + "linear.weight"]),
             ("enc.pre_encode.out.bias", sd[s + "linear.bias"])]
    import convert_parakeet as conv
    for b in range(ENCODER["num_hidden_layers"]):
        for dst, src in conv.BLOCK_TENSORS:
            if "running_" in dst:
                continue                          # a LayerNorm conv module has no statistics
            plan.append((f"enc.blocks.{b}.{dst}", sd[f"encoder.layers.{b}.{src}"]))
    plan.append(("pred.embed.weight", sd["decoder.embedding.weight"]))
    for l in range(PRED_LAYERS):
        plan += [(f"pred.lstm.{l}.Wx", sd[f"decoder.lstm.weight_ih_l{l}"]),
                 (f"pred.lstm.{l}.Wh", sd[f"decoder.lstm.weight_hh_l{l}"]),
                 (f"pred.lstm.{l}.bias", sd[f"decoder.lstm.bias_ih_l{l}"] + sd[f"decoder.lstm.bias_hh_l{l}"])]
    plan += [("joint.enc.weight", sd["encoder_projector.weight"]),
             ("joint.enc.bias", sd["encoder_projector.bias"]),
             ("joint.pred.weight", sd["decoder.decoder_projector.weight"]),
             ("joint.pred.bias", sd["decoder.decoder_projector.bias"]),
             ("joint.out.weight", sd["joint.head.weight"]),
             ("joint.out.bias", sd["joint.head.bias"]),
             ("prompt.mlp.0.weight", sd["prompt_projector.linear_1.weight"]),
             ("prompt.mlp.0.bias", sd["prompt_projector.linear_1.bias"]),
             ("prompt.mlp.2.weight", sd["prompt_projector.linear_2.weight"]),
             ("prompt.mlp.2.bias", sd["prompt_projector.linear_2.bias"])]
    return plan


def write_model(path: Path, model) -> None:
    w = gguf.GGUFWriter(str(path), "parakeet")
    u32 = lambda k, v: w.add_key_value(k, int(v), VT.UINT32)  # noqa: E731
    i32 = lambda k, v: w.add_key_value(k, int(v), VT.INT32)   # noqa: E731
    f32 = lambda k, v: w.add_key_value(k, float(v), VT.FLOAT32)  # noqa: E731
    s = lambda k, v: w.add_key_value(k, str(v), VT.STRING)    # noqa: E731
    b = lambda k, v: w.add_key_value(k, bool(v), VT.BOOL)     # noqa: E731
    arr = lambda k, v, sub: w.add_key_value(k, list(v), VT.ARRAY, sub_type=sub)  # noqa: E731
    s("general.name", "Nemotron 3.5 ASR Streaming (tiny, random)")
    s("general.basename", "parakeet-rnnt")
    u32("general.file_type", 0)
    arr("general.languages", ["en-US", "de-DE", "fr-FR"], VT.STRING)
    s("stt.variant", "nemotron-3.5-asr-streaming-tiny")
    b("stt.capability.streaming", True)
    b("stt.capability.lang_detect", True)
    s("stt.parakeet.head_kind", "rnnt")
    s("tokenizer.ggml.model", "bpe")
    u32("tokenizer.ggml.unknown_token_id", 0)
    u32("tokenizer.ggml.blank_token_id", len(PIECES))
    e, enc = "stt.parakeet.encoder.", ENCODER
    for key, v in (("n_layers", enc["num_hidden_layers"]), ("d_model", enc["hidden_size"]),
                   ("n_heads", enc["num_attention_heads"]), ("d_ff", enc["intermediate_size"]),
                   ("conv_kernel", enc["conv_kernel_size"]), ("subsampling_factor", 8),
                   ("subsampling_channels", enc["subsampling_conv_channels"]), ("pos_emb_max_len", 5000)):
        u32(e + key, v)
    b(e + "use_bias", False)
    b(e + "xscaling", False)
    i32(e + "att_context_left", LEFT)
    i32(e + "att_context_right", RIGHT)
    s(e + "att_context_style", "chunked_limited")
    arr(e + "att_context_size_choices", [x for p in CHOICES for x in p], VT.INT32)
    i32(e + "conv_context_left", enc["conv_kernel_size"] - 1)   # causal depthwise conv
    i32(e + "conv_context_right", 0)
    s(e + "conv_norm_type", "layer_norm")
    i32(e + "streaming.pre_encode_cache_size", 9)
    i32(e + "streaming.drop_extra_pre_encoded", 2)
    i32(e + "streaming.sampling_frames_first", 1)
    p = "stt.parakeet."
    u32(p + "predictor.hidden", PRED_H)
    u32(p + "predictor.n_layers", PRED_LAYERS)
    u32(p + "predictor.vocab", len(PIECES) + 1)
    u32(p + "joint.hidden", PRED_H)
    u32(p + "joint.num_extra_outputs", 0)
    s(p + "joint.activation", "relu")
    u32(p + "prompt.num_prompts", NUM_PROMPTS)
    u32(p + "prompt.hidden", PROMPT_H)
    s(p + "prompt.field", "target_lang")
    s(p + "prompt.activation", "relu")
    arr(p + "prompt.dictionary.locales", list(PROMPTS), VT.STRING)
    arr(p + "prompt.dictionary.indices", list(PROMPTS.values()), VT.INT32)
    u32(p + "prompt.auto_id", AUTO_ID)
    s("stt.frontend.type", "mel")
    u32("stt.frontend.num_mels", enc["num_mel_bins"])
    u32("stt.frontend.sample_rate", SR)
    u32("stt.frontend.n_fft", 512)
    u32("stt.frontend.win_length", 400)
    u32("stt.frontend.hop_length", HOP)
    s("stt.frontend.window", "hann")
    s("stt.frontend.normalize", "none")
    f32("stt.frontend.dither", 1e-5)
    f32("stt.frontend.pre_emphasis", 0.97)
    f32("stt.frontend.f_min", 0.0)
    f32("stt.frontend.f_max", SR / 2)
    arr("tokenizer.ggml.tokens", [t for t, _ in PIECES] + ["<blank>"], VT.STRING)
    arr("tokenizer.ggml.scores", [float(-i) for i in range(len(PIECES))] + [0.0], VT.FLOAT32)
    arr("tokenizer.ggml.token_type", [ty for _, ty in PIECES] + [3], VT.INT32)
    for name, a in tensor_plan(model):
        w.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_ref(path: Path, pcm: np.ndarray, desc: str, mel: torch.Tensor, valid: int, runs: dict,
              st: dict) -> None:
    w = gguf.GGUFWriter(str(path), "steno-ref")
    arr = lambda k, v, sub: w.add_key_value(k, list(v), VT.ARRAY, sub_type=sub)  # noqa: E731
    u32 = lambda k, v: w.add_key_value(k, int(v), VT.UINT32)  # noqa: E731
    w.add_key_value("ref.model", "nemotron_asr_tiny", VT.STRING)
    w.add_key_value("ref.source", "transformers Nemotron3_5AsrForRNNT (scripts/dump_nemotron_asr.py)",
                    VT.STRING)
    w.add_key_value("ref.speech.description", desc, VT.STRING)
    u32("ref.speech.n_frames_valid", valid)
    arr("ref.runs", list(runs), VT.STRING)
    for name, r in runs.items():
        k = f"ref.{name}."
        w.add_key_value(k + "language", name, VT.STRING)
        u32(k + "prompt_id", r["prompt"])
        u32(k + "t_enc", r["enc"].shape[0])
        arr(k + "tokens", r["tokens"], VT.INT32)
        arr(k + "token_frames", r["frames"], VT.INT32)
        w.add_key_value(k + "text", r["text"], VT.STRING)
        w.add_key_value(k + "min_margin", float(r["margin"]), VT.FLOAT32)
        w.add_tensor(f"{name}.encoder_out", r["enc"].numpy())
        w.add_tensor(f"{name}.enc_proj", r["proj"].numpy())
    k = "ref.stream."
    w.add_key_value(k + "language", "auto", VT.STRING)
    arr(k + "chunk_mel_cuts", st["cuts"], VT.INT32)
    arr(k + "chunk_frames", st["sizes"], VT.INT32)
    arr(k + "tokens", st["tokens"], VT.INT32)
    arr(k + "token_frames", st["frames"], VT.INT32)
    w.add_key_value(k + "text", st["text"], VT.STRING)
    w.add_key_value(k + "min_margin", float(st["margin"]), VT.FLOAT32)
    w.add_key_value(k + "offline_max_diff", float(st["offline_diff"]), VT.FLOAT32)
    w.add_tensor("stream.encoder_out", st["enc"].numpy())
    w.add_tensor("stream.enc_proj", st["proj"].numpy())
    w.add_tensor("speech.pcm", pcm.astype(np.float32))
    w.add_tensor("speech.mel", mel[0].numpy().astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@torch.no_grad()
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        pcm, desc = dp.speech_clip(Path(tmp))
    mel, valid = features(pcm)
    model = build_model()
    g = torch.Generator().manual_seed(SEED + 1)
    tune(model, mel[0, :valid], g)

    runs = {}
    for name, pid in RUNS.items():
        enc, proj, out = encode(model, mel, pid, attention_mask=(torch.arange(mel.shape[1]) < valid)[None])
        n = int(out.attention_mask.sum()) if out.attention_mask is not None else enc.shape[0]
        enc_v, proj_v, _ = encode(model, mel[:, :valid], pid)      # valid frames only: the same
        assert enc_v.shape[0] == n, (enc_v.shape, n)
        assert torch.allclose(enc[:n], enc_v, atol=1e-5), float((enc[:n] - enc_v).abs().max())
        toks, frames, margin, caps = greedy(model, proj_v)
        runs[name] = dict(prompt=pid, enc=enc_v, proj=proj_v, tokens=toks, frames=frames,
                          text=text_of(toks), margin=margin)
        print(f"offline {name}: {n} frames, {len(toks)} tokens, margin {margin:.4f}, caps {caps}: "
              f"{runs[name]['text']!r}")
    # transformers' own decode agrees with the spec loop (offline, auto)
    model.generation_config.decoder_start_token_id = model.config.blank_token_id
    model.generation_config.bos_token_id = model.config.blank_token_id
    gen = model.generate(input_features=mel[:, :valid], prompt_ids=torch.tensor([AUTO_ID]),
                         num_lookahead_tokens=RIGHT)
    seq = [t for t in gen.sequences[0].tolist() if t != model.config.blank_token_id]
    assert seq == runs["auto"]["tokens"], (seq, runs["auto"]["tokens"])

    enc_s, proj_s, sizes, cuts = stream(model, mel[0, :valid], AUTO_ID)
    n_off = runs["auto"]["enc"].shape[0]
    # Cache-aware streaming equals the offline chunked run on every frame before the padded tail.
    diff = float((enc_s[:n_off - 1] - runs["auto"]["enc"][:n_off - 1]).abs().max())
    toks, frames, margin, caps = greedy(model, proj_s)
    st = dict(enc=enc_s, proj=proj_s, sizes=sizes, cuts=cuts, tokens=toks, frames=frames,
              text=text_of(toks), margin=margin, offline_diff=diff)
    print(f"stream: {len(sizes)} chunks {sizes}, {enc_s.shape[0]} frames, max |stream - offline| {diff:.2e}, "
          f"{len(toks)} tokens, margin {margin:.4f}: {st['text']!r}")

    args.out.mkdir(parents=True, exist_ok=True)
    write_model(args.out / "nemotron_asr_tiny.gguf", model)
    write_ref(args.out / "nemotron_asr_tiny.ref.gguf", pcm, desc, mel[:, :valid], valid, runs, st)
    for f in ("nemotron_asr_tiny.gguf", "nemotron_asr_tiny.ref.gguf"):
        print(f, (args.out / f).stat().st_size, "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
