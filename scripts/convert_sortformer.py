#!/usr/bin/env python3
"""Convert a published streaming Sortformer diarizer (NVIDIA's
diar_streaming_sortformer_4spk-v2 / v2.1 `.nemo`: NeMo's
SortformerEncLabelModel) to a GGUF in transcribe.cpp's Sortformer layout
(shared/spec/gguf-conformer-families.md sections 4 and 5), the layout steno's
sortformer loader reads.

A .nemo file is a tar (plain or gzip) holding model_config.yaml and
model_weights.ckpt (a torch state_dict in NeMo's module names: encoder.* — the
FastConformer —, transformer_encoder.layers.{i}.*, sortformer_modules.*,
preprocessor.*). It is read directly: NeMo itself is not needed.

    python scripts/convert_sortformer.py diar_streaming_sortformer_4spk-v2.1.nemo OUT.gguf
        [--outtype f32|f16|q8_0] [--variant diar_streaming_sortformer_4spk-v2.1] [--name "..."]

Needs torch (to unpickle the weights), pyyaml, numpy and gguf.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tarfile
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

sys.path.insert(0, str(Path(__file__).resolve().parent))
from convert_parakeet import ConvertError, size_label, target_type  # noqa: E402
from gguf_tensors import encode  # noqa: E402

OUTTYPES = ("f32", "f16", "q8_0")   # the published tiers (spec 5: K-quants flipped speakers)
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7}

# NeMo ConformerLayer names → GGUF suffixes (spec 1.3; the Parakeet encoder's).
BLOCK = [
    ("norm_feed_forward1", "norm_ff1", True), ("feed_forward1.linear1", "ff1.linear1", True),
    ("feed_forward1.linear2", "ff1.linear2", True), ("norm_self_att", "norm_attn", True),
    ("self_attn.linear_q", "attn.linear_q", True), ("self_attn.linear_k", "attn.linear_k", True),
    ("self_attn.linear_v", "attn.linear_v", True), ("self_attn.linear_out", "attn.linear_out", True),
    ("self_attn.linear_pos", "attn.linear_pos", False), ("norm_conv", "norm_conv", True),
    ("conv.pointwise_conv1", "conv.pointwise1", True), ("conv.depthwise_conv", "conv.depthwise", True),
    ("conv.batch_norm", "conv.bn", True), ("conv.pointwise_conv2", "conv.pointwise2", True),
    ("norm_feed_forward2", "norm_ff2", True), ("feed_forward2.linear1", "ff2.linear1", True),
    ("feed_forward2.linear2", "ff2.linear2", True), ("norm_out", "norm_out", True),
]   # (NeMo module, GGUF module, has a bias)
TF_BLOCK = [("layer_norm_1", "norm_1"), ("first_sub_layer.query_net", "attn.q"),
            ("first_sub_layer.key_net", "attn.k"), ("first_sub_layer.value_net", "attn.v"),
            ("first_sub_layer.out_projection", "attn.out"), ("layer_norm_2", "norm_2"),
            ("second_sub_layer.dense_in", "ff.in"), ("second_sub_layer.dense_out", "ff.out")]
HEAD = [("encoder_proj", "encoder_proj"), ("first_hidden_to_hidden", "fc1"),
        ("single_hidden_to_spks", "single_spk_head"), ("hidden_to_spks", "spk_head")]
# Recomputed by the engine, or bookkeeping: not written.
SKIPPED_PREFIXES = ("preprocessor.", "encoder.pos_enc.")
SKIPPED_SUFFIXES = (".num_batches_tracked",)


# ---------------------------------------------------------------------------
# Reading the .nemo archive
# ---------------------------------------------------------------------------

def load_nemo(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    import torch
    import yaml
    try:
        tar = tarfile.open(str(path), "r:*")
    except tarfile.TarError as e:
        raise ConvertError(f"{path}: not a .nemo tar archive ({e})") from e
    with tar:
        members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
        for want in ("model_config.yaml", "model_weights.ckpt"):
            if want not in members:
                raise ConvertError(f"{path}: no {want} in the archive")
        cfg = tar.extractfile(members["model_config.yaml"]).read()
        raw = tar.extractfile(members["model_weights.ckpt"]).read()
    try:
        sd = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as e:  # torch / pickle raise many types for bytes that are no state_dict
        raise ConvertError(f"{path}: model_weights.ckpt is not a torch state_dict ({type(e).__name__}: {e})") from e
    try:
        cfg = yaml.safe_load(cfg)
    except yaml.YAMLError as e:
        raise ConvertError(f"{path}: model_config.yaml does not parse ({e})") from e
    if isinstance(sd, dict) and "state_dict" in sd:
        sd = sd["state_dict"]
    if not isinstance(cfg, dict) or not isinstance(sd, dict):
        raise ConvertError(f"{path}: model_config.yaml or model_weights.ckpt is not a mapping")
    out = {}
    for k, v in sd.items():
        if not isinstance(v, torch.Tensor):
            raise ConvertError(f"model_weights.ckpt[{k!r}] is not a tensor")
        if k.endswith(SKIPPED_SUFFIXES) or k.startswith(SKIPPED_PREFIXES):
            continue
        if not v.is_floating_point():
            raise ConvertError(f"model_weights.ckpt[{k!r}] has dtype {v.dtype}, not a float type")
        out[k] = v.detach().to(torch.float32).contiguous().numpy()
    return cfg, out


def _u(d: dict, key: str, where: str, default=None) -> int:
    v = d.get(key, default)
    if not isinstance(v, (int, float)):
        raise ConvertError(f"{where}.{key} = {v!r}: want a non-negative integer")
    if v is None or isinstance(v, bool) or int(v) != v or not 0 <= int(v) < 2 ** 31:
        raise ConvertError(f"{where}.{key} = {v!r}: want a non-negative integer")
    return int(v)


def _section(cfg: dict, key: str) -> dict:
    s = cfg.get(key)
    if not isinstance(s, dict):
        raise ConvertError(f"model_config.yaml has no {key} section")
    return s


def read_hparams(cfg: dict) -> dict:
    enc, tf = _section(cfg, "encoder"), _section(cfg, "transformer_encoder")
    pre, sm = _section(cfg, "preprocessor"), _section(cfg, "sortformer_modules")
    hp = {k: _u(enc, k, "encoder") for k in ("n_layers", "d_model", "n_heads", "conv_kernel_size",
                                             "subsampling_conv_channels", "feat_in", "ff_expansion_factor")}
    if min(hp.values()) == 0:
        raise ConvertError(f"encoder: a zero size in {hp}")
    hp["subsampling_factor"] = _u(enc, "subsampling_factor", "encoder", 8)
    hp["pos_emb_max_len"] = _u(enc, "pos_emb_max_len", "encoder", 5000)
    hp["d_ff"] = hp["d_model"] * hp["ff_expansion_factor"]
    for key, want in (("subsampling", "dw_striding"), ("self_attention_model", "rel_pos"),
                      ("conv_norm_type", "batch_norm")):
        if str(enc.get(key, want)) != want:
            raise ConvertError(f"encoder.{key} = {enc.get(key)!r}: only {want!r} is supported")
    # The engine hard-codes these (spec 4.1): refuse a model that differs.
    if hp["subsampling_factor"] != 8 or enc.get("causal_downsampling", False):
        raise ConvertError("only non-causal ×8 dw_striding subsampling is supported")
    if not enc.get("xscaling", True):
        raise ConvertError("encoder.xscaling = false: the Sortformer engine always scales by sqrt(d)")
    if list(enc.get("att_context_size", [-1, -1])) != [-1, -1]:
        raise ConvertError(f"encoder.att_context_size = {enc['att_context_size']}: only full attention")
    if hp["d_model"] % hp["n_heads"] or hp["conv_kernel_size"] % 2 == 0:
        raise ConvertError("d_model must be a multiple of n_heads and the conv kernel odd")
    hp.update(tf_layers=_u(tf, "num_layers", "transformer_encoder"), tf_d=_u(tf, "hidden_size", "transformer_encoder"),
              tf_ff=_u(tf, "inner_size", "transformer_encoder"),
              tf_heads=_u(tf, "num_attention_heads", "transformer_encoder"))
    if min(hp["tf_layers"], hp["tf_d"], hp["tf_ff"], hp["tf_heads"]) == 0:
        raise ConvertError("transformer_encoder: a zero size")
    if str(tf.get("hidden_act", "relu")) != "relu" or bool(tf.get("pre_ln", False)):
        raise ConvertError("only a post-LN transformer with ReLU is supported")
    if hp["tf_d"] % hp["tf_heads"]:
        raise ConvertError("transformer hidden_size must be a multiple of num_attention_heads")
    hp["speakers"] = _u(cfg, "max_num_of_spks", "config", sm.get("num_spks", 4))
    for k in ("chunk_len", "spkcache_len", "fifo_len", "spkcache_update_period"):
        hp[k] = _u(sm, k, "sortformer_modules")
    sr = _u(pre, "sample_rate", "preprocessor", cfg.get("sample_rate", 16000))
    hp.update(sample_rate=sr, n_mels=_u(pre, "features", "preprocessor"), n_fft=_u(pre, "n_fft", "preprocessor"),
              hop=int(round(float(pre.get("window_stride", 0.01)) * sr)),
              win=int(round(float(pre.get("window_size", 0.025)) * sr)))
    if hp["n_mels"] != hp["feat_in"]:
        raise ConvertError(f"preprocessor.features {hp['n_mels']} != encoder.feat_in {hp['feat_in']}")
    if str(pre.get("window", "hann")) != "hann":
        raise ConvertError(f"preprocessor.window = {pre['window']!r}: only hann")
    norm = pre.get("normalize", "NA")
    hp["normalize"] = "none" if norm in (None, "NA", "none", "None") else str(norm)
    if hp["normalize"] != "none":
        raise ConvertError(f"preprocessor.normalize = {norm!r}: the Sortformer frontend takes none")
    pe = pre.get("preemph", 0.97)
    hp["pre_emphasis"] = 0.97 if pe is None else float(pe)
    hp["dither"] = float(pre.get("dither", 1e-5))
    return hp


# ---------------------------------------------------------------------------
# Tensors
# ---------------------------------------------------------------------------

def tensor_plan(hp: dict, sd: dict) -> list[tuple[str, np.ndarray]]:
    """(GGUF name, f32 array in PyTorch order), every shape checked; every
    checkpoint tensor that is not skipped must be used."""
    d, ff, H, k, C = hp["d_model"], hp["d_ff"], hp["n_heads"], hp["conv_kernel_size"], hp["subsampling_conv_channels"]
    D, Fi, S = hp["tf_d"], hp["tf_ff"], hp["speakers"]
    f = hp["feat_in"]
    for _ in range(3):
        f = (f - 1) // 2 + 1      # each stride-2 3×3 conv, padding 1
    used, plan = set(), []

    def take(src, dst, shape):
        if src not in sd:
            raise ConvertError(f"model_weights.ckpt is missing {src}")
        if tuple(sd[src].shape) != tuple(shape):
            raise ConvertError(f"{src}: shape {tuple(sd[src].shape)}, expected {tuple(shape)}")
        used.add(src)
        plan.append((dst, sd[src]))

    pre = {0: (C, 1, 3, 3), 2: (C, 1, 3, 3), 3: (C, C, 1, 1), 5: (C, 1, 3, 3), 6: (C, C, 1, 1)}
    for i, shape in pre.items():
        take(f"encoder.pre_encode.conv.{i}.weight", f"enc.pre_encode.conv.{i}.weight", shape)
        take(f"encoder.pre_encode.conv.{i}.bias", f"enc.pre_encode.conv.{i}.bias", (C,))
    take("encoder.pre_encode.out.weight", "enc.pre_encode.out.weight", (d, C * f))
    take("encoder.pre_encode.out.bias", "enc.pre_encode.out.bias", (d,))
    shapes = {"ff1.linear1": (ff, d), "ff2.linear1": (ff, d), "ff1.linear2": (d, ff), "ff2.linear2": (d, ff),
              "conv.pointwise1": (2 * d, d, 1), "conv.depthwise": (d, 1, k), "conv.pointwise2": (d, d, 1)}
    for b in range(hp["n_layers"]):
        src, dst = f"encoder.layers.{b}.", f"enc.blocks.{b}."
        for nemo, ours, has_bias in BLOCK:
            w = shapes.get(ours, (d, d) if ours.startswith("attn.") else (d,))
            take(src + nemo + ".weight", dst + ours + ".weight", w)
            if has_bias:
                take(src + nemo + ".bias", dst + ours + ".bias", (w[0],))
        take(src + "conv.batch_norm.running_mean", dst + "conv.bn.running_mean", (d,))
        take(src + "conv.batch_norm.running_var", dst + "conv.bn.running_var", (d,))
        take(src + "self_attn.pos_bias_u", dst + "attn.pos_bias_u", (H, d // H))
        take(src + "self_attn.pos_bias_v", dst + "attn.pos_bias_v", (H, d // H))
    take("sortformer_modules.encoder_proj.weight", "diar.encoder_proj.weight", (D, d))
    take("sortformer_modules.encoder_proj.bias", "diar.encoder_proj.bias", (D,))
    tf_shapes = {"ff.in": (Fi, D), "ff.out": (D, Fi)}
    for b in range(hp["tf_layers"]):
        for nemo, ours in TF_BLOCK:
            w = tf_shapes.get(ours, (D, D) if ours.startswith("attn.") else (D,))
            src, dst = f"transformer_encoder.layers.{b}.{nemo}", f"tf.blocks.{b}.{ours}"
            take(src + ".weight", dst + ".weight", w)
            take(src + ".bias", dst + ".bias", (w[0],))
    for nemo, ours in HEAD[1:]:
        o, i = {"fc1": (D, D), "single_spk_head": (S, D), "spk_head": (S, 2 * D)}[ours]
        take(f"sortformer_modules.{nemo}.weight", f"diar.{ours}.weight", (o, i))
        take(f"sortformer_modules.{nemo}.bias", f"diar.{ours}.bias", (o,))
    left = sorted(set(sd) - used)
    if left:
        raise ConvertError(f"{len(left)} checkpoint tensors have no place in the GGUF, e.g. {left[:4]}")
    return plan


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

def write_gguf(out: Path, hp: dict, plan, outtype: str, meta: dict) -> None:
    tmp = out.with_name(out.name + ".part")   # never leave a half-written OUT behind
    w = gguf.GGUFWriter(str(tmp), "sortformer")
    u32 = lambda k, v: w.add_key_value(k, int(v), VT.UINT32)     # noqa: E731
    f32 = lambda k, v: w.add_key_value(k, float(v), VT.FLOAT32)  # noqa: E731
    s = lambda k, v: w.add_key_value(k, str(v), VT.STRING)       # noqa: E731
    b = lambda k, v: w.add_key_value(k, bool(v), VT.BOOL)        # noqa: E731
    s("general.name", meta.get("name") or "Streaming Sortformer Diarizer")
    s("general.basename", "sortformer")
    s("general.size_label", size_label(sum(int(a.size) for _, a in plan)))
    s("general.license", "other")
    s("stt.variant", meta.get("variant") or "diar_streaming_sortformer_4spk-v2.1")
    u32("general.file_type", FILE_TYPE[outtype])
    for cap, on in (("streaming", True), ("speaker_diarization", True), ("lang_detect", False),
                    ("translate", False), ("timestamps", False)):
        b("stt.capability." + cap, on)
    p = "stt.sortformer."
    u32(p + "max_speakers", hp["speakers"])
    u32(p + "frame_hop", hp["hop"] * hp["subsampling_factor"])
    for key, val in (("n_layers", hp["n_layers"]), ("d_model", hp["d_model"]), ("n_heads", hp["n_heads"]),
                     ("d_ff", hp["d_ff"]), ("conv_kernel", hp["conv_kernel_size"]),
                     ("subsampling_factor", hp["subsampling_factor"]),
                     ("subsampling_channels", hp["subsampling_conv_channels"]), ("feat_in", hp["feat_in"]),
                     ("pos_emb_max_len", hp["pos_emb_max_len"])):
        u32(p + "encoder." + key, val)
    s(p + "encoder.conv_norm_type", "batch_norm")
    for key, val in (("n_layers", hp["tf_layers"]), ("d_model", hp["tf_d"]), ("n_heads", hp["tf_heads"]),
                     ("d_ff", hp["tf_ff"])):
        u32(p + "transformer." + key, val)
    s(p + "transformer.activation", "relu")
    b(p + "transformer.pre_ln", False)
    for key in ("chunk_len", "spkcache_len", "fifo_len", "spkcache_update_period"):
        u32(p + "stream." + key, hp[key])
    for key, val in (("sample_rate", hp["sample_rate"]), ("num_mels", hp["n_mels"]), ("n_fft", hp["n_fft"]),
                     ("hop_length", hp["hop"]), ("win_length", hp["win"])):
        u32("stt.frontend." + key, val)
    s("stt.frontend.window", "hann")
    s("stt.frontend.normalize", hp["normalize"])
    f32("stt.frontend.pre_emphasis", hp["pre_emphasis"])
    f32("stt.frontend.dither", hp["dither"])
    for name, a in plan:
        qt = target_type(name, a.shape[-1], outtype)
        w.add_tensor(name, encode(a, qt), raw_dtype=None if qt in (QT.F32, QT.F16) else qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, out)


def convert(nemo: Path, out: Path, outtype: str = "f32", meta: dict | None = None) -> dict:
    if outtype not in OUTTYPES:
        raise ConvertError(f"--outtype must be one of {OUTTYPES}")
    cfg, sd = load_nemo(Path(nemo))
    hp = read_hparams(cfg)
    plan = tensor_plan(hp, sd)
    write_gguf(Path(out), hp, plan, outtype, meta or {})
    hp["n_tensors"] = len(plan)
    return hp


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("nemo", type=Path, help="the .nemo archive")
    p.add_argument("out", type=Path, help="output .gguf")
    p.add_argument("--outtype", choices=OUTTYPES, default="f32")
    p.add_argument("--variant", help="stt.variant (default diar_streaming_sortformer_4spk-v2.1)")
    p.add_argument("--name", help="general.name")
    a = p.parse_args(argv)
    try:
        hp = convert(a.nemo, a.out, a.outtype, dict(variant=a.variant, name=a.name))
    except (ConvertError, OSError, KeyError, ValueError, TypeError) as e:
        print(f"convert_sortformer: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {a.out} ({hp['n_tensors']} tensors: {hp['n_layers']} conformer blocks d={hp['d_model']}, "
          f"{hp['tf_layers']} transformer blocks d={hp['tf_d']}, {hp['speakers']} speakers, {a.outtype})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
