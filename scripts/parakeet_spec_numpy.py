"""Parakeet as the spec describes it (shared/spec/gguf-conformer-families.md
sections 1.4-1.9), in plain numpy, reading its weights from a converted GGUF.

It is the independent half of the fixture check in dump_parakeet.py: the
transformers model produces the reference numbers, and this file recomputes them
from nothing but the GGUF and the spec's text. Agreement shows that the GGUF
layout (names, ne order, summed LSTM biases, BatchNorm fusion) and the spec's
algorithm are what transformers computes. It is slow and meant for tiny models.
"""

from __future__ import annotations

import math

import numpy as np
import gguf


# ---------------------------------------------------------------------------
# GGUF
# ---------------------------------------------------------------------------

def read_gguf(path):
    """(keys, tensors): keys as python values, tensors dequantized to f32 in
    PyTorch order (the reverse of ne)."""
    r = gguf.GGUFReader(str(path))
    kv = {}
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        kv[name] = f.contents()
    t = {}
    for ti in r.tensors:
        shape = tuple(int(x) for x in reversed(ti.shape))
        t[ti.name] = gguf.quants.dequantize(ti.data, ti.tensor_type).reshape(shape).astype(np.float32)
    return kv, t


# ---------------------------------------------------------------------------
# Frontend (1.4)
# ---------------------------------------------------------------------------

def mel_filterbank(kv):
    import librosa  # Slaney mel scale and Slaney area norm, as NeMo and transcribe.cpp build it
    return librosa.filters.mel(sr=kv["stt.frontend.sample_rate"], n_fft=kv["stt.frontend.n_fft"],
                               n_mels=kv["stt.frontend.num_mels"], fmin=kv["stt.frontend.f_min"],
                               fmax=kv["stt.frontend.f_max"], htk=False, norm="slaney").astype(np.float64)


def log_mel(pcm, kv):
    """[n_frames, n_mels] (time-major), computed in float64."""
    n_fft, win, hop = kv["stt.frontend.n_fft"], kv["stt.frontend.win_length"], kv["stt.frontend.hop_length"]
    x = np.asarray(pcm, dtype=np.float64)
    x = np.concatenate([x[:1], x[1:] - kv["stt.frontend.pre_emphasis"] * x[:-1]])
    xp = np.pad(x, (n_fft // 2, n_fft // 2))                       # zero padding
    n_frames = len(x) // hop + 1
    k = np.arange(win)
    w = 0.5 - 0.5 * np.cos(2 * np.pi * k / (win - 1))              # symmetric Hann
    wpad = np.zeros(n_fft)
    wpad[(n_fft - win) // 2:(n_fft - win) // 2 + win] = w
    idx = np.arange(n_frames)[:, None] * hop + np.arange(n_fft)[None, :]
    spec = np.abs(np.fft.rfft(xp[idx] * wpad, axis=1)) ** 2        # [T, n_fft/2+1]
    mel = np.log(spec @ mel_filterbank(kv).T + 2.0 ** -24)
    n_valid = len(x) // hop
    v = mel[:n_valid]
    mean = v.mean(axis=0)
    std = np.sqrt(((v - mean) ** 2).sum(axis=0) / (n_valid - 1))
    out = (mel - mean) / (std + 1e-5)
    out[n_valid:] = 0.0
    return out


# ---------------------------------------------------------------------------
# Encoder (1.5 - 1.7)
# ---------------------------------------------------------------------------

def conv2d_s2(x, w, b, groups):
    """x [Cin, H, W]; w [Cout, Cin/groups, 3, 3]; stride 2, pad 1."""
    cin, h, wd = x.shape
    ho, wo = (h - 1) // 2 + 1, (wd - 1) // 2 + 1
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    cols = np.empty((cin, 3, 3, ho, wo), dtype=x.dtype)
    for i in range(3):
        for j in range(3):
            cols[:, i, j] = xp[:, i:i + 2 * ho:2, j:j + 2 * wo:2]
    if groups == 1:   # Cin == 1
        out = np.einsum("oij,ijhw->ohw", w[:, 0], cols[0])
    else:             # depthwise
        out = np.einsum("cij,cijhw->chw", w[:, 0], cols)
    return out + b[:, None, None]


def layer_norm(x, g, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lin(x, t, name, use_bias):
    y = x @ t[name + ".weight"].reshape(t[name + ".weight"].shape[0], -1).T
    if use_bias:
        y = y + t[name + ".bias"]
    return y


def rel_pos_emb(T, d):
    p = (T - 1) - np.arange(2 * T - 1, dtype=np.float64)           # +(T-1) ... -(T-1)
    omega = np.exp(-np.arange(0, d, 2, dtype=np.float64) * math.log(10000.0) / d)
    pe = np.zeros((2 * T - 1, d))
    pe[:, 0::2] = np.sin(p[:, None] * omega)
    pe[:, 1::2] = np.cos(p[:, None] * omega)
    return pe


def attention(x, t, pre, H, use_bias, pe):
    T, d = x.shape
    dh = d // H
    q = lin(x, t, pre + "linear_q", use_bias).reshape(T, H, dh)
    k = lin(x, t, pre + "linear_k", use_bias).reshape(T, H, dh)
    v = lin(x, t, pre + "linear_v", use_bias).reshape(T, H, dh)
    P = (pe @ t[pre + "linear_pos.weight"].T).reshape(2 * T - 1, H, dh)
    qu = q + t[pre + "pos_bias_u"][None]
    qv = q + t[pre + "pos_bias_v"][None]
    ac = np.einsum("qhd,khd->hqk", qu, k)
    rows = (T - 1) - (np.arange(T)[:, None] - np.arange(T)[None, :])  # row for relative position q-k
    bd_full = np.einsum("qhd,phd->hqp", qv, P)
    bd = np.take_along_axis(bd_full, np.broadcast_to(rows[None], (H, T, T)), axis=2)
    s = (ac + bd) / math.sqrt(dh)
    s = s - s.max(-1, keepdims=True)
    a = np.exp(s)
    a /= a.sum(-1, keepdims=True)
    o = np.einsum("hqk,khd->qhd", a, v).reshape(T, d)
    return lin(o, t, pre + "linear_out", use_bias)


def conv_module(x, t, pre, k, use_bias):
    T, d = x.shape
    y = lin(x, t, pre + "pointwise1", use_bias)                     # [T, 2d]
    y = y[:, :d] * sigmoid(y[:, d:])                                # GLU
    w = t[pre + "depthwise.weight"][:, 0, :]                         # [d, k]
    pad = (k - 1) // 2
    yp = np.pad(y, ((pad, pad), (0, 0)))
    z = np.zeros_like(y)
    for j in range(k):
        z += yp[j:j + T] * w[:, j]
    if use_bias:
        z += t[pre + "depthwise.bias"]
    s = t[pre + "bn.weight"] / np.sqrt(t[pre + "bn.running_var"] + 1e-5)
    z = z * s + (t[pre + "bn.bias"] - t[pre + "bn.running_mean"] * s)
    return lin(silu(z), t, pre + "pointwise2", use_bias)


def encoder(mel, kv, t):
    """mel [T_mel, F] -> encoder output [T_enc, d], no masking (spec 1.5-1.6)."""
    e = "stt.parakeet.encoder."
    d, H, k = kv[e + "d_model"], kv[e + "n_heads"], kv[e + "conv_kernel"]
    ub = bool(kv.get(e + "use_bias", False))
    x = np.asarray(mel, dtype=np.float64)[None]                     # [1, H=time, W=freq]
    p = "enc.pre_encode."
    x = np.maximum(conv2d_s2(x, t[p + "conv.0.weight"], t[p + "conv.0.bias"], 1), 0)
    for a, b in ((2, 3), (5, 6)):
        x = conv2d_s2(x, t[p + f"conv.{a}.weight"], t[p + f"conv.{a}.bias"], x.shape[0])
        x = np.einsum("oc,chw->ohw", t[p + f"conv.{b}.weight"][:, :, 0, 0], x) + t[p + f"conv.{b}.bias"][:, None, None]
        x = np.maximum(x, 0)
    C, T, F1 = x.shape
    x = x.transpose(1, 0, 2).reshape(T, C * F1)                     # channel-major flatten
    x = x @ t[p + "out.weight"].T + t[p + "out.bias"]
    if kv.get(e + "xscaling", False):
        x = x * math.sqrt(d)
    pe = rel_pos_emb(T, d)
    for i in range(kv[e + "n_layers"]):
        b = f"enc.blocks.{i}."
        h = layer_norm(x, t[b + "norm_ff1.weight"], t[b + "norm_ff1.bias"])
        x = x + 0.5 * lin(silu(lin(h, t, b + "ff1.linear1", ub)), t, b + "ff1.linear2", ub)
        h = layer_norm(x, t[b + "norm_attn.weight"], t[b + "norm_attn.bias"])
        x = x + attention(h, t, b + "attn.", H, ub, pe)
        h = layer_norm(x, t[b + "norm_conv.weight"], t[b + "norm_conv.bias"])
        x = x + conv_module(h, t, b + "conv.", k, ub)
        h = layer_norm(x, t[b + "norm_ff2.weight"], t[b + "norm_ff2.bias"])
        x = x + 0.5 * lin(silu(lin(h, t, b + "ff2.linear1", ub)), t, b + "ff2.linear2", ub)
        x = layer_norm(x, t[b + "norm_out.weight"], t[b + "norm_out.bias"])
    return x


# ---------------------------------------------------------------------------
# Decoders (1.9)
# ---------------------------------------------------------------------------

def argmax_lowest(v):
    return int(np.argmax(v))   # numpy returns the first (lowest) index on ties


def ctc_logits(enc, t):
    return enc @ t["head.ctc.weight"][:, :, 0].T + t["head.ctc.bias"]


def ctc_greedy(logits):
    """(tokens, start frames): argmax per frame, collapse runs, drop blank = V-1."""
    blank = logits.shape[1] - 1
    toks, frames, prev = [], [], -1
    for f, row in enumerate(logits):
        c = argmax_lowest(row)
        if c != prev and c != blank:
            toks.append(c)
            frames.append(f)
        prev = c
    return toks, frames


class Predictor:
    def __init__(self, kv, t):
        self.t = t
        self.L = kv["stt.parakeet.predictor.n_layers"]
        self.Hp = kv["stt.parakeet.predictor.hidden"]

    def step(self, token, state):
        """Run the LSTM stack on one input; token None = the zero start vector."""
        Hp = self.Hp
        inp = np.zeros(Hp) if token is None else self.t["pred.embed.weight"][token].astype(np.float64)
        new = []
        for l in range(self.L):
            h, c = state[l]
            g = self.t[f"pred.lstm.{l}.Wx"] @ inp + self.t[f"pred.lstm.{l}.Wh"] @ h + self.t[f"pred.lstm.{l}.bias"]
            i, f, gg, o = sigmoid(g[:Hp]), sigmoid(g[Hp:2 * Hp]), np.tanh(g[2 * Hp:3 * Hp]), sigmoid(g[3 * Hp:])
            c = f * c + i * gg
            h = o * np.tanh(c)
            new.append((h, c))
            inp = h
        return inp, new


def joint_enc(enc, t):
    return enc @ t["joint.enc.weight"].T + t["joint.enc.bias"]


def joint(e, p_out, t, act):
    z = e + p_out @ t["joint.pred.weight"].T + t["joint.pred.bias"]
    z = {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh, "sigmoid": sigmoid}[act](z)
    return z @ t["joint.out.weight"].T + t["joint.out.bias"]


def tdt_greedy(enc_proj, kv, t):
    """Spec 1.9 TDT greedy. Returns tokens, start frames, durations and the
    (frame, logits) of every step."""
    V = kv["stt.parakeet.predictor.vocab"]
    durs = list(kv["stt.parakeet.tdt.durations"])
    max_sym = kv.get("stt.parakeet.tdt.max_symbols", 10)
    act = kv["stt.parakeet.joint.activation"]
    pred = Predictor(kv, t)
    zero = [(np.zeros(pred.Hp), np.zeros(pred.Hp)) for _ in range(pred.L)]
    p_out, p_state = pred.step(None, zero)
    T = enc_proj.shape[0]
    step, nsym = 0, 0
    toks, frames, dlist, steps = [], [], [], []
    for _ in range(16 * T + 1024):
        if step >= T:
            break
        lg = joint(enc_proj[step], p_out, t, act)
        steps.append((step, lg))
        tok = argmax_lowest(lg[:V])
        dur = durs[argmax_lowest(lg[V:])]
        if tok != V - 1:
            toks.append(tok)
            frames.append(step)
            dlist.append(dur)
            p_out, p_state = pred.step(tok, p_state)
        step += dur
        nsym += 1
        if dur != 0:
            nsym = 0
        elif nsym >= max_sym:
            step += 1
            nsym = 0
    else:
        raise RuntimeError("TDT greedy did not finish")
    return toks, frames, dlist, steps


def detokenize(ids, kv, keep_control=False):
    """Spec 0.3 + 1.10: SentencePiece pieces to text."""
    pieces = kv["tokenizer.ggml.tokens"]
    types = kv.get("tokenizer.ggml.token_type")
    out = bytearray()
    for i in ids:
        if not 0 <= i < len(pieces):
            continue
        if types is not None and types[i] == 3 and not keep_control:
            continue
        p = pieces[i]
        if len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            out.append(int(p[3:5], 16))
        else:
            out += p.replace("\u2581", " ").encode("utf-8")
    return " ".join(out.decode("utf-8", errors="replace").split())
