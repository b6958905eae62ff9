#!/usr/bin/env python3
"""Convert a transformers Parakeet checkpoint (ParakeetForCTC / ParakeetForTDT /
ParakeetForRNNT) or Nemotron 3.5 ASR Streaming checkpoint (Nemotron3_5AsrForRNNT:
cache-aware streaming encoder, language prompt MLP) to a GGUF in transcribe.cpp's
published layout.

The layout is the one written down in shared/spec/gguf-conformer-families.md
sections 0, 1 and 5: architecture "parakeet", every key with its exact GGUF type
(UINT32 is not INT32), tensor names, ne order, and the per-bucket dtype policy of
the published F32 / F16 / Q8_0 files.

Input: a directory holding config.json, model.safetensors (or a sharded
model.safetensors.index.json), preprocessor_config.json (optional; the spec's
defaults are used when absent) and a tokenizer: tokenizer.model (SentencePiece,
preferred: it carries the scores and piece types) or tokenizer.json. For Nemotron
3.5 the processor_config.json also gives the prompt dictionary and the supported
lookaheads (spec sections 1.2 and 3).

Needs only numpy, safetensors and gguf (gguf-py). No torch.

    python scripts/convert_parakeet.py MODEL_DIR OUT.gguf --outtype f32
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_tensors import encode  # noqa: E402
from gguf import GGUFValueType as VT

# llama.cpp token types, as transcribe.cpp writes them.
TOK_NORMAL, TOK_UNKNOWN, TOK_CONTROL, TOK_USER, TOK_UNUSED, TOK_BYTE = 1, 2, 3, 4, 5, 6

OUTTYPES = ("f32", "f16", "bf16", "q8_0")
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}  # gguf LlamaFileType ids

# Spec 1.4: the mel frontend every published Parakeet uses.
FRONTEND_DEFAULTS = dict(sampling_rate=16000, n_fft=512, win_length=400, hop_length=160,
                         preemphasis=0.97)


class ConvertError(Exception):
    pass


# ---------------------------------------------------------------------------
# Reading the checkpoint
# ---------------------------------------------------------------------------

_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
              "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def _read_safetensors_raw(path: Path) -> dict[str, np.ndarray]:
    """Minimal safetensors reader for what safetensors.numpy cannot hold (BF16)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = np.asarray(data[lo:hi])
        if info["dtype"] == "BF16":
            arr = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif info["dtype"] in _ST_DTYPES:
            arr = raw.view(_ST_DTYPES[info["dtype"]])
        else:
            raise ConvertError(f"{path.name}: tensor {name} has unsupported dtype {info['dtype']}")
        out[name] = arr.reshape(info["shape"])
    return out


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    try:
        from safetensors.numpy import load_file
        return load_file(str(path))
    except (TypeError, ValueError):  # numpy has no bfloat16
        return _read_safetensors_raw(path)


def load_state_dict(model_dir: Path) -> dict[str, np.ndarray]:
    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        files = [model_dir / s for s in shards]
    else:
        files = [model_dir / "model.safetensors"]
    sd: dict[str, np.ndarray] = {}
    for f in files:
        if not f.exists():
            raise ConvertError(f"missing weights file {f}")
        sd.update(_read_safetensors(f))
    # Every float tensor is handled as f32; the published reference dtype is F32.
    return {k: (v.astype(np.float32) if v.dtype.kind == "f" else v) for k, v in sd.items()}


def load_frontend_config(model_dir: Path) -> dict:
    cfg = dict(FRONTEND_DEFAULTS)
    pre = model_dir / "preprocessor_config.json"
    proc = model_dir / "processor_config.json"
    src = None
    if pre.exists():
        src = json.loads(pre.read_text())
    elif proc.exists():
        src = json.loads(proc.read_text()).get("feature_extractor")
    if src:
        for k in ("sampling_rate", "n_fft", "win_length", "hop_length", "preemphasis", "feature_size"):
            if k in src and src[k] is not None:
                cfg[k] = src[k]
    return cfg


# ---------------------------------------------------------------------------
# Tokenizer: SentencePiece proto (tokenizer.model) or tokenizer.json
# ---------------------------------------------------------------------------

def _pb_fields(buf: bytes):
    """Yield (field number, wire type, value) of one protobuf message."""
    i = 0

    def varint():
        nonlocal i
        shift = val = 0
        while True:
            b = buf[i]
            i += 1
            val |= (b & 0x7F) << shift
            if b < 0x80:
                return val
            shift += 7

    while i < len(buf):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            yield field, wire, varint()
        elif wire == 1:
            yield field, wire, buf[i:i + 8]
            i += 8
        elif wire == 2:
            n = varint()
            yield field, wire, buf[i:i + n]
            i += n
        elif wire == 5:
            yield field, wire, buf[i:i + 4]
            i += 4
        else:
            raise ConvertError(f"tokenizer.model: unsupported protobuf wire type {wire}")


def read_spm_model(path: Path) -> dict:
    """Pieces, scores and types of a SentencePiece ModelProto, plus the unk/bos/eos
    ids as SentencePieceProcessor reports them (-1 when the piece is absent or
    has the wrong type)."""
    buf = path.read_bytes()
    pieces, scores, types = [], [], []
    spec_pieces = {"unk": "<unk>", "bos": "<s>", "eos": "</s>"}
    for field, wire, val in _pb_fields(buf):
        if field == 1 and wire == 2:            # repeated SentencePiece pieces
            piece, score, ptype = "", 0.0, 1
            for f2, w2, v2 in _pb_fields(val):
                if f2 == 1 and w2 == 2:
                    piece = v2.decode("utf-8")
                elif f2 == 2 and w2 == 5:
                    score = struct.unpack("<f", v2)[0]
                elif f2 == 3 and w2 == 0:
                    ptype = v2
            pieces.append(piece)
            scores.append(score)
            types.append(ptype)
        elif field == 2 and wire == 2:          # TrainerSpec
            for f2, w2, v2 in _pb_fields(val):
                if w2 == 2 and f2 in (45, 46, 47):
                    spec_pieces[{45: "unk", 46: "bos", 47: "eos"}[f2]] = v2.decode("utf-8")
    if not pieces:
        raise ConvertError(f"{path}: no pieces in SentencePiece model")

    index = {p: i for i, p in enumerate(pieces)}

    def special_id(kind, want_type):
        i = index.get(spec_pieces[kind], -1)
        return i if i >= 0 and types[i] == want_type else -1

    # transcribe.cpp maps SentencePiece types to llama.cpp ones through
    # is_unknown / is_control / is_unused / is_byte; everything else (normal and
    # user-defined pieces) is NORMAL.
    tmap = {2: TOK_UNKNOWN, 3: TOK_CONTROL, 5: TOK_UNUSED, 6: TOK_BYTE}
    return {
        "tokens": pieces,
        "scores": [float(s) for s in scores],
        "types": [tmap.get(t, TOK_CONTROL if _LANG_TAG.match(p) else TOK_NORMAL)
                  for p, t in zip(pieces, types)],
        "unk_id": special_id("unk", 2),
        "bos_id": special_id("bos", 3),
        "eos_id": special_id("eos", 3),
    }


_BYTE_PIECE = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
# Nemotron 3.5's <ll-RR> language tags: CONTROL whatever SentencePiece calls them.
_LANG_TAG = re.compile(r"^<[a-z]{2,3}-[A-Za-z]{2,4}>$")


def read_tokenizer_json(path: Path) -> dict:
    """Pieces from a Hugging Face tokenizer.json (BPE or Unigram model plus the
    added tokens). A BPE tokenizer.json has no scores: they are written as 0.0."""
    tj = json.loads(path.read_text())
    model = tj.get("model", {})
    vocab = model.get("vocab")
    by_id: dict[int, tuple[str, float]] = {}
    if isinstance(vocab, dict):                       # BPE / WordPiece
        for piece, i in vocab.items():
            by_id[int(i)] = (piece, 0.0)
    elif isinstance(vocab, list):                     # Unigram: [[piece, score], ...]
        for i, (piece, score) in enumerate(vocab):
            by_id[i] = (piece, float(score))
    else:
        raise ConvertError(f"{path}: unsupported tokenizer model {model.get('type')!r}")
    special = {}
    for t in tj.get("added_tokens", []):
        by_id.setdefault(int(t["id"]), (t["content"], 0.0))
        special[int(t["id"])] = bool(t.get("special", False))
    unk_piece = model.get("unk_token")
    if unk_piece is None and isinstance(model.get("unk_id"), int):
        unk_piece = by_id.get(model["unk_id"], (None,))[0]
    n = max(by_id) + 1
    if sorted(by_id) != list(range(n)):
        raise ConvertError(f"{path}: token ids are not contiguous")
    tokens, scores, types = [], [], []
    for i in range(n):
        piece, score = by_id[i]
        if piece == unk_piece:
            t = TOK_UNKNOWN
        elif special.get(i) or _LANG_TAG.match(piece):
            t = TOK_CONTROL
        elif _BYTE_PIECE.match(piece):
            t = TOK_BYTE
        else:
            t = TOK_NORMAL
        tokens.append(piece)
        scores.append(score)
        types.append(t)

    def find(piece, want):
        return next((i for i, (p, t) in enumerate(zip(tokens, types)) if p == piece and t == want), -1)

    return {"tokens": tokens, "scores": scores, "types": types,
            "unk_id": find(unk_piece, TOK_UNKNOWN), "bos_id": find("<s>", TOK_CONTROL),
            "eos_id": find("</s>", TOK_CONTROL)}


def load_vocab(model_dir: Path, n_spm: int) -> dict:
    """The SentencePiece vocabulary (n_spm pieces) plus the appended <blank>
    (spec 0.3): blank id = n_spm, score 0.0, CONTROL."""
    spm = [p for p in (model_dir / "tokenizer.model",) if p.exists()] or sorted(model_dir.glob("*.model"))
    if spm:
        tok = read_spm_model(spm[0])
    elif (model_dir / "tokenizer.json").exists():
        tok = read_tokenizer_json(model_dir / "tokenizer.json")
    else:
        raise ConvertError(f"{model_dir}: no tokenizer.model or tokenizer.json")
    if len(tok["tokens"]) < n_spm:
        raise ConvertError(f"tokenizer has {len(tok['tokens'])} pieces, the model needs {n_spm}")
    # Tokens past the SentencePiece vocabulary (transformers' added <pad>/<blank>)
    # are dropped: the blank slot is rewritten below.
    for k in ("tokens", "scores", "types"):
        tok[k] = tok[k][:n_spm]
    for k in ("unk_id", "bos_id", "eos_id"):
        if tok[k] >= n_spm:
            tok[k] = -1
    tok["tokens"].append("<blank>")
    tok["scores"].append(0.0)
    tok["types"].append(TOK_CONTROL)
    tok["blank_id"] = n_spm
    return tok


# ---------------------------------------------------------------------------
# Hyperparameters
# ---------------------------------------------------------------------------

HEAD_OF_MODEL_TYPE = {"parakeet_ctc": "ctc", "parakeet_tdt": "tdt", "parakeet_rnnt": "rnnt",
                      "nemotron3_5_asr": "rnnt", "nemotron_asr_streaming": "rnnt"}
# Cache-aware streaming encoders (Nemotron 3.5 ASR, nemotron-speech-streaming-en):
# causal convs, chunked_limited attention, a LayerNorm in the conv module (spec 3).
STREAMING_MODEL_TYPES = {"nemotron3_5_asr", "nemotron_asr_streaming"}


def read_streaming(cfg: dict, proc: dict, enc: dict, k: int) -> dict:
    """Spec 1.2 / 3 for a cache-aware encoder. transformers keeps the left
    context as sliding_window = L + 1 in the encoder config, the default
    lookahead R in the processor (else the encoder config) and the supported
    lookaheads in the processor; pair 0 of the choices is the default, the rest
    by R descending (as transcribe.cpp orders them). The
    three streaming constants are NeMo's for causal dw_striding x8: the mel
    cache before each later chunk is factor + 1 = 9 frames, which makes
    1 + 8 // 8 = 2 extra encoder frames to drop, and the first chunk's pre-encode
    needs 1 frame (transformers carries conv caches instead and has no keys)."""
    left = int(enc.get("sliding_window", 71)) - 1
    right = proc.get("default_num_lookahead_tokens")
    right = int(right if right is not None else enc.get("default_num_lookahead_tokens", 13))
    rights = [int(r) for r in proc.get("supported_num_lookahead_tokens") or [right]]
    if left < 0 or right < 0 or min(rights) < 0 or right not in rights:
        raise ConvertError(f"attention context L {left}, R {right} of the supported {rights}")
    choices = [(left, right)] + [(left, r) for r in sorted(set(rights) - {right}, reverse=True)]
    return dict(att_left=left, att_right=right, att_choices=choices, conv_left=k - 1, conv_right=0,
                pre_encode_cache=9, drop_extra=2, sampling_first=1)


def read_prompt(cfg: dict, proc: dict, sd: dict, d: int) -> dict:
    """Nemotron 3.5's prompt MLP (spec 1.2): P slots, the hidden width from the
    weights, the dictionary from the processor (ordered by slot: without an auto
    slot the loader takes the first entry), auto_id its "auto" slot (else the
    config's default prompt)."""
    P = int(cfg.get("num_prompts", 128))
    w0 = sd.get("prompt_projector.linear_1.weight")
    if w0 is None or w0.ndim != 2 or w0.shape[1] != d + P:
        raise ConvertError(f"prompt_projector.linear_1.weight is {None if w0 is None else w0.shape}, "
                           f"not [hidden, {d} + {P}]")
    table = proc.get("prompt_dictionary")
    if not table:
        raise ConvertError("processor_config.json has no prompt_dictionary (locale -> prompt slot)")
    entries = sorted(((str(k), int(v)) for k, v in table.items()), key=lambda e: e[1])
    if any(not 0 <= v < P for _, v in entries):
        raise ConvertError(f"a prompt_dictionary slot is outside 0..{P - 1}")
    auto = int(table["auto"]) if "auto" in table else cfg.get("default_prompt_id")
    if int(proc.get("num_prompts", P)) != P:
        raise ConvertError(f"the processor has {proc['num_prompts']} prompts, the model {P}")
    return dict(num_prompts=P, prompt_hidden=int(w0.shape[0]), prompt_locales=[e[0] for e in entries],
                prompt_indices=[e[1] for e in entries], prompt_auto=None if auto is None else int(auto))


def read_hparams(cfg: dict, fe: dict, sd: dict, proc: dict | None = None) -> dict:
    head = HEAD_OF_MODEL_TYPE.get(cfg.get("model_type"))
    if head is None:
        raise ConvertError(f"config.json model_type {cfg.get('model_type')!r} is not a Parakeet "
                           "CTC/TDT/RNN-T or Nemotron 3.5 ASR")
    streaming = cfg.get("model_type") in STREAMING_MODEL_TYPES
    enc = cfg["encoder_config"]
    d, n_heads = int(enc["hidden_size"]), int(enc["num_attention_heads"])
    if d % n_heads:
        raise ConvertError(f"hidden_size {d} is not a multiple of num_attention_heads {n_heads}")
    if enc.get("head_dim", d // n_heads) != d // n_heads:
        raise ConvertError("head_dim must equal hidden_size / num_attention_heads")
    if int(enc.get("subsampling_factor", 8)) != 8:
        raise ConvertError("only subsampling_factor 8 exists in the published layout")
    if int(enc.get("subsampling_conv_kernel_size", 3)) != 3 or int(enc.get("subsampling_conv_stride", 2)) != 2:
        raise ConvertError("the published layout has 3x3 stride-2 subsampling convs")
    if enc.get("hidden_act", "silu") != "silu":
        raise ConvertError("the published layout has SiLU in the FFN and conv module")
    n_mels = int(enc["num_mel_bins"])
    if n_mels % 8:
        raise ConvertError(f"num_mel_bins {n_mels} must be a multiple of 8")
    if int(fe.get("feature_size", n_mels)) != n_mels:
        raise ConvertError(f"feature extractor has {fe['feature_size']} mels, the encoder {n_mels}")
    # transformers splits NeMo's use_bias in two; the published layout has one flag.
    att_bias, conv_bias = bool(enc.get("attention_bias", True)), bool(enc.get("convolution_bias", True))
    if att_bias != conv_bias:
        raise ConvertError("attention_bias and convolution_bias differ; the GGUF has one use_bias flag")
    k = int(enc.get("conv_kernel_size", 9))
    if k % 2 == 0 and not streaming:
        raise ConvertError("conv_kernel_size must be odd (symmetric padding)")

    hp = dict(
        head_kind=head, n_layers=int(enc["num_hidden_layers"]), d_model=d, n_heads=n_heads,
        d_ff=int(enc["intermediate_size"]), conv_kernel=k, subsampling_factor=8,
        subsampling_channels=int(enc["subsampling_conv_channels"]),
        pos_emb_max_len=int(enc.get("max_position_embeddings", 5000)), use_bias=att_bias,
        xscaling=bool(enc.get("scale_input", True)), n_mels=n_mels,
        sample_rate=int(fe["sampling_rate"]), n_fft=int(fe["n_fft"]),
        win_length=int(fe["win_length"]), hop_length=int(fe["hop_length"]),
        pre_emphasis=float(fe["preemphasis"] if fe.get("preemphasis") is not None else 0.0),
        vocab=int(cfg["vocab_size"]),   # transformers counts the blank: SPM vocab + 1
        streaming=streaming, num_prompts=0,
    )
    if streaming:
        hp.update(read_streaming(cfg, proc or {}, enc, k))
        if "prompt_projector.linear_1.weight" in sd:
            hp.update(read_prompt(cfg, proc or {}, sd, d))
    if head != "ctc":
        H = int(cfg["decoder_hidden_size"])
        n_lstm = 0
        while f"decoder.lstm.weight_ih_l{n_lstm}" in sd:
            n_lstm += 1
        if n_lstm != int(cfg.get("num_decoder_layers", n_lstm)) or n_lstm == 0:
            raise ConvertError("LSTM layer count in the weights disagrees with num_decoder_layers")
        if int(cfg.get("blank_token_id", hp["vocab"] - 1)) != hp["vocab"] - 1:
            raise ConvertError("blank_token_id must be the last class (vocab_size - 1)")
        durations = [int(x) for x in cfg.get("durations", [])] if head == "tdt" else []
        if head == "tdt" and (not durations or min(durations) < 0):
            raise ConvertError(f"TDT durations {durations} must be a non-empty list of non-negative ints")
        act = str(cfg.get("hidden_act", "relu")).lower()
        if act not in ("relu", "sigmoid", "tanh"):
            raise ConvertError(f"joint activation {act!r} is not one of relu/sigmoid/tanh")
        max_symbols = int(cfg.get("max_symbols_per_step", 10))
        if head == "rnnt" and max_symbols != 10:
            # Spec 1.2: the RNN-T cap is fixed at 10 and has no key; a file could
            # not tell a decoder about another value.
            raise ConvertError(f"RNN-T max_symbols_per_step {max_symbols}: the published layout fixes it at 10")
        hp.update(pred_hidden=H, pred_layers=n_lstm, pred_vocab=hp["vocab"], joint_hidden=H,
                  num_extra_outputs=len(durations), joint_activation=act, durations=durations,
                  max_symbols=max_symbols)
    return hp


# ---------------------------------------------------------------------------
# Tensor catalog (spec 1.3): (gguf name, transformers name or callable)
# ---------------------------------------------------------------------------

# (GGUF conv index, transformers module) of the dw_striding stem: Parakeet keeps
# NeMo's Sequential indices; the causal streaming stem names its modules.
PRE_ENCODE = [(i, f"layers.{i}") for i in (0, 2, 3, 5, 6)]
PRE_ENCODE_STREAMING = [(0, "conv_in"), (2, "layers.0.depthwise_conv"), (3, "layers.0.pointwise_conv"),
                        (5, "layers.1.depthwise_conv"), (6, "layers.1.pointwise_conv")]

BLOCK_TENSORS = [
    ("norm_ff1.weight", "norm_feed_forward1.weight"),
    ("norm_ff1.bias", "norm_feed_forward1.bias"),
    ("ff1.linear1.weight", "feed_forward1.linear1.weight"),
    ("ff1.linear2.weight", "feed_forward1.linear2.weight"),
    ("norm_attn.weight", "norm_self_att.weight"),
    ("norm_attn.bias", "norm_self_att.bias"),
    ("attn.linear_q.weight", "self_attn.q_proj.weight"),
    ("attn.linear_k.weight", "self_attn.k_proj.weight"),
    ("attn.linear_v.weight", "self_attn.v_proj.weight"),
    ("attn.linear_out.weight", "self_attn.o_proj.weight"),
    ("attn.linear_pos.weight", "self_attn.relative_k_proj.weight"),
    ("attn.pos_bias_u", "self_attn.bias_u"),
    ("attn.pos_bias_v", "self_attn.bias_v"),
    ("norm_conv.weight", "norm_conv.weight"),
    ("norm_conv.bias", "norm_conv.bias"),
    ("conv.pointwise1.weight", "conv.pointwise_conv1.weight"),
    ("conv.depthwise.weight", "conv.depthwise_conv.weight"),
    ("conv.pointwise2.weight", "conv.pointwise_conv2.weight"),
    ("conv.bn.weight", "conv.norm.weight"),
    ("conv.bn.bias", "conv.norm.bias"),
    ("conv.bn.running_mean", "conv.norm.running_mean"),
    ("conv.bn.running_var", "conv.norm.running_var"),
    ("norm_ff2.weight", "norm_feed_forward2.weight"),
    ("norm_ff2.bias", "norm_feed_forward2.bias"),
    ("ff2.linear1.weight", "feed_forward2.linear1.weight"),
    ("ff2.linear2.weight", "feed_forward2.linear2.weight"),
    ("norm_out.weight", "norm_out.weight"),
    ("norm_out.bias", "norm_out.bias"),
]

BLOCK_BIASES = [  # present only when use_bias
    ("ff1.linear1.bias", "feed_forward1.linear1.bias"),
    ("ff1.linear2.bias", "feed_forward1.linear2.bias"),
    ("attn.linear_q.bias", "self_attn.q_proj.bias"),
    ("attn.linear_k.bias", "self_attn.k_proj.bias"),
    ("attn.linear_v.bias", "self_attn.v_proj.bias"),
    ("attn.linear_out.bias", "self_attn.o_proj.bias"),
    ("conv.pointwise1.bias", "conv.pointwise_conv1.bias"),
    ("conv.depthwise.bias", "conv.depthwise_conv.bias"),
    ("conv.pointwise2.bias", "conv.pointwise_conv2.bias"),
    ("ff2.linear1.bias", "feed_forward2.linear1.bias"),
    ("ff2.linear2.bias", "feed_forward2.linear2.bias"),
]


def tensor_plan(hp: dict, sd: dict) -> list[tuple[str, np.ndarray]]:
    """Every GGUF tensor in writing order, as an f32 array in PyTorch order
    (gguf-py reverses the shape, so PT (A, B, C) is stored as ne [C, B, A])."""
    used: set[str] = set()

    def get(name):
        if name not in sd:
            raise ConvertError(f"checkpoint lacks tensor {name}")
        used.add(name)
        return sd[name]

    plan = []
    for i, src in PRE_ENCODE_STREAMING if hp["streaming"] else PRE_ENCODE:
        plan.append((f"enc.pre_encode.conv.{i}.weight", get(f"encoder.subsampling.{src}.weight")))
        plan.append((f"enc.pre_encode.conv.{i}.bias", get(f"encoder.subsampling.{src}.bias")))
    plan.append(("enc.pre_encode.out.weight", get("encoder.subsampling.linear.weight")))
    plan.append(("enc.pre_encode.out.bias", get("encoder.subsampling.linear.bias")))

    for b in range(hp["n_layers"]):
        src = f"encoder.layers.{b}."
        for dst, s in BLOCK_TENSORS + (BLOCK_BIASES if hp["use_bias"] else []):
            if hp["streaming"] and "running_" in dst:
                continue                  # a LayerNorm conv module has no statistics
            plan.append((f"enc.blocks.{b}.{dst}", get(src + s)))
        used.add(src + "conv.norm.num_batches_tracked")

    if hp["head_kind"] == "ctc":
        plan.append(("head.ctc.weight", get("ctc_head.weight")))
        plan.append(("head.ctc.bias", get("ctc_head.bias")))
    else:
        emb = get("decoder.embedding.weight")
        if np.any(emb[-1] != 0):
            # The spec's predictor starts from a zero vector (NeMo's padding_idx
            # row); transformers embeds the start token. They agree only when the
            # blank row is zero, as it is in every checkpoint converted from NeMo.
            print("convert_parakeet: warning: the embedding's blank row is not zero; a spec decoder "
                  "(zero start vector) will differ from transformers' generate()", file=sys.stderr)
        plan.append(("pred.embed.weight", emb))
        for l in range(hp["pred_layers"]):
            plan.append((f"pred.lstm.{l}.Wx", get(f"decoder.lstm.weight_ih_l{l}")))
            plan.append((f"pred.lstm.{l}.Wh", get(f"decoder.lstm.weight_hh_l{l}")))
            # Spec 1.3: one bias per layer, bias_ih + bias_hh summed at conversion.
            plan.append((f"pred.lstm.{l}.bias",
                         get(f"decoder.lstm.bias_ih_l{l}") + get(f"decoder.lstm.bias_hh_l{l}")))
        plan.append(("joint.enc.weight", get("encoder_projector.weight")))
        plan.append(("joint.enc.bias", get("encoder_projector.bias")))
        plan.append(("joint.pred.weight", get("decoder.decoder_projector.weight")))
        plan.append(("joint.pred.bias", get("decoder.decoder_projector.bias")))
        plan.append(("joint.out.weight", get("joint.head.weight")))
        plan.append(("joint.out.bias", get("joint.head.bias")))
    if hp["num_prompts"]:
        for dst, src in (("0", "linear_1"), ("2", "linear_2")):
            plan.append((f"prompt.mlp.{dst}.weight", get(f"prompt_projector.{src}.weight")))
            plan.append((f"prompt.mlp.{dst}.bias", get(f"prompt_projector.{src}.bias")))

    left = sorted(k for k in sd if k not in used and not k.endswith("num_batches_tracked"))
    if left:
        raise ConvertError(f"checkpoint tensors with no place in the GGUF: {left[:8]}")
    check_shapes(hp, plan)
    return plan


def check_shapes(hp: dict, plan) -> None:
    """The ne of every tensor, as spec 1.3 states them."""
    d, dff, C, k, H = hp["d_model"], hp["d_ff"], hp["subsampling_channels"], hp["conv_kernel"], hp["n_heads"]
    F1 = hp["n_mels"]
    for _ in range(3):   # three stride-2 3x3 convs: padding 1 + 1, the causal stem's 2 + 1
        F1 = F1 // 2 + 1 if hp["streaming"] else (F1 - 1) // 2 + 1
    want = {
        "enc.pre_encode.conv.0.weight": [3, 3, 1, C], "enc.pre_encode.conv.2.weight": [3, 3, 1, C],
        "enc.pre_encode.conv.3.weight": [1, 1, C, C], "enc.pre_encode.conv.5.weight": [3, 3, 1, C],
        "enc.pre_encode.conv.6.weight": [1, 1, C, C], "enc.pre_encode.out.weight": [C * F1, d],
        "enc.pre_encode.out.bias": [d],
    }
    for i in (0, 2, 3, 5, 6):
        want[f"enc.pre_encode.conv.{i}.bias"] = [C]
    blk = {
        "ff1.linear1.weight": [d, dff], "ff1.linear2.weight": [dff, d], "ff2.linear1.weight": [d, dff],
        "ff2.linear2.weight": [dff, d], "attn.pos_bias_u": [d // H, H], "attn.pos_bias_v": [d // H, H],
        "conv.pointwise1.weight": [1, d, 2 * d], "conv.depthwise.weight": [k, 1, d],
        "conv.pointwise2.weight": [1, d, d], "ff1.linear1.bias": [dff], "ff2.linear1.bias": [dff],
        "conv.pointwise1.bias": [2 * d],
    }
    for q in ("q", "k", "v", "out", "pos"):
        blk[f"attn.linear_{q}.weight"] = [d, d]
    if hp["num_prompts"]:
        Ph = hp["prompt_hidden"]
        want.update({"prompt.mlp.0.weight": [d + hp["num_prompts"], Ph], "prompt.mlp.0.bias": [Ph],
                     "prompt.mlp.2.weight": [Ph, d], "prompt.mlp.2.bias": [d]})
    if hp["head_kind"] == "ctc":
        want["head.ctc.weight"] = [1, d, hp["vocab"]]
        want["head.ctc.bias"] = [hp["vocab"]]
    else:
        P, J = hp["pred_hidden"], hp["joint_hidden"]
        vj = hp["pred_vocab"] + hp["num_extra_outputs"]
        want.update({"pred.embed.weight": [P, hp["pred_vocab"]], "joint.enc.weight": [d, J],
                     "joint.enc.bias": [J], "joint.pred.weight": [P, J], "joint.pred.bias": [J],
                     "joint.out.weight": [J, vj], "joint.out.bias": [vj]})
        for l in range(hp["pred_layers"]):
            want.update({f"pred.lstm.{l}.Wx": [P, 4 * P], f"pred.lstm.{l}.Wh": [P, 4 * P],
                         f"pred.lstm.{l}.bias": [4 * P]})
    for name, arr in plan:
        ne = list(reversed(arr.shape))
        m = re.match(r"enc\.blocks\.\d+\.(.*)$", name)
        exp = blk.get(m.group(1), [d]) if m else want.get(name)
        if exp is None or ne != exp:
            raise ConvertError(f"{name}: ne {ne}, the published layout has {exp}")


# ---------------------------------------------------------------------------
# Dtype policy (spec 5)
# ---------------------------------------------------------------------------

def bucket_of(name: str) -> str:
    if (name.endswith(".bias") or ".bn." in name or name.endswith(("running_mean", "running_var"))
            or ".norm_" in name or "pos_bias_" in name or name.startswith("frontend.")):
        return "norm"
    if re.search(r"\.conv\.pointwise[12]\.weight$", name):
        return "conv_pw"
    if ".conv." in name and name.endswith(".weight"):
        return "conv"
    return "linear"


def target_type(name: str, ne0: int, outtype: str) -> QT:
    """The GGML type a tensor gets in an `outtype` file. Norm and conv tensors
    stay F32 in every file; pointwise convs are F16 in every non-F32 file (their
    slot takes F32 or F16 only); linear weights take the file's type, with Q8_0
    falling back to F16 where ne[0] is not a multiple of 32."""
    if outtype == "f32":
        return QT.F32
    b = bucket_of(name)
    if b in ("norm", "conv"):
        return QT.F32
    if b == "conv_pw":
        return QT.F16
    if outtype == "f16":
        return QT.F16
    if outtype == "bf16":
        return QT.BF16
    return QT.Q8_0 if ne0 % 32 == 0 else QT.F16



# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

def size_label(n_params: int) -> str:
    for div, suf in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n_params >= div:
            v = n_params / div
            return f"{v:.1f}{suf}" if v < 10 else f"{v:.0f}{suf}"
    return str(n_params)


def streaming_keys(w, hp: dict) -> None:
    """Spec 1.2: chunked_limited attention, causal depthwise conv, LayerNorm
    conv module, the choices and the pre-encode streaming constants."""
    e = "stt.parakeet.encoder."
    i32 = lambda k, v: w.add_key_value(e + k, int(v), VT.INT32)  # noqa: E731
    i32("att_context_left", hp["att_left"])
    i32("att_context_right", hp["att_right"])
    w.add_key_value(e + "att_context_style", "chunked_limited", VT.STRING)
    w.add_key_value(e + "att_context_size_choices", [x for c in hp["att_choices"] for x in c], VT.ARRAY,
                    sub_type=VT.INT32)
    i32("conv_context_left", hp["conv_left"])
    i32("conv_context_right", hp["conv_right"])
    w.add_key_value(e + "conv_norm_type", "layer_norm", VT.STRING)
    i32("streaming.pre_encode_cache_size", hp["pre_encode_cache"])
    i32("streaming.drop_extra_pre_encoded", hp["drop_extra"])
    i32("streaming.sampling_frames_first", hp["sampling_first"])


def prompt_keys(w, hp: dict) -> None:
    """Spec 1.2: Nemotron 3.5's prompt MLP and its dictionary."""
    p = "stt.parakeet.prompt."
    w.add_key_value(p + "num_prompts", hp["num_prompts"], VT.UINT32)
    w.add_key_value(p + "hidden", hp["prompt_hidden"], VT.UINT32)
    w.add_key_value(p + "field", "target_lang", VT.STRING)
    w.add_key_value(p + "activation", "relu", VT.STRING)   # the MLP's only activation in transformers
    w.add_key_value(p + "dictionary.locales", hp["prompt_locales"], VT.ARRAY, sub_type=VT.STRING)
    w.add_key_value(p + "dictionary.indices", hp["prompt_indices"], VT.ARRAY, sub_type=VT.INT32)
    if hp["prompt_auto"] is not None:
        w.add_key_value(p + "auto_id", hp["prompt_auto"], VT.UINT32)


def write_gguf(out: Path, hp: dict, tok: dict, plan, outtype: str, meta: dict) -> None:
    tmp = out.with_name(out.name + ".part")   # never leave a half-written OUT behind
    w = gguf.GGUFWriter(str(tmp), "parakeet")
    u32 = lambda k, v: w.add_key_value(k, int(v), VT.UINT32)  # noqa: E731
    i32 = lambda k, v: w.add_key_value(k, int(v), VT.INT32)   # noqa: E731
    f32 = lambda k, v: w.add_key_value(k, float(v), VT.FLOAT32)  # noqa: E731
    s = lambda k, v: w.add_key_value(k, str(v), VT.STRING)    # noqa: E731
    b = lambda k, v: w.add_key_value(k, bool(v), VT.BOOL)     # noqa: E731

    def arr(k, v, sub):
        w.add_key_value(k, list(v), VT.ARRAY, sub_type=sub)

    head = hp["head_kind"]
    n_params = sum(int(a.size) for _, a in plan)
    # general.* identity (display only, spec 0.2)
    s("general.name", meta.get("name") or f"Parakeet {head.upper()}")
    s("general.basename", f"parakeet-{head}")
    s("general.size_label", meta.get("size_label") or size_label(n_params))
    if meta.get("version"):
        s("general.version", meta["version"])
    if meta.get("license"):
        s("general.license", meta["license"])
    if meta.get("repo_url"):
        s("general.repo_url", meta["repo_url"])
    u32("general.file_type", FILE_TYPE[outtype])
    # A prompt model's default languages: its dictionary's locales (ll-RR), not the aliases.
    langs = meta.get("languages") or [x for x in hp.get("prompt_locales", []) if "-" in x] or ["en"]
    arr("general.languages", langs, VT.STRING)

    s("stt.variant", meta.get("variant") or f"{head}-custom")
    b("stt.capability.streaming", hp["streaming"])   # regular full attention: offline only
    if hp["num_prompts"]:
        b("stt.capability.lang_detect", True)        # the auto slot emits a language tag
    s("stt.parakeet.head_kind", head)

    s("tokenizer.ggml.model", "bpe")
    for key, name in (("unk_id", "unknown_token_id"), ("bos_id", "bos_token_id"), ("eos_id", "eos_token_id")):
        if tok[key] >= 0:
            u32(f"tokenizer.ggml.{name}", tok[key])
    u32("tokenizer.ggml.blank_token_id", tok["blank_id"])

    e = "stt.parakeet.encoder."
    for key in ("n_layers", "d_model", "n_heads", "d_ff", "conv_kernel", "subsampling_factor",
                "subsampling_channels", "pos_emb_max_len"):
        u32(e + key, hp[key])
    b(e + "use_bias", hp["use_bias"])
    b(e + "xscaling", hp["xscaling"])
    if hp["streaming"]:
        streaming_keys(w, hp)
    else:
        i32(e + "att_context_left", -1)       # full attention
        i32(e + "att_context_right", -1)
        s(e + "att_context_style", "regular")
        i32(e + "conv_context_left", (hp["conv_kernel"] - 1) // 2)   # symmetric depthwise padding
        i32(e + "conv_context_right", (hp["conv_kernel"] - 1) // 2)
        s(e + "conv_norm_type", "batch_norm")

    if head != "ctc":
        u32("stt.parakeet.predictor.hidden", hp["pred_hidden"])
        u32("stt.parakeet.predictor.n_layers", hp["pred_layers"])
        u32("stt.parakeet.predictor.vocab", hp["pred_vocab"])
        u32("stt.parakeet.joint.hidden", hp["joint_hidden"])
        u32("stt.parakeet.joint.num_extra_outputs", hp["num_extra_outputs"])
        s("stt.parakeet.joint.activation", hp["joint_activation"])
        if head == "tdt":
            arr("stt.parakeet.tdt.durations", hp["durations"], VT.INT32)
            u32("stt.parakeet.tdt.max_symbols", hp["max_symbols"])
    if hp["num_prompts"]:
        prompt_keys(w, hp)

    s("stt.frontend.type", "mel")
    u32("stt.frontend.num_mels", hp["n_mels"])
    u32("stt.frontend.sample_rate", hp["sample_rate"])
    u32("stt.frontend.n_fft", hp["n_fft"])
    u32("stt.frontend.win_length", hp["win_length"])
    u32("stt.frontend.hop_length", hp["hop_length"])
    s("stt.frontend.window", "hann")
    s("stt.frontend.normalize", "none" if hp["streaming"] else "per_feature")  # Nemotron: raw log-mel
    f32("stt.frontend.dither", 1e-5)      # published value; never applied at inference
    f32("stt.frontend.pre_emphasis", hp["pre_emphasis"])
    f32("stt.frontend.f_min", 0.0)
    f32("stt.frontend.f_max", hp["sample_rate"] / 2.0)

    # The bulky tokenizer arrays go last, as transcribe.cpp's writer orders them.
    arr("tokenizer.ggml.tokens", tok["tokens"], VT.STRING)
    arr("tokenizer.ggml.scores", tok["scores"], VT.FLOAT32)
    arr("tokenizer.ggml.token_type", tok["types"], VT.INT32)

    for name, a in plan:
        qt = target_type(name, a.shape[-1], outtype)
        data = encode(a, qt)
        w.add_tensor(name, data, raw_dtype=None if qt in (QT.F32, QT.F16) else qt)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, out)


def convert(model_dir: Path, out: Path, outtype: str = "f32", meta: dict | None = None) -> dict:
    """Convert; returns the hyperparameters it wrote (used by dump_parakeet.py)."""
    if outtype not in OUTTYPES:
        raise ConvertError(f"--outtype must be one of {OUTTYPES}")
    model_dir = Path(model_dir)
    cfg = json.loads((model_dir / "config.json").read_text())
    fe = load_frontend_config(model_dir)
    proc_file = model_dir / "processor_config.json"
    proc = json.loads(proc_file.read_text()) if proc_file.exists() else {}
    sd = load_state_dict(model_dir)
    hp = read_hparams(cfg, fe, sd, proc)
    tok = load_vocab(model_dir, hp["vocab"] - 1)
    plan = tensor_plan(hp, sd)
    write_gguf(Path(out), hp, tok, plan, outtype, meta or {})
    return hp


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir", type=Path, help="transformers checkpoint directory")
    p.add_argument("out", type=Path, help="output .gguf")
    p.add_argument("--outtype", choices=OUTTYPES, default="f32")
    p.add_argument("--variant", help="stt.variant (e.g. tdt-0.6b-v2); default <head>-custom")
    p.add_argument("--name", help="general.name")
    p.add_argument("--version", help="general.version")
    p.add_argument("--size-label", help="general.size_label; default from the parameter count")
    p.add_argument("--languages", default="",
                   help="comma-separated general.languages; default en (Nemotron 3.5: the prompt locales)")
    p.add_argument("--license", help="general.license")
    p.add_argument("--repo-url", help="general.repo_url")
    a = p.parse_args(argv)
    meta = dict(variant=a.variant, name=a.name, version=a.version, size_label=a.size_label,
                languages=[x for x in a.languages.split(",") if x], license=a.license,
                repo_url=a.repo_url)
    try:
        hp = convert(a.model_dir, a.out, a.outtype, meta)
    except (ConvertError, OSError, KeyError, ValueError, TypeError) as e:
        print(f"convert_parakeet: {type(e).__name__ if not isinstance(e, ConvertError) else 'error'}: {e}",
              file=sys.stderr)
        return 1
    print(f"wrote {a.out} ({hp['head_kind']}, {hp['n_layers']} layers, d={hp['d_model']}, {a.outtype})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
