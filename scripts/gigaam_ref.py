#!/usr/bin/env python3
"""GigaAM v3 reference fixtures: tiny random-init models of all four published
variants (CTC, RNN-T, e2e CTC, e2e RNN-T), written as GGUF files in
transcribe.cpp's layout (shared/spec/gguf-conformer-families.md §2.2, §2.3),
and the numbers a plain torch model computes with them (.ref.gguf).

The torch model here is written from GigaAM's published description (its
PyTorch package, salute-developers/GigaAM: gigaam/{preprocess,encoder,decoder,
decoding}.py) and the spec, not imported from it:
  * log-mel: torchaudio's MelSpectrogram as GigaAM v3 configures it (n_fft =
    win = 320, hop 160, periodic Hann, center=False, power 2, HTK mel filters
    without area normalisation, 0 .. 8 kHz), then ln(clamp(x, 1e-9, 1e9));
  * pre_encode: Conv1d(F → d, k, stride 2, pad (k−1)/2) + ReLU, twice;
  * Conformer blocks: ½FFN, rotary MHSA (the rotation on the LayerNorm-ed input
    before the q and k projections; v from the unrotated input; rotary base =
    pos_emb_max_len = 5000, tables in float32 as GigaAM builds them), conv
    module with a LayerNorm after the depthwise conv, ½FFN, LayerNorm;
  * CTC head (a 1×1 conv), or an RNN-T head (embedding with the blank row zero,
    one LSTM layer, joint = Linear(ReLU(enc + pred))); greedy decoding as
    GigaAM's: CTC argmax, repeats collapsed, blank dropped, each token at the
    first frame of its run; RNN-T from a zero input and zero state, at most
    max_symbols (10) tokens per frame;
  * text: pieces concatenated (SentencePiece: "▁" → space), one leading space
    removed (transcribe.cpp's rule, spec §2.7).

Weights are random (fixed seeds); the heads are then tuned so that greedy
decoding emits tokens on both clips and no decision is near a tie (every
best-minus-second logit gap ≥ MIN_MARGIN). The clips are the Parakeet
fixtures' `speech` (espeak-ng) and `synth` clips, read from
tests/fixtures/parakeet_ctc_tiny.ref.gguf.

Usage: python scripts/gigaam_ref.py [--kinds ctc,rnnt,e2e_ctc,e2e_rnnt] [--out tests/fixtures]
"""
import argparse
import math
from pathlib import Path

import gguf
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
MIN_MARGIN = 0.02
MAX_SYMBOLS = 10
VERBOSE = False

# The char vocabulary of GigaAM v3 (ctc, rnnt): a space, then а … я without ё.
CHARS = [" "] + [chr(c) for c in range(ord("а"), ord("я") + 1)]
# A small SentencePiece-style vocabulary with casing and punctuation (e2e).
PIECES = ["<unk>", "▁", "▁при", "вет", "▁мир", "▁как", "▁дела", ",", ".", "?", "!", "▁А", "▁Б",
          "▁В", "Я", "а", "е", "о", "и", "н", "т", "с", "р", "в", "л", "к", "м", "д", "п", "у",
          "▁не", "▁и", "ся", "ть", "ой", "ом", "▁по", "ый", "ет", "ки"]

VARIANTS = {
    # name: seed, head, tokenizer, d, layers, heads, ff, conv kernel, subsampling kernel,
    # predictor / joint widths (RNN-T)
    "ctc": dict(seed=4101, head="ctc", tok="char", d=48, layers=2, heads=4, ff=192, k=5, sk=5),
    "rnnt": dict(seed=4102, head="rnnt", tok="char", d=32, layers=2, heads=2, ff=128, k=5, sk=5,
                 pred=24, joint=20),
    "e2e_ctc": dict(seed=4103, head="ctc", tok="bpe", d=64, layers=2, heads=4, ff=128, k=3, sk=3),
    "e2e_rnnt": dict(seed=4104, head="rnnt", tok="bpe", d=40, layers=2, heads=2, ff=160, k=5, sk=5,
                     pred=32, joint=24),
}
# Not written by default: the published widths (d 768, 16 heads of 48, ff 3072,
# predictor and joint 320, 1024 pieces) in 2 layers, for a parity check at the
# real shapes (about 60 MB: not committed). --kinds wide --out DIR.
VARIANTS["wide"] = dict(seed=4105, head="rnnt", tok="wide", d=768, layers=2, heads=16, ff=3072,
                        k=5, sk=5, pred=320, joint=320)
DEFAULT_KINDS = "ctc,rnnt,e2e_ctc,e2e_rnnt"
SLUG = {"wide": "gigaam-v3-e2e-rnnt", "ctc": "gigaam-v3-ctc", "rnnt": "gigaam-v3-rnnt", "e2e_ctc": "gigaam-v3-e2e-ctc",
        "e2e_rnnt": "gigaam-v3-e2e-rnnt"}

SR, N_FFT, HOP, MELS, ROPE_BASE = 16000, 320, 160, 64, 5000


# ---------------------------------------------------------------- frontend

def htk_filterbank(n_freqs: int, f_min: float, f_max: float, n_mels: int) -> torch.Tensor:
    """Triangular filters equally spaced on the HTK mel scale, peak 1 (no area
    normalisation), over the FFT bins 0 .. SR/2: [n_freqs, n_mels] float32."""
    def to_mel(f):
        return 2595.0 * math.log10(1.0 + f / 700.0)
    bins = torch.linspace(0, SR // 2, n_freqs)
    mels = torch.linspace(to_mel(f_min), to_mel(f_max), n_mels + 2)
    hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
    width = hz[1:] - hz[:-1]
    rel = hz.unsqueeze(0) - bins.unsqueeze(1)  # [n_freqs, n_mels + 2]
    rising = -rel[:, :-2] / width[:-1]
    falling = rel[:, 2:] / width[1:]
    return torch.clamp(torch.minimum(rising, falling), min=0.0)


def log_mel(pcm: np.ndarray, window: torch.Tensor, bank: torch.Tensor) -> torch.Tensor:
    """[T, MELS] float32, frame-major; T = (n − N_FFT) // HOP + 1."""
    x = torch.from_numpy(pcm.astype(np.float32))
    spec = torch.stft(x, n_fft=N_FFT, hop_length=HOP, win_length=N_FFT, window=window,
                      center=False, return_complex=True)
    power = spec.abs().pow(2.0)  # [bins, T]
    mel = torch.matmul(power.transpose(0, 1), bank)  # [T, MELS]
    return torch.log(mel.clamp(1e-9, 1e9))


# ---------------------------------------------------------------- encoder

def rope_tables(t: int, dh: int):
    inv = 1.0 / (ROPE_BASE ** (torch.arange(0, dh, 2).float() / dh))
    freqs = torch.outer(torch.arange(t).float(), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()  # [t, dh]


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [t, H, dh] rotated per head, split halves: [a·cos − b·sin, b·cos + a·sin]."""
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None, :] + turned * sin[:, None, :]


class FFN(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        return self.linear2(F.silu(self.linear1(x)))


class RotaryAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.linear_q, self.linear_k = nn.Linear(d, d), nn.Linear(d, d)
        self.linear_v, self.linear_out = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, y):  # y [t, d], already LayerNorm-ed
        t = y.shape[0]
        cos, sin = rope_tables(t, self.dh)
        yr = rotate(y.view(t, self.h, self.dh), cos, sin).reshape(t, -1)
        q = self.linear_q(yr).view(t, self.h, self.dh).transpose(0, 1)
        k = self.linear_k(yr).view(t, self.h, self.dh).transpose(0, 1)
        v = self.linear_v(y).view(t, self.h, self.dh).transpose(0, 1)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(self.dh), dim=-1)
        return self.linear_out((att @ v).transpose(0, 1).reshape(t, -1))


class ConvModule(nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.pointwise1 = nn.Conv1d(d, 2 * d, 1)
        self.depthwise = nn.Conv1d(d, d, k, padding=(k - 1) // 2, groups=d)
        self.ln = nn.LayerNorm(d)
        self.pointwise2 = nn.Conv1d(d, d, 1)

    def forward(self, x):  # [t, d]
        h = F.glu(self.pointwise1(x.T.unsqueeze(0)), dim=1)
        h = self.depthwise(h)[0].T
        h = F.silu(self.ln(h))
        return self.pointwise2(h.T.unsqueeze(0))[0].T


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d"]
        self.norm_ff1, self.norm_attn, self.norm_conv = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.norm_ff2, self.norm_out = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = FFN(d, c["ff"]), FFN(d, c["ff"])
        self.attn = RotaryAttention(d, c["heads"])
        self.conv = ConvModule(d, c["k"])

    def forward(self, x):
        x = x + 0.5 * self.ff1(self.norm_ff1(x))
        x = x + self.attn(self.norm_attn(x))
        x = x + self.conv(self.norm_conv(x))
        x = x + 0.5 * self.ff2(self.norm_ff2(x))
        return self.norm_out(x)


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, sk = c["d"], c["sk"]
        self.conv0 = nn.Conv1d(MELS, d, sk, stride=2, padding=(sk - 1) // 2)
        self.conv2 = nn.Conv1d(d, d, sk, stride=2, padding=(sk - 1) // 2)
        self.blocks = nn.ModuleList([Block(c) for _ in range(c["layers"])])

    def forward(self, mel):  # [T, MELS] → [t, d]
        x = F.relu(self.conv2(F.relu(self.conv0(mel.T.unsqueeze(0)))))[0].T
        for b in self.blocks:
            x = b(x)
        return x


# ---------------------------------------------------------------- heads and decoding

class RNNTHead(nn.Module):
    def __init__(self, c, classes):
        super().__init__()
        p, j = c["pred"], c["joint"]
        self.embed = nn.Embedding(classes, p, padding_idx=classes - 1)
        self.lstm = nn.LSTM(p, p, 1)
        self.enc, self.pred, self.out = nn.Linear(c["d"], j), nn.Linear(p, j), nn.Linear(j, classes)

    def predict(self, label, state):
        """One predictor step: a zero input and state before the first token."""
        x = torch.zeros(1, 1, self.lstm.hidden_size) if label is None else self.embed(
            torch.tensor([[label]]))
        g, state = self.lstm(x, state)
        return g[0, 0], state

    def joint(self, enc_proj_t, g):
        return self.out(F.relu(enc_proj_t + self.pred(g)))


def margin(row: torch.Tensor) -> float:
    top = torch.topk(row, 2).values
    return float(top[0] - top[1])


def ctc_greedy(logits: torch.Tensor):
    blank = logits.shape[1] - 1
    best = logits.argmax(dim=1).tolist()
    ids, frames = [], []
    for t, k in enumerate(best):
        if k != blank and (t == 0 or best[t - 1] != k):
            ids.append(k)
            frames.append(t)
    return ids, frames, min(margin(r) for r in logits)


def rnnt_greedy(head: RNNTHead, enc_proj: torch.Tensor):
    blank = head.out.out_features - 1
    ids, frames, steps, step_logits = [], [], [], []
    label, state, worst, capped = None, None, float("inf"), 0
    for t in range(enc_proj.shape[0]):
        for n in range(MAX_SYMBOLS):
            g, new = head.predict(label, state)
            logits = head.joint(enc_proj[t], g)
            step_logits.append(logits)
            steps.append(t)
            worst = min(worst, margin(logits))
            k = int(logits.argmax())
            if k == blank:
                break
            ids.append(k)
            frames.append(t)
            label, state = k, new
            capped += n == MAX_SYMBOLS - 1
    return ids, frames, worst, steps, torch.stack(step_logits), capped


def detokenize(vocab, ids):
    text = "".join(vocab[i] for i in ids).replace("▁", " ")
    return text[1:] if text.startswith(" ") else text


# ---------------------------------------------------------------- weights

def init_weights(model: nn.Module, gen: torch.Generator) -> None:
    """N(0, 1/fan_in) for linears and convs (2/fan_in before a ReLU), LayerNorms
    1 + N(0, 0.1²) and N(0, 0.1²), biases N(0, 0.1²), embeddings N(0, 1)."""
    for name, p in model.named_parameters():
        with torch.no_grad():
            if p.dim() == 1:
                base = 1.0 if (name.endswith("weight") and "norm" in name or ".ln." in name and
                               name.endswith("weight")) else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=gen))
            elif "embed" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                fan_in = p[0].numel()
                gain = 2.0 if "conv0" in name or "conv2" in name else 1.0
                p.copy_(torch.randn(p.shape, generator=gen) * math.sqrt(gain / fan_in))
    if isinstance(getattr(model, "embed", None), nn.Embedding):
        with torch.no_grad():
            model.embed.weight[-1].zero_()


def tune_ctc(conv: nn.Conv1d, encs, gen) -> None:
    """Centre and scale the head over the speech clip's frames (a random encoder
    gives nearly one vector everywhere), then put blank's bias where about half
    of the frames prefer a token."""
    e = encs[0]
    mean, std = e.mean(0), e.std(0) + 1e-3
    with torch.no_grad():
        w = torch.randn(conv.weight.shape[:2], generator=gen) * (3.0 / math.sqrt(e.shape[1]))
        w = w / std
        conv.weight.copy_(w.unsqueeze(-1))
        conv.bias.copy_(-(w @ mean))
        logits = e @ w.T + conv.bias
        gap = logits[:, :-1].max(1).values - logits[:, -1]
        conv.bias[-1] += float(torch.quantile(gap, 0.5))


def tune_rnnt(head: RNNTHead, encs, quantile: float, gen) -> None:
    e = encs[0]
    mean, std = e.mean(0), e.std(0) + 1e-3
    with torch.no_grad():
        w = torch.randn(head.enc.weight.shape, generator=gen) * (2.0 / math.sqrt(e.shape[1])) / std
        head.enc.weight.copy_(w)
        head.enc.bias.copy_(-(w @ mean))
        head.pred.weight.mul_(2.0)
        head.out.weight.mul_(4.0)
        head.out.bias.mul_(4.0)
        proj = e @ w.T + head.enc.bias
        g, _ = head.predict(None, None)
        logits = head.out(F.relu(proj + head.pred(g)))
        gap = logits[:, :-1].max(1).values - logits[:, -1]
        head.out.bias[-1] += float(torch.quantile(gap, quantile))


# ---------------------------------------------------------------- GGUF

def write_model(path: Path, name: str, c: dict, enc: Encoder, head, vocab, types, window, bank):
    w = gguf.GGUFWriter(str(path), "gigaam")
    K = "stt.gigaam."
    ctc = c["head"] == "ctc"
    V = len(vocab)
    w.add_string("general.name", f"steno tiny {name}")
    w.add_string("general.basename", "gigaam-v3")
    w.add_string("general.version", "v3")
    w.add_string("stt.variant", SLUG[name])
    w.add_array("general.languages", ["ru"])
    w.add_string(K + "head_kind", c["head"])
    for key, val in [("n_layers", c["layers"]), ("d_model", c["d"]), ("n_heads", c["heads"]),
                     ("d_ff", c["ff"]), ("conv_kernel", c["k"]), ("subsampling_factor", 4),
                     ("subs_kernel_size", c["sk"]), ("pos_emb_max_len", ROPE_BASE), ("feat_in", MELS)]:
        w.add_uint32(K + "encoder." + key, val)
    w.add_string(K + "encoder.self_attention_model", "rotary")
    w.add_string(K + "encoder.conv_norm_type", "layer_norm")
    if ctc:
        w.add_uint32(K + "head.feat_in", c["d"])
        w.add_uint32(K + "head.num_classes", V)
    else:
        w.add_uint32(K + "predictor.hidden", c["pred"])
        w.add_uint32(K + "predictor.n_layers", 1)
        w.add_uint32(K + "predictor.vocab", V)
        w.add_uint32(K + "joint.hidden", c["joint"])
        w.add_uint32(K + "joint.num_classes", V)
        w.add_string(K + "joint.activation", "relu")
    fe = "stt.frontend."
    w.add_string(fe + "type", "mel")
    for key, val in [("num_mels", MELS), ("sample_rate", SR), ("n_fft", N_FFT), ("win_length", N_FFT),
                     ("hop_length", HOP)]:
        w.add_uint32(fe + key, val)
    w.add_string(fe + "window", "hann_periodic")
    w.add_string(fe + "normalize", "none")
    for key, val in [("dither", 0.0), ("pre_emphasis", 0.0), ("f_min", 0.0), ("f_max", 8000.0),
                     ("log_clamp_min", 1e-9), ("log_clamp_max", 1e9)]:
        w.add_float32(fe + key, val)
    w.add_bool(fe + "center", False)
    w.add_string(fe + "mel_norm", "htk")
    w.add_string("tokenizer.ggml.model", "char" if c["tok"] == "char" else "bpe")
    w.add_uint32("tokenizer.ggml.blank_token_id", V - 1)
    w.add_array("tokenizer.ggml.tokens", vocab)
    w.add_array("tokenizer.ggml.scores", [0.0 if c["tok"] == "char" or i == V - 1 else -float(i)
                                          for i in range(V)])
    w.add_array("tokenizer.ggml.token_type", types)

    def t(name_, x):
        w.add_tensor(name_, x.detach().numpy().astype(np.float32))

    t("frontend.mel_filterbank", bank.T.contiguous())
    t("frontend.window", window)
    t("enc.pre_encode.conv.0.weight", enc.conv0.weight)
    t("enc.pre_encode.conv.0.bias", enc.conv0.bias)
    t("enc.pre_encode.conv.2.weight", enc.conv2.weight)
    t("enc.pre_encode.conv.2.bias", enc.conv2.bias)
    for i, b in enumerate(enc.blocks):
        p = f"enc.blocks.{i}."
        for n in ["norm_ff1", "norm_conv", "norm_attn", "norm_ff2", "norm_out"]:
            t(p + n + ".weight", getattr(b, n).weight)
            t(p + n + ".bias", getattr(b, n).bias)
        for f in ["ff1", "ff2"]:
            for l in ["linear1", "linear2"]:
                t(f"{p}{f}.{l}.weight", getattr(getattr(b, f), l).weight)
                t(f"{p}{f}.{l}.bias", getattr(getattr(b, f), l).bias)
        for n in ["pointwise1", "depthwise", "ln", "pointwise2"]:
            t(f"{p}conv.{n}.weight", getattr(b.conv, n).weight)
            t(f"{p}conv.{n}.bias", getattr(b.conv, n).bias)
        for n in ["q", "k", "v", "out"]:
            t(f"{p}attn.linear_{n}.weight", getattr(b.attn, "linear_" + n).weight)
            t(f"{p}attn.linear_{n}.bias", getattr(b.attn, "linear_" + n).bias)
    if ctc:
        t("head.ctc.weight", head.weight)
        t("head.ctc.bias", head.bias)
    else:
        # The blank row is the padding row GigaAM never reads (a zero input
        # starts the predictor): written random here, so a reader that fed it
        # would decode differently.
        embed = head.embed.weight.detach().clone()
        embed[-1] = torch.randn(embed.shape[1], generator=torch.Generator().manual_seed(c["seed"] + 2))
        t("pred.embed.weight", embed)
        t("pred.lstm.0.Wx", head.lstm.weight_ih_l0)
        t("pred.lstm.0.Wh", head.lstm.weight_hh_l0)
        t("pred.lstm.0.bias", head.lstm.bias_ih_l0 + head.lstm.bias_hh_l0)
        for n in ["enc", "pred", "out"]:
            t(f"joint.{n}.weight", getattr(head, n).weight)
            t(f"joint.{n}.bias", getattr(head, n).bias)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_ref(path: Path, model_file: str, head_kind: str, clips: dict, refs: dict):
    w = gguf.GGUFWriter(str(path), "steno-ref")
    w.add_string("ref.model", model_file)
    w.add_string("ref.head_kind", head_kind)
    w.add_string("ref.source", f"scripts/gigaam_ref.py, torch {torch.__version__}")
    w.add_array("ref.clips", list(clips))
    for name, pcm in clips.items():
        r = refs[name]
        k = f"ref.{name}."
        w.add_uint32(k + "n_samples", len(pcm))
        w.add_uint32(k + "n_frames", r["mel"].shape[0])
        w.add_uint32(k + "t_enc", r["encoder_out"].shape[0])
        w.add_array(k + "tokens", r["tokens"])  # never empty: the tuning asserts it
        w.add_array(k + "token_frames", r["frames"])
        w.add_string(k + "text", r["text"])
        w.add_float32(k + "min_margin", r["margin"])
        if "steps" in r:
            w.add_array(k + "step_frames", r["steps"])
        w.add_tensor(name + ".pcm", pcm.astype(np.float32))
        for key in ["mel", "encoder_out", "logits", "enc_proj", "step_logits"]:
            if key in r:
                w.add_tensor(f"{name}.{key}", r[key].detach().numpy().astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_clips() -> dict:
    r = gguf.GGUFReader(str(ROOT / "tests/fixtures/parakeet_ctc_tiny.ref.gguf"))
    tensors = {t.name: np.array(t.data, dtype=np.float32) for t in r.tensors}
    return {c: tensors[c + ".pcm"] for c in ["speech", "synth"]}


def vocabulary(tok: str):
    if tok == "wide":
        vocab = PIECES + [f"▁w{i}" for i in range(1024 - len(PIECES))] + ["<blank>"]
        types = [2] + [1] * (len(vocab) - 2) + [3]
        return vocab, types
    if tok == "char":
        vocab = CHARS + ["<blank>"]
        types = [1] * len(CHARS) + [3]
    else:
        vocab = PIECES + ["<blank>"]
        types = [2] + [1] * (len(PIECES) - 1) + [3]
    return vocab, types


def run_variant(name: str, out: Path, clips: dict) -> None:
    c = VARIANTS[name]
    vocab, types = vocabulary(c["tok"])
    V = len(vocab)
    torch.manual_seed(c["seed"])
    gen = torch.Generator().manual_seed(c["seed"])
    window = torch.hann_window(N_FFT, periodic=True)
    bank = htk_filterbank(N_FFT // 2 + 1, 0.0, 8000.0, MELS)
    enc = Encoder(c).eval()
    init_weights(enc, gen)
    head = nn.Conv1d(c["d"], V, 1) if c["head"] == "ctc" else RNNTHead(c, V)
    init_weights(head, gen)
    tune = torch.Generator().manual_seed(c["seed"] + 1)
    with torch.no_grad():
        mels = {k: log_mel(p, window, bank) for k, p in clips.items()}
        encs = {k: enc(m) for k, m in mels.items()}
        order = [encs["speech"], encs["synth"]]
        start = {k: v.clone() for k, v in head.state_dict().items()}
        for attempt in range(40):
            head.load_state_dict(start)
            refs = {}
            if c["head"] == "ctc":
                tune_ctc(head, order, tune)
            else:
                tune_rnnt(head, order, [0.97, 0.95, 0.9, 0.85][attempt % 4], tune)
            ok, capped = True, 0
            for k in clips:
                e = encs[k]
                r = {"mel": mels[k], "encoder_out": e}
                if c["head"] == "ctc":
                    logits = e @ head.weight[:, :, 0].T + head.bias
                    ids, frames, m = ctc_greedy(logits)
                    r["logits"] = logits
                else:
                    proj = head.enc(e)
                    ids, frames, m, steps, sl, cap = rnnt_greedy(head, proj)
                    capped += cap
                    r.update(enc_proj=proj, step_logits=sl, steps=steps)
                r.update(tokens=ids, frames=frames, margin=m, text=detokenize(vocab, ids))
                ok &= m >= MIN_MARGIN and len(ids) >= 3 and len(set(ids)) >= 2
                if VERBOSE:
                    print(attempt, k, len(ids), m)
                refs[k] = r
            if ok:
                break
        else:
            raise SystemExit(f"{name}: no tuning gave margins ≥ {MIN_MARGIN}")
    model_file = f"gigaam_{name}_tiny.gguf"
    write_model(out / model_file, name, c, enc, head, vocab, types, window, bank)
    write_ref(out / f"gigaam_{name}_tiny.ref.gguf", model_file, c["head"], clips, refs)
    for k, r in refs.items():
        print(f"{name} {k}: T_mel {r['mel'].shape[0]}, T_enc {r['encoder_out'].shape[0]}, "
              f"{len(r['tokens'])} tokens, margin {r['margin']:.3f}, attempt {attempt}"
              + (f", {capped} cap hits" if c["head"] == "rnnt" else "") + f": '{r['text']}'")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kinds", default=DEFAULT_KINDS)
    ap.add_argument("--out", default=str(ROOT / "tests/fixtures"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    clips = read_clips()
    for name in a.kinds.split(","):
        run_variant(name, Path(a.out), clips)


if __name__ == "__main__":
    main()
