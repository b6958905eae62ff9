#!/usr/bin/env python3
"""Convert a transformers Moonshine or Moonshine Streaming checkpoint
(MoonshineForConditionalGeneration / MoonshineStreamingForConditionalGeneration,
as UsefulSensors publishes them) to a GGUF in transcribe.cpp's layout:
shared/spec/gguf-whisper-moonshine.md section 3 (architecture "moonshine") and
section 4 ("moonshine_streaming").

Input: a directory with config.json, model.safetensors (or a sharded index; BF16
widened to F32), tokenizer.json (SentencePiece-style BPE with byte fallback),
and optionally generation_config.json (token ids) and preprocessor_config.json
or processor_config.json (sample rate). Both config layouts are read: rotary
settings at the top (transformers 4, as moonshine-tiny/base ship) or in
rope_parameters (transformers 5).

Needs numpy and gguf (gguf-py); safetensors if installed. No torch.

    python scripts/convert_moonshine.py MODEL_DIR OUT.gguf [--outtype f32|f16|q8_0]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_tensors import encode  # noqa: E402
from convert_parakeet import ConvertError, load_state_dict, size_label  # noqa: E402

OUTTYPES = ("f32", "f16", "q8_0")
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7}
TOK_NORMAL, TOK_UNKNOWN, TOK_CONTROL, TOK_BYTE = 1, 2, 3, 6
SR = 16000


def read_json(path: Path, required: bool = True) -> dict:
    if not path.exists():
        if required:
            raise ConvertError(f"missing {path}")
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------
# Tokenizer: tokenizer.json (BPE, byte fallback) plus its added tokens
# ---------------------------------------------------------------------------

_BYTE_PIECE = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")


def read_tokenizer(path: Path, vocab: int) -> dict:
    """Pieces and llama.cpp types (spec 3.2): <unk> UNKNOWN, special added tokens
    CONTROL (<s>, </s>, <<ST_n>>), <0xHH> BYTE, the rest NORMAL; merges as "a b"."""
    tj = read_json(path)
    model = tj.get("model") or {}
    if model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise ConvertError(f"{path}: model type {model.get('type')!r} (Moonshine's is BPE)")
    if not model.get("byte_fallback", False):
        raise ConvertError(f"{path}: byte_fallback is off (Moonshine's BPE falls back to <0xHH>)")
    by_id = {int(i): (p, False) for p, i in model["vocab"].items()}
    for t in tj.get("added_tokens") or []:
        by_id[int(t["id"])] = (t["content"], bool(t.get("special", False)))
    if sorted(by_id) != list(range(vocab)):
        raise ConvertError(f"{path}: token ids are not 0..{vocab - 1} (config vocab_size {vocab})")
    tokens, types = [], []
    for i in range(vocab):
        piece, special = by_id[i]
        tokens.append(piece)
        types.append(TOK_UNKNOWN if piece == "<unk>" else TOK_CONTROL if special
                     else TOK_BYTE if _BYTE_PIECE.match(piece) else TOK_NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    ids = {p: i for i, p in enumerate(tokens)}
    return {"tokens": tokens, "types": types, "merges": merges, "unk_id": ids.get("<unk>")}


# ---------------------------------------------------------------------------
# Hyperparameters
# ---------------------------------------------------------------------------

def _rope(cfg: dict, default_factor: float) -> tuple[float, float]:
    """(partial_rotary_factor, rope_theta) from rope_parameters or the top level."""
    rp = cfg.get("rope_parameters") or {}
    if rp.get("rope_type", "default") != "default":
        raise ConvertError(f"rope_type {rp.get('rope_type')!r}: only the default rotary embedding exists")
    factor = rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", default_factor))
    theta = rp.get("rope_theta", cfg.get("rope_theta", 10000.0))
    if not 0 < float(factor) <= 1:
        raise ConvertError(f"partial_rotary_factor {factor} is not in (0, 1]")
    return float(factor), float(theta)


def _tower(n_layers, d, heads, kv_heads, ffn, act, want_act, head_dim=None) -> dict:
    t = dict(n_layers=int(n_layers), d_model=int(d), n_heads=int(heads),
             n_kv_heads=int(kv_heads if kv_heads is not None else heads), ffn_dim=int(ffn),
             activation=str(act).lower())
    t["head_dim"] = int(head_dim) if head_dim is not None else t["d_model"] // t["n_heads"]
    if t["activation"] != want_act:
        raise ConvertError(f"activation {t['activation']!r}: the published layout has {want_act!r}")
    if t["n_kv_heads"] != t["n_heads"]:
        raise ConvertError(f"{t['n_kv_heads']} kv heads of {t['n_heads']}: the layout has no GQA")
    if min(t["n_layers"], t["n_heads"], t["ffn_dim"], t["head_dim"]) < 1:
        raise ConvertError(f"a tower with {t}")
    return t


def _token_ids(cfg: dict, gen: dict, pad_default: int) -> dict:
    """bos / eos / pad / decoder_start: generation_config.json first, then config.json."""
    def pick(key, default):
        for src in (gen, cfg):
            v = src.get(key)
            if isinstance(v, list):  # generation_config may list several eos ids
                v = v[0] if v else None
            if v is not None:
                return int(v)
        return default

    bos = pick("bos_token_id", 1)
    eos = pick("eos_token_id", 2)
    return dict(bos=bos, eos=eos, pad=pick("pad_token_id", pad_default),
                decoder_start=pick("decoder_start_token_id", bos))


def read_hparams(cfg: dict, gen: dict, fe: dict, sd: dict) -> dict:
    kind = cfg.get("model_type")
    if kind not in ("moonshine", "moonshine_streaming"):
        raise ConvertError(f"config.json model_type {kind!r} is not moonshine or moonshine_streaming")
    if bool(cfg.get("attention_bias", False)):
        raise ConvertError("attention_bias is set: the published layout has no attention biases")
    rate = int(fe.get("sampling_rate", SR))
    hp = dict(arch=kind, vocab=int(cfg["vocab_size"]), max_pos=int(cfg["max_position_embeddings"]),
              pad_head_dim=int(cfg.get("pad_head_dim_to_multiple_of") or 0), sample_rate=rate,
              feature_size=int(fe.get("feature_size", 1)))
    if kind == "moonshine":
        d, ff = cfg["hidden_size"], cfg["intermediate_size"]
        hp["enc"] = _tower(cfg["encoder_num_hidden_layers"], d, cfg["encoder_num_attention_heads"],
                           cfg.get("encoder_num_key_value_heads"), ff,
                           cfg.get("encoder_hidden_act", "gelu"), "gelu")
        hp["dec"] = _tower(cfg["decoder_num_hidden_layers"], d, cfg["decoder_num_attention_heads"],
                           cfg.get("decoder_num_key_value_heads"), ff,
                           cfg.get("decoder_hidden_act", "silu"), "silu")
        hp["tie"] = bool(cfg.get("tie_word_embeddings", True))
        hp["factor"], hp["theta"] = _rope(cfg, 0.9)
        hp["ids"] = _token_ids(cfg, gen, 2)
        if not hp["tie"]:
            raise ConvertError("tie_word_embeddings is false: Moonshine's head is the token embedding")
    else:
        e = cfg.get("encoder_config") or {}
        hp["enc"] = _tower(e["num_hidden_layers"], e["hidden_size"], e["num_attention_heads"],
                           e.get("num_key_value_heads"), e["intermediate_size"],
                           e.get("hidden_act", "gelu"), "gelu", e.get("head_dim"))
        hp["dec"] = _tower(cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"],
                           cfg.get("num_key_value_heads"), cfg["intermediate_size"],
                           cfg.get("hidden_act", "silu"), "silu", cfg.get("head_dim"))
        hp["tie"] = bool(cfg.get("tie_word_embeddings", False))
        hp["factor"], hp["theta"] = _rope(cfg, 0.8)
        hp["ids"] = _token_ids(cfg, gen, 0)
        frame_ms, enc_rate = float(e.get("frame_ms", 5.0)), int(e.get("sample_rate", SR))
        hp["frame_ms"], hp["frame_len"] = frame_ms, int(round(enc_rate * frame_ms / 1000.0))
        windows = e.get("sliding_windows") or []
        if len(windows) != hp["enc"]["n_layers"] or any(len(w) != 2 for w in windows):
            raise ConvertError(f"sliding_windows {windows} is not one (left, right) pair per encoder layer")
        hp["windows"] = [int(x) for w in windows for x in w]
        top = cfg.get("encoder_hidden_size", hp["enc"]["d_model"])
        if int(top) != hp["enc"]["d_model"] or enc_rate != rate:
            raise ConvertError(f"encoder_hidden_size {top} / sample rate {enc_rate} disagree with the "
                               f"encoder ({hp['enc']['d_model']}, {rate} Hz)")
        hp["has_proj"] = "model.decoder.proj.weight" in sd
        if hp["has_proj"] != (hp["enc"]["d_model"] != hp["dec"]["d_model"]):
            raise ConvertError("model.decoder.proj.weight must exist exactly when the widths differ")
        if hp["tie"]:
            raise ConvertError("tie_word_embeddings is set: Moonshine Streaming has its own head")
    if rate != SR:
        raise ConvertError(f"sample rate {rate}: Moonshine reads 16 kHz")
    if kind == "moonshine" and hp["enc"]["d_model"] != hp["dec"]["d_model"]:
        raise ConvertError("encoder and decoder widths differ")
    for k, v in hp["ids"].items():
        if not 0 <= v < hp["vocab"]:
            raise ConvertError(f"{k}_token_id {v} is outside the vocabulary of {hp['vocab']}")
    return hp


# ---------------------------------------------------------------------------
# Tensors (spec 3.3 and 4.3): (GGUF name, transformers name, transform)
# ---------------------------------------------------------------------------

PROJ = (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("out", "o_proj"))
MLP = [(f"ffn.{f}.{w}", f"mlp.{f}.{w}") for f in ("fc1", "fc2") for w in ("weight", "bias")]


def unit_offset(a: np.ndarray) -> np.ndarray:
    """Streaming's encoder LayerNorm gain is γ + 1; the file holds it folded."""
    return a + np.float32(1.0)


def as_vector(a: np.ndarray) -> np.ndarray:
    """comp.log_k is a 0-d scalar in the checkpoint, [1] in the file."""
    return a.reshape(1)


def _enc_blocks(hp: dict) -> list:
    streaming = hp["arch"] == "moonshine_streaming"
    norm, fold = ("gamma", unit_offset) if streaming else ("weight", None)
    plan = []
    for i in range(hp["enc"]["n_layers"]):
        s, o = f"model.encoder.layers.{i}.", f"enc.blocks.{i}."
        plan.append((o + "norm_attn.weight", s + f"input_layernorm.{norm}", fold))
        plan += [(o + f"attn.{a}.weight", s + f"self_attn.{b}.weight", None) for a, b in PROJ]
        plan.append((o + "norm_ffn.weight", s + f"post_attention_layernorm.{norm}", fold))
        plan += [(o + g, s + t, None) for g, t in MLP]
    return plan


def _dec_blocks(hp: dict) -> list:
    plan = []
    for i in range(hp["dec"]["n_layers"]):
        s, o = f"model.decoder.layers.{i}.", f"dec.blocks.{i}."
        plan.append((o + "norm_self.weight", s + "input_layernorm.weight", None))
        plan += [(o + f"self_attn.{a}.weight", s + f"self_attn.{b}.weight", None) for a, b in PROJ]
        plan.append((o + "norm_cross.weight", s + "post_attention_layernorm.weight", None))
        plan += [(o + f"cross_attn.{a}.weight", s + f"encoder_attn.{b}.weight", None) for a, b in PROJ]
        plan.append((o + "norm_ffn.weight", s + "final_layernorm.weight", None))
        plan += [(o + g, s + t, None) for g, t in MLP]
    return plan


def _front(hp: dict) -> list:
    if hp["arch"] == "moonshine":
        e = "model.encoder."
        return [("enc.conv.0.weight", e + "conv1.weight", None),
                ("enc.conv.norm.weight", e + "groupnorm.weight", None),
                ("enc.conv.norm.bias", e + "groupnorm.bias", None),
                ("enc.conv.1.weight", e + "conv2.weight", None),
                ("enc.conv.1.bias", e + "conv2.bias", None),
                ("enc.conv.2.weight", e + "conv3.weight", None),
                ("enc.conv.2.bias", e + "conv3.bias", None),
                ("enc.final_norm.weight", e + "layer_norm.weight", None)]
    e = "model.encoder.embedder."
    plan = [("enc.embedder.comp.log_k", e + "comp.log_k", as_vector),
            ("enc.embedder.linear.weight", e + "linear.weight", None)]
    plan += [(f"enc.embedder.{c}.{w}", f"{e}{c}.{w}", None) for c in ("conv1", "conv2") for w in ("weight", "bias")]
    return plan + [("enc.final_norm.weight", "model.encoder.final_norm.gamma", unit_offset)]


def _head(hp: dict) -> list:
    d = "model.decoder."
    plan = [("dec.token_embd.weight", d + "embed_tokens.weight", None)]
    if hp["arch"] == "moonshine_streaming":
        plan = [("adapter.pos_emb.weight", d + "pos_emb.weight", None)] + (
            [("adapter.proj.weight", d + "proj.weight", None)] if hp["has_proj"] else []) + plan
        plan.append(("dec.lm_head.weight", "proj_out.weight", None))
    return plan + [("dec.final_norm.weight", d + "norm.weight", None)]


def tensor_plan(hp: dict, sd: dict) -> list[tuple[str, np.ndarray]]:
    """Every GGUF tensor in writing order, f32 in PyTorch order (gguf-py stores ne
    reversed: a Linear [out, in] is ne [in, out]); a checkpoint tensor left over
    is an error, except a tied head's copy of the embedding."""
    entries = _front(hp) + _enc_blocks(hp) + _head(hp) + _dec_blocks(hp)
    plan, used = [], set()
    for dst, src, fn in entries:
        if src not in sd:
            raise ConvertError(f"checkpoint lacks tensor {src}")
        used.add(src)
        a = np.asarray(sd[src], dtype=np.float32)
        plan.append((dst, fn(a) if fn else a))
    if hp["tie"] and "proj_out.weight" in sd:
        if not np.array_equal(sd["proj_out.weight"], sd["model.decoder.embed_tokens.weight"]):
            raise ConvertError("proj_out.weight differs from the tied token embedding")
        used.add("proj_out.weight")
    left = sorted(set(sd) - used)
    if left:
        raise ConvertError(f"checkpoint tensors with no place in the GGUF: {left[:8]}")
    check_shapes(hp, plan)
    return plan


def check_shapes(hp: dict, plan) -> None:
    """ne of every tensor as spec 3.3 / 4.3 state them."""
    enc, dec = hp["enc"], hp["dec"]
    De, Dd, V = enc["d_model"], dec["d_model"], hp["vocab"]
    Ae, Ad = enc["n_heads"] * enc["head_dim"], dec["n_heads"] * dec["head_dim"]
    want = {"dec.token_embd.weight": [Dd, V], "dec.lm_head.weight": [Dd, V],
            "adapter.pos_emb.weight": [De, hp["max_pos"]], "adapter.proj.weight": [De, Dd],
            "enc.conv.0.weight": [127, 1, De], "enc.conv.1.weight": [7, De, 2 * De],
            "enc.conv.1.bias": [2 * De], "enc.conv.2.weight": [3, 2 * De, De],
            "enc.embedder.comp.log_k": [1], "enc.embedder.linear.weight": [hp.get("frame_len"), De],
            "enc.embedder.conv1.weight": [5, De, 2 * De], "enc.embedder.conv1.bias": [2 * De],
            "enc.embedder.conv2.weight": [5, 2 * De, De]}
    blk = {"enc": {"attn.q.weight": [De, Ae], "attn.k.weight": [De, Ae], "attn.v.weight": [De, Ae],
                   "attn.out.weight": [Ae, De], "ffn.fc1.weight": [De, enc["ffn_dim"]],
                   "ffn.fc1.bias": [enc["ffn_dim"]], "ffn.fc2.weight": [enc["ffn_dim"], De]},
           "dec": {"ffn.fc1.weight": [Dd, 2 * dec["ffn_dim"]], "ffn.fc1.bias": [2 * dec["ffn_dim"]],
                   "ffn.fc2.weight": [dec["ffn_dim"], Dd]}}
    for a in ("self_attn", "cross_attn"):
        blk["dec"].update({f"{a}.{p}.weight": [Dd, Ad] for p in "qkv"})
        blk["dec"][f"{a}.out.weight"] = [Ad, Dd]
    for name, arr in plan:
        ne = list(reversed(arr.shape))
        m = re.match(r"(enc|dec)\.blocks\.\d+\.(.*)$", name)
        default = [De] if name.startswith("enc") else [Dd]
        exp = blk[m.group(1)].get(m.group(2), [De] if m.group(1) == "enc" else [Dd]) if m \
            else want.get(name, default)
        if ne != exp:
            raise ConvertError(f"{name}: ne {ne}, the published layout has {exp}")


# ---------------------------------------------------------------------------
# Dtype policy (transcribe-quantize's F16 / Q8_0 presets, spec 3.3 / 4.3)
# ---------------------------------------------------------------------------

def target_type(name: str, ne0: int, outtype: str) -> QT:
    """Norms, biases and log_k stay F32; the conv stem and its GroupNorm (names
    with ".conv.") stay F32; everything else (attention, MLPs, embeddings, the
    head, the adapter, Streaming's embedder linear and convs) takes the file
    type, Q8_0 falling back to F16 where ne[0] is not a multiple of 32 (the
    embedder's 80-wide linear and 5-tap convs)."""
    if outtype == "f32":
        return QT.F32
    if (name.endswith(".bias") or ("norm_" in name and name.endswith(".weight"))
            or name.endswith("_norm.weight") or name == "enc.embedder.comp.log_k"):
        return QT.F32
    if ".conv." in name and name.endswith(".weight"):
        return QT.F32
    if outtype == "f16" or ne0 % 32:
        return QT.F16
    return QT.Q8_0


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

def _model_keys(w, hp: dict) -> None:
    p = f"stt.{hp['arch']}."
    u32 = lambda k, v: w.add_key_value(p + k, int(v), VT.UINT32)  # noqa: E731
    for part in ("encoder", "decoder"):
        t = hp["enc" if part == "encoder" else "dec"]
        for key in ("n_layers", "d_model", "n_heads", "n_kv_heads") + (
                ("head_dim",) if hp["arch"] == "moonshine_streaming" else ()) + ("ffn_dim",):
            u32(f"{part}.{key}", t[key])
        w.add_key_value(f"{p}{part}.activation", t["activation"], VT.STRING)
    if hp["arch"] == "moonshine_streaming":
        w.add_key_value(p + "encoder.frame_ms", hp["frame_ms"], VT.FLOAT32)
        u32("encoder.frame_len", hp["frame_len"])
        w.add_key_value(p + "encoder.sliding_windows", hp["windows"], VT.ARRAY, sub_type=VT.INT32)
    u32("decoder.vocab_size", hp["vocab"])
    u32("decoder.max_position_embeddings", hp["max_pos"])
    w.add_key_value(p + "decoder.tie_word_embeddings", hp["tie"], VT.BOOL)
    for k in ("bos", "eos", "pad", "decoder_start"):
        u32(f"{k}_token_id", hp["ids"][k])
    w.add_key_value(p + "partial_rotary_factor", hp["factor"], VT.FLOAT32)
    w.add_key_value(p + "rope_theta", hp["theta"], VT.FLOAT32)
    w.add_key_value(p + "attention_bias", False, VT.BOOL)
    u32("pad_head_dim_to_multiple_of", hp["pad_head_dim"])
    if hp["arch"] == "moonshine":
        D = hp["enc"]["d_model"]
        for k, v in (("channels", [D, 2 * D, D]), ("kernel_sizes", [127, 7, 3]), ("strides", [64, 3, 2])):
            w.add_key_value(p + "conv_stem." + k, v, VT.ARRAY, sub_type=VT.INT32)
        u32("conv_stem.groupnorm_num_groups", 1)     # transformers' GroupNorm(1, D, eps=1e-5)
        w.add_key_value(p + "conv_stem.groupnorm_eps", 1e-5, VT.FLOAT32)
    else:
        w.add_key_value(p + "cmvn_eps", 1e-6, VT.FLOAT32)   # transformers' frame CMVN epsilon
        u32("encoder_hidden_size", hp["enc"]["d_model"])
        w.add_key_value(p + "adapter_has_proj", hp["has_proj"], VT.BOOL)
        w.add_key_value(p + "encoder_layernorm_unit_offset", True, VT.BOOL)  # already folded


def write_gguf(out: Path, hp: dict, tok: dict, plan, outtype: str, meta: dict) -> None:
    tmp = out.with_name(out.name + ".part")   # never leave a half-written OUT behind
    w = gguf.GGUFWriter(str(tmp), hp["arch"])
    s = lambda k, v: w.add_key_value(k, str(v), VT.STRING)  # noqa: E731
    b = lambda k, v: w.add_key_value(k, bool(v), VT.BOOL)    # noqa: E731
    u32 = lambda k, v: w.add_key_value(k, int(v), VT.UINT32)  # noqa: E731
    streaming = hp["arch"] == "moonshine_streaming"
    if meta.get("name"):
        s("general.name", meta["name"])
    s("general.basename", hp["arch"])
    s("general.size_label", size_label(sum(int(a.size) for _, a in plan)))
    for k in ("license", "repo_url"):
        if meta.get(k):
            s(f"general.{k}", meta[k])
    u32("general.file_type", FILE_TYPE[outtype])
    w.add_key_value("general.languages", meta.get("languages") or ["en"], VT.ARRAY, sub_type=VT.STRING)
    s("stt.variant", meta.get("variant") or f"{hp['arch'].replace('_', '-')}-custom")
    for cap in ("lang_detect", "translate", "timestamps"):
        b(f"stt.capability.{cap}", False)
    if streaming:
        b("stt.capability.streaming", True)
    _model_keys(w, hp)
    s("stt.frontend.type", "raw")                  # the PCM itself; no mel
    u32("stt.frontend.sample_rate", hp["sample_rate"])
    if not streaming:
        u32("stt.frontend.num_mels", hp["feature_size"])   # the conv's input channels (1)
    s("tokenizer.ggml.model", "bpe")
    s("tokenizer.ggml.pre", "default")
    b("tokenizer.ggml.byte_fallback", True)
    b("tokenizer.ggml.add_bos_token", True)
    if tok["unk_id"] is not None:
        u32("tokenizer.ggml.unknown_token_id", tok["unk_id"])
    u32("tokenizer.ggml.bos_token_id", hp["ids"]["bos"])
    u32("tokenizer.ggml.eos_token_id", hp["ids"]["eos"])
    u32("tokenizer.ggml.padding_token_id", hp["ids"]["pad"])
    # The bulky arrays last, as transcribe.cpp's writer orders them.
    w.add_key_value("tokenizer.ggml.tokens", tok["tokens"], VT.ARRAY, sub_type=VT.STRING)
    w.add_key_value("tokenizer.ggml.token_type", tok["types"], VT.ARRAY, sub_type=VT.INT32)
    if tok["merges"]:
        w.add_key_value("tokenizer.ggml.merges", tok["merges"], VT.ARRAY, sub_type=VT.STRING)
    for name, a in plan:
        qt = target_type(name, a.shape[-1], outtype)
        w.add_tensor(name, encode(a, qt), raw_dtype=None if qt in (QT.F32, QT.F16) else qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, out)


def load_frontend(model_dir: Path) -> dict:
    pre = read_json(model_dir / "preprocessor_config.json", required=False)
    if not pre:
        pre = read_json(model_dir / "processor_config.json", required=False).get("feature_extractor") or {}
    return pre


def convert(model_dir: Path, out: Path, outtype: str = "f32", meta: dict | None = None) -> dict:
    if outtype not in OUTTYPES:
        raise ConvertError(f"--outtype must be one of {OUTTYPES}")
    model_dir = Path(model_dir)
    cfg = read_json(model_dir / "config.json")
    gen = read_json(model_dir / "generation_config.json", required=False)
    sd = load_state_dict(model_dir)
    hp = read_hparams(cfg, gen, load_frontend(model_dir), sd)
    tok = read_tokenizer(model_dir / "tokenizer.json", hp["vocab"])
    plan = tensor_plan(hp, sd)
    write_gguf(Path(out), hp, tok, plan, outtype, meta or {})
    return hp


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir", type=Path, help="transformers checkpoint directory")
    p.add_argument("out", type=Path, help="output .gguf")
    p.add_argument("--outtype", choices=OUTTYPES, default="f32")
    p.add_argument("--variant", help="stt.variant (e.g. moonshine-tiny); default <arch>-custom")
    p.add_argument("--name", help="general.name")
    p.add_argument("--languages", default="en", help="comma-separated general.languages")
    p.add_argument("--license", help="general.license")
    p.add_argument("--repo-url", help="general.repo_url")
    a = p.parse_args(argv)
    meta = dict(variant=a.variant, name=a.name, license=a.license, repo_url=a.repo_url,
                languages=[x for x in a.languages.split(",") if x])
    try:
        hp = convert(a.model_dir, a.out, a.outtype, meta)
    except (ConvertError, OSError, KeyError, ValueError, TypeError) as e:
        kind = "error" if isinstance(e, ConvertError) else type(e).__name__
        print(f"convert_moonshine: {kind}: {e}", file=sys.stderr)
        return 1
    print(f"wrote {a.out} ({hp['arch']}, {hp['enc']['n_layers']}+{hp['dec']['n_layers']} layers, "
          f"{a.outtype})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
