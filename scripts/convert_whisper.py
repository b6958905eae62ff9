#!/usr/bin/env python3
"""Convert a transformers Whisper checkpoint (WhisperForConditionalGeneration)
to a GGUF in transcribe.cpp's published layout, or to whisper.cpp's legacy
ggml .bin.

The GGUF layout is shared/spec/gguf-whisper-moonshine.md sections 0 and 2:
architecture "whisper", every key with its exact GGUF type (UINT32 is not
INT32), tensor names, ne order, and the dtype policy of section 2.9. The .bin
layout is section 2.11 (only for the standard vocabulary sizes 51864-51866).

Input: a directory with config.json, model.safetensors (or a sharded
model.safetensors.index.json), generation_config.json, preprocessor_config.json
(optional: spec defaults) and the tokenizer (tokenizer.json, or vocab.json +
merges.txt + added_tokens.json).

Needs only numpy and gguf (gguf-py); no torch, no safetensors package.

    python scripts/convert_whisper.py MODEL_DIR OUT.gguf [--outtype auto|f32|f16|bf16|q8_0]
    python scripts/convert_whisper.py MODEL_DIR OUT.bin --ggml-bin [--outtype f32|f16]
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_tensors import encode  # noqa: E402
from gguf import GGUFValueType as VT

TOK_NORMAL, TOK_CONTROL = 1, 3
OUTTYPES = ("auto", "f32", "f16", "bf16", "q8_0")
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}  # llama.cpp LlamaFileType ids


class ConvertError(Exception):
    pass


# ---------------------------------------------------------------------------
# Reading the checkpoint
# ---------------------------------------------------------------------------

_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
              "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], set[str]]:
    """Every tensor of a .safetensors file as f32 (BF16 widened), and the dtypes seen."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out, dtypes = {}, set()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = np.asarray(data[lo:hi])
        dt = info["dtype"]
        if dt == "BF16":
            arr = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif dt in _ST_DTYPES:
            arr = raw.view(_ST_DTYPES[dt])
        else:
            raise ConvertError(f"{path.name}: tensor {name} has unsupported dtype {dt}")
        if arr.dtype.kind == "f":
            dtypes.add(dt)
            arr = arr.astype(np.float32)
        out[name] = arr.reshape(info["shape"])
    return out, dtypes


def load_state_dict(model_dir: Path) -> tuple[dict[str, np.ndarray], set[str]]:
    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        files = [model_dir / s for s in sorted(set(json.loads(index.read_text())["weight_map"].values()))]
    else:
        files = [model_dir / "model.safetensors"]
    sd, dtypes = {}, set()
    for f in files:
        if not f.exists():
            raise ConvertError(f"missing weights file {f}")
        part, dt = read_safetensors(f)
        sd.update(part)
        dtypes |= dt
    return sd, dtypes


def read_json(path: Path, required: bool = True) -> dict:
    if not path.exists():
        if required:
            raise ConvertError(f"missing {path}")
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------
# Tokenizer: GPT-2 byte-level BPE plus Whisper's added tokens
# ---------------------------------------------------------------------------

def load_tokenizer(model_dir: Path, vocab_size: int) -> dict:
    """tokens[id] (byte-unicode strings, specials literal, gaps <|unused_i|>),
    token types (added specials CONTROL) and merges as "a b"."""
    tj = read_json(model_dir / "tokenizer.json", required=False)
    if tj:
        if tj["model"].get("type") != "BPE":
            raise ConvertError(f"tokenizer.json: model type {tj['model'].get('type')!r}, expected BPE")
        vocab = tj["model"]["vocab"]
        merges = tj["model"].get("merges", [])
        added = [(int(a["id"]), a["content"], bool(a.get("special", False)))
                 for a in tj.get("added_tokens", [])]
    else:
        vocab = read_json(model_dir / "vocab.json")
        lines = (model_dir / "merges.txt").read_text(encoding="utf-8").splitlines()
        merges = [ln for ln in lines if ln and not ln.startswith("#version")]
        added = [(int(i), s, True) for s, i in read_json(model_dir / "added_tokens.json", False).items()]
        cfg = read_json(model_dir / "tokenizer_config.json", required=False)
        for i, a in (cfg.get("added_tokens_decoder") or {}).items():
            added.append((int(i), a["content"], bool(a.get("special", False))))
    merges = [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in merges]
    by_id = {int(i): (s, False) for s, i in vocab.items()}
    for i, s, special in added:
        by_id[i] = (s, special)
    if max(by_id) >= vocab_size:
        raise ConvertError(f"tokenizer has id {max(by_id)} but vocab_size is {vocab_size}")
    tokens, types = [], []
    for i in range(vocab_size):
        s, special = by_id.get(i, (f"<|unused_{i}|>", False))
        tokens.append(s)
        types.append(TOK_CONTROL if special else TOK_NORMAL)
    ids = {s: i for i, (s, _) in by_id.items()}
    return {"tokens": tokens, "types": types, "merges": merges, "ids": ids}


# ---------------------------------------------------------------------------
# Hyperparameters
# ---------------------------------------------------------------------------

def read_hparams(cfg: dict, gen: dict, pre: dict, tok: dict) -> dict:
    hp = {k: int(cfg[k]) for k in ("d_model", "encoder_layers", "encoder_attention_heads",
                                  "encoder_ffn_dim", "decoder_layers", "decoder_attention_heads",
                                  "decoder_ffn_dim", "num_mel_bins", "max_source_positions",
                                  "max_target_positions", "vocab_size")}
    act = str(cfg.get("activation_function", "gelu")).lower()
    if act != "gelu":
        raise ConvertError(f"activation {act!r}: the published layout has only gelu")
    if cfg.get("scale_embedding", False):
        raise ConvertError("scale_embedding = true is not in the published layout")
    if not cfg.get("tie_word_embeddings", True):
        raise ConvertError("untied output projection is not in the published layout")
    d = hp["d_model"]
    if d % hp["encoder_attention_heads"] or d % hp["decoder_attention_heads"]:
        raise ConvertError(f"d_model {d} is not divisible by the head counts")
    ids = tok["ids"]

    def gen_id(key, literal):
        v = gen.get(key)
        return int(v) if v is not None else ids.get(literal)

    hp["decoder_start"] = gen_id("decoder_start_token_id", "<|startoftranscript|>")
    hp["no_timestamps"] = gen_id("no_timestamps_token_id", "<|notimestamps|>")
    if hp["decoder_start"] is None or hp["no_timestamps"] is None:
        raise ConvertError("generation_config.json lacks decoder_start_token_id / no_timestamps_token_id")
    hp["sot"] = ids.get("<|startoftranscript|>")
    hp["transcribe"] = (gen.get("task_to_id") or {}).get("transcribe", ids.get("<|transcribe|>"))
    hp["translate"] = (gen.get("task_to_id") or {}).get("translate", ids.get("<|translate|>"))
    hp["prev_sot"] = gen_id("prev_sot_token_id", "<|startofprev|>")
    hp["eot"] = gen_id("eos_token_id", "<|endoftext|>")
    hp["suppress"] = [int(x) for x in gen.get("suppress_tokens") or []]
    hp["begin_suppress"] = [int(x) for x in gen.get("begin_suppress_tokens") or []]
    lang_to_id = gen.get("lang_to_id") or {}
    multilingual = bool(gen.get("is_multilingual", bool(lang_to_id)))
    # Language codes in token-id order (general.languages is read in that order).
    hp["languages"] = [s[2:-2] for s, _ in sorted(lang_to_id.items(), key=lambda kv: kv[1])] or ["en"]
    hp["multilingual"] = multilingual
    hp["sample_rate"] = int(pre.get("sampling_rate", 16000))
    hp["n_fft"] = int(pre.get("n_fft", 400))
    hp["hop_length"] = int(pre.get("hop_length", 160))
    hp["n_mels"] = int(pre.get("feature_size", hp["num_mel_bins"]))
    hp["chunk_length"] = int(pre.get("chunk_length", 30))
    hp["n_samples"] = int(pre.get("n_samples", hp["chunk_length"] * hp["sample_rate"]))
    hp["nb_max_frames"] = int(pre.get("nb_max_frames", hp["n_samples"] // hp["hop_length"]))
    if hp["n_mels"] != hp["num_mel_bins"]:
        raise ConvertError(f"feature_size {hp['n_mels']} != num_mel_bins {hp['num_mel_bins']}")
    if hp["nb_max_frames"] != 2 * hp["max_source_positions"]:
        raise ConvertError(f"{hp['nb_max_frames']} mel frames per window for "
                           f"{hp['max_source_positions']} encoder positions")
    return hp


def mel_filterbank(pre: dict, hp: dict) -> np.ndarray:
    """[n_mels][n_fft/2 + 1]: preprocessor_config's mel_filters when present
    (either orientation), else transformers' Slaney filterbank recomputed."""
    bins, m = hp["n_fft"] // 2 + 1, hp["n_mels"]
    if pre.get("mel_filters") is not None:
        fb = np.asarray(pre["mel_filters"], dtype=np.float64)
        if fb.shape == (bins, m):
            fb = fb.T
    else:
        fb = slaney_filterbank(bins, m, hp["sample_rate"])
    if fb.shape != (m, bins):
        raise ConvertError(f"mel filterbank of shape {fb.shape}, expected ({m}, {bins})")
    return np.ascontiguousarray(fb, dtype=np.float32)


def slaney_filterbank(bins: int, n_mels: int, sr: int) -> np.ndarray:
    """transformers.audio_utils.mel_filter_bank(norm="slaney", mel_scale="slaney",
    0..sr/2 Hz) in float64, as [n_mels][bins]."""
    def hz_to_mel(f):
        f = np.asarray(f, dtype=np.float64)
        lin = 3.0 * f / 200.0
        return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) * (27.0 / np.log(6.4)), lin)

    def mel_to_hz(mel):
        mel = np.asarray(mel, dtype=np.float64)
        lin = 200.0 * mel / 3.0
        return np.where(mel >= 15.0, 1000.0 * np.exp(np.log(6.4) / 27.0 * (mel - 15.0)), lin)

    mels = np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2)
    pts = mel_to_hz(mels)
    freqs = np.linspace(0, sr // 2, bins)
    diff = np.diff(pts)
    slopes = pts[None, :] - freqs[:, None]
    down = -slopes[:, :-2] / diff[:-1]
    up = slopes[:, 2:] / diff[1:]
    fb = np.maximum(0.0, np.minimum(down, up))
    fb *= (2.0 / (pts[2:n_mels + 2] - pts[:n_mels]))[None, :]
    return fb.T


# ---------------------------------------------------------------------------
# Tensors
# ---------------------------------------------------------------------------

ENC_BLOCK = [("self_attn_layer_norm", "norm_attn"), ("self_attn.q_proj", "attn.q"),
             ("self_attn.k_proj", "attn.k"), ("self_attn.v_proj", "attn.v"),
             ("self_attn.out_proj", "attn.out"), ("final_layer_norm", "norm_ffn"),
             ("fc1", "ffn.fc1"), ("fc2", "ffn.fc2")]
DEC_BLOCK = [("self_attn_layer_norm", "norm_self"), ("self_attn.q_proj", "self_attn.q"),
             ("self_attn.k_proj", "self_attn.k"), ("self_attn.v_proj", "self_attn.v"),
             ("self_attn.out_proj", "self_attn.out"), ("encoder_attn_layer_norm", "norm_cross"),
             ("encoder_attn.q_proj", "cross_attn.q"), ("encoder_attn.k_proj", "cross_attn.k"),
             ("encoder_attn.v_proj", "cross_attn.v"), ("encoder_attn.out_proj", "cross_attn.out"),
             ("final_layer_norm", "norm_ffn"), ("fc1", "ffn.fc1"), ("fc2", "ffn.fc2")]


def tensor_plan(hp: dict, sd: dict) -> list[tuple[str, np.ndarray]]:
    """(GGUF name, array in PyTorch order) for every tensor, checked for shape."""
    D, M, F_e, F_d = hp["d_model"], hp["num_mel_bins"], hp["encoder_ffn_dim"], hp["decoder_ffn_dim"]
    used, plan = set(), []

    def get(name):
        for prefix in ("model.", ""):
            if prefix + name in sd:
                used.add(prefix + name)
                return sd[prefix + name]
        raise ConvertError(f"checkpoint lacks tensor {name}")

    def add(dst, src, shape):
        a = get(src)
        if tuple(a.shape) != tuple(shape):
            raise ConvertError(f"{src}: shape {tuple(a.shape)}, expected {tuple(shape)}")
        plan.append((dst, a))

    def block(src, dst, pairs, ffn):
        for s, t in pairs:
            if "layer_norm" in s:
                add(f"{dst}.{t}.weight", f"{src}.{s}.weight", (D,))
                add(f"{dst}.{t}.bias", f"{src}.{s}.bias", (D,))
                continue
            rows, cols = (ffn, D) if s == "fc1" else (D, ffn) if s == "fc2" else (D, D)
            add(f"{dst}.{t}.weight", f"{src}.{s}.weight", (rows, cols))
            if not s.endswith("k_proj"):      # Whisper's k projections have no bias
                add(f"{dst}.{t}.bias", f"{src}.{s}.bias", (rows,))

    add("enc.conv.0.weight", "encoder.conv1.weight", (D, M, 3))
    add("enc.conv.0.bias", "encoder.conv1.bias", (D,))
    add("enc.conv.1.weight", "encoder.conv2.weight", (D, D, 3))
    add("enc.conv.1.bias", "encoder.conv2.bias", (D,))
    add("enc.pos_emb.weight", "encoder.embed_positions.weight", (hp["max_source_positions"], D))
    for i in range(hp["encoder_layers"]):
        block(f"encoder.layers.{i}", f"enc.blocks.{i}", ENC_BLOCK, F_e)
    add("enc.final_norm.weight", "encoder.layer_norm.weight", (D,))
    add("enc.final_norm.bias", "encoder.layer_norm.bias", (D,))
    add("dec.token_embd.weight", "decoder.embed_tokens.weight", (hp["vocab_size"], D))
    add("dec.pos_emb.weight", "decoder.embed_positions.weight", (hp["max_target_positions"], D))
    for i in range(hp["decoder_layers"]):
        block(f"decoder.layers.{i}", f"dec.blocks.{i}", DEC_BLOCK, F_d)
    add("dec.final_norm.weight", "decoder.layer_norm.weight", (D,))
    add("dec.final_norm.bias", "decoder.layer_norm.bias", (D,))
    head = sd.get("proj_out.weight")
    if head is not None:
        used.add("proj_out.weight")
        if not np.array_equal(head, sd[[k for k in used if k.endswith("decoder.embed_tokens.weight")][0]]):
            raise ConvertError("proj_out.weight differs from the token embedding: not tied")
    extra = sorted(k for k in sd if k not in used and not k.endswith("_float_tensor"))
    if extra:
        raise ConvertError(f"checkpoint tensors with no place in the GGUF: {extra[:5]}")
    return plan


def resolve_outtype(outtype: str, dtypes: set[str]) -> str:
    """auto: the checkpoint's own dtype (spec 2.9: F32 for tiny…large-v2, F16 for v3, BF16 fine-tunes)."""
    if outtype != "auto":
        return outtype
    if dtypes == {"F16"}:
        return "f16"
    if dtypes == {"BF16"}:
        return "bf16"
    return "f32"


def target_type(name: str, ne0: int, outtype: str) -> QT:
    """Spec 2.9: biases, norms, both position tables and the frontend buffers
    are F32 always; the conv stem follows the reference dtype (BF16 → F16) and
    stays F32 in quantized files; linears and the token embedding take the file
    type, Q8_0 falling back to F16 where ne[0] is not a multiple of 32."""
    if (name.endswith(".bias") or "norm" in name or "pos_emb" in name or name.startswith("frontend.")
            or outtype == "f32"):
        return QT.F32
    if name.startswith("enc.conv."):
        return {"f16": QT.F16, "bf16": QT.F16}.get(outtype, QT.F32)
    if outtype == "f16":
        return QT.F16
    if outtype == "bf16":
        return QT.BF16
    return QT.Q8_0 if ne0 % 32 == 0 else QT.F16



# ---------------------------------------------------------------------------
# Writing the GGUF
# ---------------------------------------------------------------------------

def write_gguf(out: Path, hp: dict, tok: dict, plan, fb: np.ndarray, outtype: str, meta: dict) -> None:
    w = gguf.GGUFWriter(str(out), "whisper")
    u32 = lambda k, v: w.add_key_value(k, int(v), VT.UINT32)      # noqa: E731
    f32 = lambda k, v: w.add_key_value(k, float(v), VT.FLOAT32)   # noqa: E731
    s = lambda k, v: w.add_key_value(k, str(v), VT.STRING)        # noqa: E731
    b = lambda k, v: w.add_key_value(k, bool(v), VT.BOOL)         # noqa: E731

    def arr(k, v, sub):
        if len(v):                         # gguf-py cannot write an empty array
            w.add_key_value(k, list(v), VT.ARRAY, sub_type=sub)

    n_params = sum(int(a.size) for _, a in plan)
    s("general.name", meta.get("name") or "Whisper")
    s("general.basename", "whisper")
    s("general.size_label", meta.get("size_label") or f"{n_params / 1e6:.0f}M")
    u32("general.file_type", FILE_TYPE[outtype])
    arr("general.languages", hp["languages"], VT.STRING)
    s("stt.variant", meta.get("variant") or "whisper-custom")
    b("stt.capability.lang_detect", hp["multilingual"])
    b("stt.capability.translate", hp["multilingual"])
    b("stt.capability.timestamps", True)
    if hp["multilingual"]:
        arr("stt.translation.target_languages", ["en"], VT.STRING)

    e, d = "stt.whisper.encoder.", "stt.whisper.decoder."
    u32(e + "n_layers", hp["encoder_layers"])
    u32(e + "d_model", hp["d_model"])
    u32(e + "n_heads", hp["encoder_attention_heads"])
    u32(e + "ffn_dim", hp["encoder_ffn_dim"])
    u32(e + "num_mel_bins", hp["num_mel_bins"])
    u32(e + "max_source_positions", hp["max_source_positions"])
    s(e + "activation", "gelu")
    u32(d + "n_layers", hp["decoder_layers"])
    u32(d + "d_model", hp["d_model"])
    u32(d + "n_heads", hp["decoder_attention_heads"])
    u32(d + "ffn_dim", hp["decoder_ffn_dim"])
    u32(d + "max_target_positions", hp["max_target_positions"])
    u32(d + "vocab_size", hp["vocab_size"])
    s(d + "activation", "gelu")
    b(d + "tie_word_embeddings", True)
    b(d + "scale_embedding", False)
    u32("stt.whisper.decoder_start_token_id", hp["decoder_start"])
    u32("stt.whisper.no_timestamps_token_id", hp["no_timestamps"])
    for key in ("sot", "transcribe", "translate", "prev_sot"):
        if hp[key] is not None:
            u32(f"stt.whisper.{key}_token_id", hp[key])
    arr("stt.whisper.suppress_tokens", hp["suppress"], VT.INT32)
    arr("stt.whisper.begin_suppress_tokens", hp["begin_suppress"], VT.INT32)

    fe = "stt.frontend."
    s(fe + "type", "mel")
    u32(fe + "num_mels", hp["n_mels"])
    u32(fe + "sample_rate", hp["sample_rate"])
    u32(fe + "n_fft", hp["n_fft"])
    u32(fe + "win_length", hp["n_fft"])
    u32(fe + "hop_length", hp["hop_length"])
    s(fe + "window", "hann_periodic")
    s(fe + "normalize", "whisper_logmel")
    f32(fe + "dither", 0.0)
    f32(fe + "pre_emphasis", 0.0)
    f32(fe + "f_min", 0.0)
    f32(fe + "f_max", hp["sample_rate"] / 2)
    s(fe + "pad_mode", "reflect")
    b(fe + "center", True)
    s(fe + "mel_norm", "slaney")
    u32(fe + "chunk_length", hp["chunk_length"])
    u32(fe + "n_samples", hp["n_samples"])
    u32(fe + "nb_max_frames", hp["nb_max_frames"])

    s("tokenizer.ggml.model", "gpt2")
    s("tokenizer.ggml.pre", "gpt2")
    for key in ("bos_token_id", "eos_token_id", "padding_token_id"):
        u32("tokenizer.ggml." + key, hp["eot"])
    b("tokenizer.ggml.add_bos_token", False)
    # The bulky tokenizer arrays last, as transcribe.cpp's writer orders them.
    arr("tokenizer.ggml.tokens", tok["tokens"], VT.STRING)
    arr("tokenizer.ggml.token_type", tok["types"], VT.INT32)
    arr("tokenizer.ggml.merges", tok["merges"], VT.STRING)

    n = hp["n_fft"]
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)).astype(np.float32)  # periodic Hann
    tensors = [("frontend.mel_filterbank", fb), ("frontend.window", window)] + plan
    for name, a in tensors:
        qt = target_type(name, a.shape[-1], outtype)
        w.add_tensor(name, encode(a, qt), raw_dtype=None if qt in (QT.F32, QT.F16) else qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---------------------------------------------------------------------------
# Writing whisper.cpp's legacy .bin (spec 2.11)
# ---------------------------------------------------------------------------

BIN_NAMES = {"enc.conv.0.weight": "encoder.conv1.weight", "enc.conv.0.bias": "encoder.conv1.bias",
             "enc.conv.1.weight": "encoder.conv2.weight", "enc.conv.1.bias": "encoder.conv2.bias",
             "enc.pos_emb.weight": "encoder.positional_embedding",
             "enc.final_norm.weight": "encoder.ln_post.weight",
             "enc.final_norm.bias": "encoder.ln_post.bias",
             "dec.token_embd.weight": "decoder.token_embedding.weight",
             "dec.pos_emb.weight": "decoder.positional_embedding",
             "dec.final_norm.weight": "decoder.ln.weight", "dec.final_norm.bias": "decoder.ln.bias"}
BIN_BLOCK = {"norm_attn": "attn_ln", "attn.q": "attn.query", "attn.k": "attn.key",
             "attn.v": "attn.value", "attn.out": "attn.out", "norm_ffn": "mlp_ln",
             "ffn.fc1": "mlp.0", "ffn.fc2": "mlp.2", "norm_self": "attn_ln",
             "self_attn.q": "attn.query", "self_attn.k": "attn.key", "self_attn.v": "attn.value",
             "self_attn.out": "attn.out", "norm_cross": "cross_attn_ln",
             "cross_attn.q": "cross_attn.query", "cross_attn.k": "cross_attn.key",
             "cross_attn.v": "cross_attn.value", "cross_attn.out": "cross_attn.out"}


def bin_name(name: str) -> str:
    """OpenAI's names, as whisper.cpp's convert-pt-to-ggml.py writes them."""
    if name in BIN_NAMES:
        return BIN_NAMES[name]
    part, rest = name.split(".blocks.")
    i, inner = rest.split(".", 1)
    stem, leaf = inner.rsplit(".", 1)
    side = "encoder" if part == "enc" else "decoder"
    return f"{side}.blocks.{i}.{BIN_BLOCK[stem]}.{leaf}"


def byte_decoder() -> dict[str, int]:
    """GPT-2's byte-to-unicode table, inverted."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for byte in range(256):
        if byte not in bs:
            bs.append(byte)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def write_bin(out: Path, hp: dict, tok: dict, plan, fb: np.ndarray, outtype: str) -> None:
    if hp["vocab_size"] not in (51864, 51865, 51866):
        raise ConvertError(f"a .bin needs a standard vocabulary (51864-51866), not {hp['vocab_size']}")
    if outtype not in ("f32", "f16"):
        raise ConvertError(".bin files are written as f32 or f16")
    eot = hp["eot"]
    dec = byte_decoder()
    ftype = 1 if outtype == "f16" else 0
    with open(out, "wb") as f:
        f.write(struct.pack("<I", 0x67676D6C))
        f.write(struct.pack("<11i", hp["vocab_size"], hp["max_source_positions"], hp["d_model"],
                            hp["encoder_attention_heads"], hp["encoder_layers"],
                            hp["max_target_positions"], hp["d_model"], hp["decoder_attention_heads"],
                            hp["decoder_layers"], hp["num_mel_bins"], ftype))
        f.write(struct.pack("<ii", fb.shape[0], fb.shape[1]))
        f.write(fb.astype("<f4").tobytes())
        # Base pieces only (ids below eot), as raw bytes: tiktoken style.
        f.write(struct.pack("<i", eot))
        for piece in tok["tokens"][:eot]:
            raw = bytes(dec[c] if c in dec else c.encode("utf-8")[0] for c in piece)
            f.write(struct.pack("<I", len(raw)) + raw)
        for name, a in plan:
            a = np.asarray(a, dtype=np.float32)
            if name.startswith("enc.conv.") and name.endswith(".bias"):
                a = a.reshape(-1, 1)      # whisper.cpp stores conv biases as [D, 1]
            # whisper.cpp keeps 1-d tensors, conv biases and both position tables f32
            f16 = ftype == 1 and a.ndim >= 2 and not name.endswith(".bias") and "pos_emb" not in name
            data = a.astype("<f2" if f16 else "<f4")
            nm = bin_name(name).encode()
            dims = list(reversed(a.shape))
            f.write(struct.pack("<iii", a.ndim, len(nm), 1 if f16 else 0))
            f.write(struct.pack(f"<{a.ndim}i", *dims))
            f.write(nm)
            f.write(data.tobytes())


# ---------------------------------------------------------------------------

def convert(model_dir: Path, out: Path, outtype: str = "auto", meta: dict | None = None,
            ggml_bin: bool = False) -> dict:
    """Convert; returns the hyperparameters (used by dump_whisper.py)."""
    if outtype not in OUTTYPES:
        raise ConvertError(f"--outtype must be one of {OUTTYPES}")
    model_dir = Path(model_dir)
    cfg = read_json(model_dir / "config.json")
    gen = read_json(model_dir / "generation_config.json")
    pre = read_json(model_dir / "preprocessor_config.json", required=False)
    sd, dtypes = load_state_dict(model_dir)
    tok = load_tokenizer(model_dir, int(cfg["vocab_size"]))
    hp = read_hparams(cfg, gen, pre, tok)
    plan = tensor_plan(hp, sd)
    fb = mel_filterbank(pre, hp)
    outtype = resolve_outtype(outtype, dtypes)
    if ggml_bin:
        write_bin(Path(out), hp, tok, plan, fb, outtype)
    else:
        write_gguf(Path(out), hp, tok, plan, fb, outtype, meta or {})
    hp["outtype"] = outtype
    return hp


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir", type=Path, help="transformers checkpoint directory")
    p.add_argument("out", type=Path, help="output .gguf (or .bin with --ggml-bin)")
    p.add_argument("--outtype", choices=OUTTYPES, default="auto",
                   help="auto keeps the checkpoint's dtype (spec 2.9)")
    p.add_argument("--ggml-bin", action="store_true", help="write whisper.cpp's legacy ggml .bin")
    p.add_argument("--variant", help="stt.variant (e.g. whisper-tiny)")
    p.add_argument("--name", help="general.name")
    a = p.parse_args(argv)
    try:
        convert(a.model_dir, a.out, a.outtype, {"variant": a.variant, "name": a.name}, a.ggml_bin)
    except ConvertError as e:
        print(f"convert_whisper: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
