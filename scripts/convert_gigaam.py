#!/usr/bin/env python3
"""Convert a published GigaAM v3 checkpoint (salute-developers/GigaAM: the
`v3_ctc`, `v3_rnnt`, `v3_e2e_ctc` or `v3_e2e_rnnt` `.ckpt` that
`gigaam.load_model` downloads) to a GGUF in transcribe.cpp's GigaAM layout
(shared/spec/gguf-conformer-families.md sections 0.3, 2.2, 2.3 and 5), the
layout steno's gigaam loader reads.

The checkpoint is a torch pickle {"cfg": <model config>, "state_dict": ...}
with the names of GigaAM's own modules (encoder.layers.{i}.feed_forward1...,
head.decoder_layers.0 or head.decoder / head.joint, preprocessor.featurizer.0
for the mel filterbank and window). The e2e variants' SentencePiece model is
the `<name>_tokenizer.model` file downloaded next to the checkpoint (or
--tokenizer); the char variants carry their vocabulary in
cfg["decoding"]["vocabulary"].

    python scripts/convert_gigaam.py v3_e2e_rnnt.ckpt OUT.gguf [--outtype f32|f16|q8_0]
        [--tokenizer v3_e2e_rnnt_tokenizer.model] [--variant gigaam-v3-e2e-rnnt] [--name "..."]

Needs torch (to unpickle the checkpoint), numpy and gguf; omegaconf too when the
checkpoint's cfg is an OmegaConf object, as the published ones are.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

sys.path.insert(0, str(Path(__file__).resolve().parent))
from convert_parakeet import (ConvertError, read_spm_model, size_label,  # noqa: E402
                              target_type, TOK_CONTROL, TOK_NORMAL)
from gguf_tensors import encode  # noqa: E402

OUTTYPES = ("f32", "f16", "q8_0")   # the published tiers (spec 5); no BF16 conv slots
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7}
FB_KEY = "preprocessor.featurizer.0.mel_scale.fb"
WINDOW_KEY = "preprocessor.featurizer.0.spectrogram.window"

# GigaAM's conformer block names → the GGUF suffixes (spec 2.3). The conv
# module's "batch_norm" is a LayerNorm in v3 (conv_norm_type = layer_norm).
BLOCK = [
    ("norm_feed_forward1", "norm_ff1"), ("feed_forward1.linear1", "ff1.linear1"),
    ("feed_forward1.linear2", "ff1.linear2"), ("norm_conv", "norm_conv"),
    ("conv.pointwise_conv1", "conv.pointwise1"), ("conv.depthwise_conv", "conv.depthwise"),
    ("conv.batch_norm", "conv.ln"), ("conv.pointwise_conv2", "conv.pointwise2"),
    ("norm_self_att", "norm_attn"), ("self_attn.linear_q", "attn.linear_q"),
    ("self_attn.linear_k", "attn.linear_k"), ("self_attn.linear_v", "attn.linear_v"),
    ("self_attn.linear_out", "attn.linear_out"), ("norm_feed_forward2", "norm_ff2"),
    ("feed_forward2.linear1", "ff2.linear1"), ("feed_forward2.linear2", "ff2.linear2"),
    ("norm_out", "norm_out"),
]
JOINT = [("head.joint.enc", "joint.enc"), ("head.joint.pred", "joint.pred"),
         ("head.joint.joint_net.1", "joint.out")]   # joint_net = Sequential(ReLU, Linear)
SLUGS = {("ctc", "char"): "gigaam-v3-ctc", ("rnnt", "char"): "gigaam-v3-rnnt",
         ("ctc", "spm"): "gigaam-v3-e2e-ctc", ("rnnt", "spm"): "gigaam-v3-e2e-rnnt"}
FRONTEND_DEFAULTS = dict(sample_rate=16000, features=64, n_fft=320, win_length=320,
                         hop_length=160, mel_scale="htk", center=False)


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------

def _plain(cfg):
    """An OmegaConf DictConfig (the published checkpoints) or a dict, as plain dicts."""
    if isinstance(cfg, dict):
        return {k: _plain(v) for k, v in cfg.items()}
    if isinstance(cfg, (list, tuple)):
        return [_plain(v) for v in cfg]
    if type(cfg).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf
        return OmegaConf.to_container(cfg, resolve=True)
    return cfg


def load_checkpoint(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    import torch
    try:
        ck = torch.load(str(path), map_location="cpu", weights_only=False)
    except ModuleNotFoundError as e:
        raise ConvertError(f"{path}: unpickling needs {e.name} (pip install {e.name})") from e
    except (OSError, EOFError) as e:
        raise ConvertError(f"{path}: {e}") from e
    except Exception as e:  # torch / pickle raise many types for a file that is no checkpoint
        raise ConvertError(f"{path}: not a torch checkpoint ({type(e).__name__}: {e})") from e
    if not isinstance(ck, dict) or "state_dict" not in ck or "cfg" not in ck:
        raise ConvertError(f"{path}: not a GigaAM checkpoint (want a dict with 'cfg' and 'state_dict')")
    cfg = _plain(ck["cfg"])
    if not isinstance(cfg, dict) or not isinstance(cfg.get("encoder"), dict):
        raise ConvertError(f"{path}: cfg has no 'encoder' section")
    sd = {}
    for k, v in ck["state_dict"].items():
        if not isinstance(v, torch.Tensor):
            raise ConvertError(f"state_dict[{k!r}] is not a tensor")
        if not v.is_floating_point():
            raise ConvertError(f"state_dict[{k!r}] has dtype {v.dtype}, not a float type")
        sd[k] = v.detach().to(torch.float32).contiguous().numpy()
    return cfg, sd


def _u(d: dict, key: str, where: str, default=None) -> int:
    v = d.get(key, default)
    if not isinstance(v, (int, float)):
        raise ConvertError(f"{where}.{key} = {v!r}: want a positive integer")
    if v is None or isinstance(v, bool) or int(v) != v or not 0 < int(v) < 2 ** 31:
        raise ConvertError(f"cfg {where}.{key} = {v!r}: want a positive integer")
    return int(v)


def read_hparams(cfg: dict, sd: dict) -> dict:
    enc = cfg["encoder"]
    pre = {**FRONTEND_DEFAULTS, **(cfg.get("preprocessor") or {})}
    hp = {k: _u(enc, k, "encoder") for k in ("n_layers", "d_model", "n_heads", "conv_kernel_size",
                                             "subs_kernel_size", "feat_in")}
    hp["subsampling_factor"] = _u(enc, "subsampling_factor", "encoder", 4)
    hp["pos_emb_max_len"] = _u(enc, "pos_emb_max_len", "encoder", 5000)
    for key, want in (("self_attention_model", "rotary"), ("conv_norm_type", "layer_norm"),
                      ("subsampling", "conv1d")):
        if str(enc.get(key, want)) != want:
            raise ConvertError(f"encoder.{key} = {enc.get(key)!r}: only {want!r} is supported")
    if hp["subsampling_factor"] != 4:
        raise ConvertError(f"encoder.subsampling_factor = {hp['subsampling_factor']}: only 4 is supported")
    if hp["d_model"] % hp["n_heads"]:
        raise ConvertError(f"d_model {hp['d_model']} is not a multiple of n_heads {hp['n_heads']}")
    if hp["subs_kernel_size"] % 2 == 0 or hp["conv_kernel_size"] % 2 == 0:
        raise ConvertError("even conv kernels are not supported (symmetric padding)")
    w1 = sd.get("encoder.layers.0.feed_forward1.linear1.weight")
    if w1 is None:
        raise ConvertError("state_dict has no encoder.layers.0.feed_forward1.linear1.weight")
    hp["d_ff"] = int(w1.shape[0])
    if "ff_expansion_factor" in enc and hp["d_ff"] != hp["d_model"] * int(enc["ff_expansion_factor"]):
        raise ConvertError(f"feed_forward width {hp['d_ff']} != d_model × ff_expansion_factor")
    for k in ("sample_rate", "features", "n_fft", "win_length", "hop_length"):
        hp[k] = _u(pre, k, "preprocessor")
    if hp["n_fft"] != hp["win_length"]:
        raise ConvertError("preprocessor n_fft != win_length: the GigaAM frontend frames by the window")
    if hp["features"] != hp["feat_in"]:
        raise ConvertError(f"preprocessor.features {hp['features']} != encoder.feat_in {hp['feat_in']}")
    if bool(pre.get("center")):
        raise ConvertError("preprocessor.center = true is not supported (GigaAM v3 frames without padding)")
    hp["mel_norm"] = str(pre.get("mel_scale") or "htk")
    if pre.get("mel_norm") is not None:
        hp["mel_norm"] += "+" + str(pre["mel_norm"])
    return hp


def read_head(cfg: dict, sd: dict, hp: dict) -> None:
    """head_kind, classes V and the predictor / joint widths, from the tensors;
    the cfg's numbers must agree."""
    head = cfg.get("head") or {}
    if "head.decoder_layers.0.weight" in sd:
        hp["head_kind"] = "ctc"
        hp["classes"] = int(sd["head.decoder_layers.0.weight"].shape[0])
        if head.get("num_classes", hp["classes"]) != hp["classes"]:
            raise ConvertError(f"cfg head.num_classes {head.get('num_classes')} != CTC head rows {hp['classes']}")
    elif "head.joint.joint_net.1.weight" in sd:
        hp["head_kind"] = "rnnt"
        out = sd["head.joint.joint_net.1.weight"]
        hp["classes"], hp["joint_hidden"] = int(out.shape[0]), int(out.shape[1])
        hp["pred_hidden"] = int(sd["head.decoder.embed.weight"].shape[1])
        layers = sum(1 for k in sd if k.startswith("head.decoder.lstm.weight_ih_l"))
        if layers != 1:
            raise ConvertError(f"{layers} predictor LSTM layers: only 1 is supported")
        dec = head.get("decoder") or {}
        if int(dec.get("pred_rnn_layers", 1)) != 1:
            raise ConvertError(f"cfg head.decoder.pred_rnn_layers = {dec['pred_rnn_layers']}: only 1")
        if any("joint_net" in k and not k.startswith("head.joint.joint_net.1.") for k in sd):
            raise ConvertError("joint_net is not Sequential(ReLU, Linear)")
    else:
        raise ConvertError("state_dict has neither a CTC head (head.decoder_layers.0) "
                           "nor an RNN-T joint (head.joint.joint_net.1)")


# ---------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------

def load_tokenizer(cfg: dict, ckpt: Path, spm_path: Path | None, classes: int) -> dict:
    dec = cfg.get("decoding") or {}
    if spm_path is None and "vocabulary" in dec:
        vocab = [str(c) for c in dec["vocabulary"]]
        tok = dict(kind="char", tokens=vocab, scores=[0.0] * len(vocab), types=[TOK_NORMAL] * len(vocab),
                   unk_id=-1, bos_id=-1, eos_id=-1)
    else:
        cands = [spm_path] if spm_path else [ckpt.with_name(ckpt.stem + "_tokenizer.model")]
        if not spm_path and dec.get("model_path"):
            cands.append(Path(str(dec["model_path"])))
        path = next((p for p in cands if p.is_file()), None)
        if path is None:
            raise ConvertError("no tokenizer: cfg.decoding has no vocabulary and none of "
                               f"{[str(p) for p in cands]} exists (pass --tokenizer)")
        tok = dict(kind="spm", **read_spm_model(path))
    n = len(tok["tokens"])
    if n + 1 != classes:
        raise ConvertError(f"tokenizer has {n} entries; the head has {classes} classes (want {n} + blank)")
    tok["tokens"] = tok["tokens"] + ["<blank>"]
    tok["scores"] = tok["scores"] + [0.0]
    tok["types"] = tok["types"] + [TOK_CONTROL]
    tok["blank_id"] = n
    return tok


# ---------------------------------------------------------------------------
# Tensors
# ---------------------------------------------------------------------------

def tensor_plan(hp: dict, sd: dict) -> list[tuple[str, np.ndarray, tuple]]:
    """(GGUF name, f32 array in PyTorch order, expected PyTorch shape); every
    state_dict tensor must be used exactly once."""
    d, ff, k, sk, F, V = (hp["d_model"], hp["d_ff"], hp["conv_kernel_size"], hp["subs_kernel_size"],
                          hp["feat_in"], hp["classes"])
    used, plan = set(), []

    def take(src, dst, shape, arr=None):
        if arr is None:
            if src not in sd:
                raise ConvertError(f"state_dict is missing {src}")
            arr = sd[src]
            used.add(src)
        plan.append((dst, arr, tuple(shape)))

    bins = hp["n_fft"] // 2 + 1
    if FB_KEY not in sd or WINDOW_KEY not in sd:
        raise ConvertError(f"state_dict is missing the frontend buffers {FB_KEY} / {WINDOW_KEY}")
    take(FB_KEY, "frontend.mel_filterbank", (F, bins), sd[FB_KEY].T)   # torchaudio: [bins, mels]
    used.add(FB_KEY)
    take(WINDOW_KEY, "frontend.window", (hp["win_length"],))
    for i, cin in ((0, F), (2, d)):
        take(f"encoder.pre_encode.conv.{i}.weight", f"enc.pre_encode.conv.{i}.weight", (d, cin, sk))
        take(f"encoder.pre_encode.conv.{i}.bias", f"enc.pre_encode.conv.{i}.bias", (d,))
    shapes = {"ff1.linear1": (ff, d), "ff2.linear1": (ff, d), "ff1.linear2": (d, ff), "ff2.linear2": (d, ff),
              "conv.pointwise1": (2 * d, d, 1), "conv.depthwise": (d, 1, k), "conv.pointwise2": (d, d, 1)}
    for b in range(hp["n_layers"]):
        for src, dst in BLOCK:
            w = shapes.get(dst, (d, d) if dst.startswith("attn.") else (d,))
            bias = 2 * d if dst == "conv.pointwise1" else (ff if dst.endswith("linear1") else d)
            take(f"encoder.layers.{b}.{src}.weight", f"enc.blocks.{b}.{dst}.weight", w)
            take(f"encoder.layers.{b}.{src}.bias", f"enc.blocks.{b}.{dst}.bias", (bias,))
    if hp["head_kind"] == "ctc":
        take("head.decoder_layers.0.weight", "head.ctc.weight", (V, d, 1))
        take("head.decoder_layers.0.bias", "head.ctc.bias", (V,))
    else:
        p, j = hp["pred_hidden"], hp["joint_hidden"]
        take("head.decoder.embed.weight", "pred.embed.weight", (V, p))
        take("head.decoder.lstm.weight_ih_l0", "pred.lstm.0.Wx", (4 * p, p))
        take("head.decoder.lstm.weight_hh_l0", "pred.lstm.0.Wh", (4 * p, p))
        bi, bh = "head.decoder.lstm.bias_ih_l0", "head.decoder.lstm.bias_hh_l0"
        if bi not in sd or bh not in sd or sd[bi].shape != sd[bh].shape:
            raise ConvertError("the predictor LSTM needs bias_ih_l0 and bias_hh_l0 of one shape")
        take(None, "pred.lstm.0.bias", (4 * p,), sd[bi] + sd[bh])   # both add to the gates
        used.update((bi, bh))
        for (src, dst), (o, i) in zip(JOINT, ((j, d), (j, p), (V, j))):
            take(src + ".weight", dst + ".weight", (o, i))
            take(src + ".bias", dst + ".bias", (o,))
    left = sorted(set(sd) - used)
    if left:
        raise ConvertError(f"{len(left)} checkpoint tensors have no place in the GGUF, e.g. {left[:4]}")
    for name, arr, shape in plan:
        if tuple(arr.shape) != shape:
            raise ConvertError(f"{name}: shape {tuple(arr.shape)}, expected {shape}")
    return plan


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

def write_gguf(out: Path, hp: dict, tok: dict, plan, outtype: str, meta: dict) -> None:
    tmp = out.with_name(out.name + ".part")   # never leave a half-written OUT behind
    w = gguf.GGUFWriter(str(tmp), "gigaam")
    u32 = lambda k, v: w.add_key_value(k, int(v), VT.UINT32)     # noqa: E731
    f32 = lambda k, v: w.add_key_value(k, float(v), VT.FLOAT32)  # noqa: E731
    s = lambda k, v: w.add_key_value(k, str(v), VT.STRING)       # noqa: E731
    arr = lambda k, v, sub: w.add_key_value(k, list(v), VT.ARRAY, sub_type=sub)  # noqa: E731
    head, G = hp["head_kind"], "stt.gigaam."
    variant = meta.get("variant") or SLUGS[(head, tok["kind"])]
    s("general.name", meta.get("name") or "GigaAM " + variant[len("gigaam-"):])
    s("general.basename", "gigaam-v3")
    s("general.version", "v3")
    s("general.size_label", size_label(sum(int(a.size) for n, a, _ in plan if not n.startswith("frontend."))))
    s("general.license", "mit")
    u32("general.file_type", FILE_TYPE[outtype])
    s("stt.variant", variant)
    arr("general.languages", ["ru"], VT.STRING)
    s(G + "head_kind", head)
    for key, val in (("n_layers", hp["n_layers"]), ("d_model", hp["d_model"]), ("n_heads", hp["n_heads"]),
                     ("d_ff", hp["d_ff"]), ("conv_kernel", hp["conv_kernel_size"]),
                     ("subsampling_factor", hp["subsampling_factor"]), ("subs_kernel_size", hp["subs_kernel_size"]),
                     ("pos_emb_max_len", hp["pos_emb_max_len"]), ("feat_in", hp["feat_in"])):
        u32(G + "encoder." + key, val)
    s(G + "encoder.self_attention_model", "rotary")
    s(G + "encoder.conv_norm_type", "layer_norm")
    if head == "ctc":
        u32(G + "head.feat_in", hp["d_model"])
        u32(G + "head.num_classes", hp["classes"])
    else:
        u32(G + "predictor.hidden", hp["pred_hidden"])
        u32(G + "predictor.n_layers", 1)
        u32(G + "predictor.vocab", hp["classes"])
        u32(G + "joint.hidden", hp["joint_hidden"])
        u32(G + "joint.num_classes", hp["classes"])
        s(G + "joint.activation", "relu")
    fe = "stt.frontend."
    s(fe + "type", "mel")
    for key, val in (("num_mels", hp["features"]), ("sample_rate", hp["sample_rate"]), ("n_fft", hp["n_fft"]),
                     ("win_length", hp["win_length"]), ("hop_length", hp["hop_length"])):
        u32(fe + key, val)
    s(fe + "window", "hann_periodic")
    s(fe + "normalize", "none")
    for key, val in (("dither", 0.0), ("pre_emphasis", 0.0), ("f_min", 0.0), ("f_max", hp["sample_rate"] / 2),
                     ("log_clamp_min", 1e-9), ("log_clamp_max", 1e9)):
        f32(fe + key, val)
    w.add_key_value(fe + "center", False, VT.BOOL)
    s(fe + "mel_norm", hp["mel_norm"])
    s("tokenizer.ggml.model", "char" if tok["kind"] == "char" else "bpe")
    for key, name in (("unk_id", "unknown_token_id"), ("bos_id", "bos_token_id"), ("eos_id", "eos_token_id")):
        if tok[key] >= 0:
            u32(f"tokenizer.ggml.{name}", tok[key])
    u32("tokenizer.ggml.blank_token_id", tok["blank_id"])
    arr("tokenizer.ggml.tokens", tok["tokens"], VT.STRING)   # the bulky arrays last
    arr("tokenizer.ggml.scores", tok["scores"], VT.FLOAT32)
    arr("tokenizer.ggml.token_type", tok["types"], VT.INT32)
    for name, a, _ in plan:
        qt = target_type(name, a.shape[-1], outtype)
        w.add_tensor(name, encode(a, qt), raw_dtype=None if qt in (QT.F32, QT.F16) else qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, out)


def convert(ckpt: Path, out: Path, outtype: str = "f32", tokenizer: Path | None = None,
            meta: dict | None = None) -> dict:
    if outtype not in OUTTYPES:
        raise ConvertError(f"--outtype must be one of {OUTTYPES}")
    cfg, sd = load_checkpoint(Path(ckpt))
    hp = read_hparams(cfg, sd)
    read_head(cfg, sd, hp)
    tok = load_tokenizer(cfg, Path(ckpt), tokenizer, hp["classes"])
    plan = tensor_plan(hp, sd)
    write_gguf(Path(out), hp, tok, plan, outtype, meta or {})
    return hp


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("ckpt", type=Path, help="GigaAM .ckpt (torch pickle with cfg and state_dict)")
    p.add_argument("out", type=Path, help="output .gguf")
    p.add_argument("--outtype", choices=OUTTYPES, default="f32")
    p.add_argument("--tokenizer", type=Path, help="SentencePiece .model (e2e variants); "
                   "default CKPT_STEM_tokenizer.model next to the checkpoint")
    p.add_argument("--variant", help="stt.variant; default from the head and tokenizer (gigaam-v3-e2e-rnnt, ...)")
    p.add_argument("--name", help="general.name")
    a = p.parse_args(argv)
    try:
        hp = convert(a.ckpt, a.out, a.outtype, a.tokenizer, dict(variant=a.variant, name=a.name))
    except (ConvertError, OSError, KeyError, ValueError) as e:
        print(f"convert_gigaam: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {a.out} ({hp['head_kind']}, {hp['n_layers']} layers, d={hp['d_model']}, "
          f"{hp['classes']} classes, {a.outtype})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
