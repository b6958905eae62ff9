#!/usr/bin/env python3
"""A tiny random-init streaming Sortformer (NeMo's SortformerEncLabelModel, the
"diar_streaming_sortformer_4spk-v2.1" architecture) written out in transcribe.cpp's
GGUF layout, with the reference numbers the C engine's parity test compares against.

    python scripts/sortformer_ref.py        # writes tests/fixtures/sortformer_tiny{,.ref}.gguf
    python scripts/sortformer_ref.py --real-shape build/sortformer_real   # the published shapes,
                                            # random weights, F32 (471 MB; timing and load checks)

Written from the spec (shared/spec/gguf-conformer-families.md section 4) and NeMo's public
SortformerModules (streaming_feat_loader, streaming_update, _compress_spkcache and its
helpers), read to learn, not copied:
  * mel: the Parakeet frontend (pre-emphasis 0.97, zero padding, symmetric Hann 400 in 512,
    Slaney filters, ln(x + 2^-24)), normalize "none", ceil(n/hop) frames of which those
    with index >= floor(n/hop) are zero;
  * the FastConformer is transformers' ParakeetEncoder (the same math as spec 1.5-1.7, the
    one steno's Parakeet matches): its subsampling gives the embeddings the speaker cache
    keeps; xscaling (sqrt d) and the blocks run over [cache | fifo | chunk];
  * encoder_proj, post-LN transformer blocks (q and k each scaled by dh^-1/4), the head
    sigmoid(W2 relu(W1 relu(x) + b1) + b2);
  * the synchronous streaming update with the speaker cache compression (AOSC). Top-k ties
    go to the lower index (a stable sort), as the spec says.

The weights are random, so the "speakers" mean nothing; the head's bias and scale are set
so that the predictions cross 0.5 often, which makes the cache compression keep and drop
frames for real. Every decision the streaming makes (p > 0.5, the silence sum < 0.2, the
top-k boundaries) is checked to sit at least MARGIN away from its threshold, so that f32
rounding on another machine cannot flip it.
Needs torch, transformers (ParakeetEncoder), numpy, gguf, espeak-ng and sox.
"""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import convert_parakeet as conv  # noqa: E402

import gguf  # noqa: E402
from gguf import GGUFValueType as VT  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SR, HOP, N_FFT, WIN = 16000, 160, 512, 400
PRE_EMPH = 0.97
MARGIN = 1e-3

# Shapes: the real model is 128 mels, C 256, d 512 x 17 blocks (8 heads), transformer
# 192 x 18 (8 heads), 4 speakers, chunk 188, cache 188, fifo 0, period 188.
TINY = dict(seed=4242, mels=32, channels=8, d=32, heads=4, ff=64, kernel=9, layers=2,
            tf_d=16, tf_heads=2, tf_ff=32, tf_layers=2, spk=4,
            chunk=6, cache=24, fifo=4, period=5)
LC, RC = 1, 1  # chunk context in 80 ms frames (NeMo's defaults; not stored in the file)
SIL_PER_SPK, PRED_FLOOR, BOOST_LATEST, SIL_THRESHOLD = 3, 0.25, 0.05, 0.2
STRONG_RATE, WEAK_RATE, MIN_POS_RATE = 0.75, 1.5, 0.5


# ---------------------------------------------------------------------------
# Clip: two espeak-ng voices, one after the other, overlapping, then apart again
# ---------------------------------------------------------------------------

LINES = [("en-us", 0.0, "good morning, this is the first speaker talking"),
         ("en-us+f3", 2.6, "and here a second voice answers the first one"),
         ("en-us", 4.9, "both of them speak at once for a moment"),
         ("en-us+f3", 7.4, "then the second speaker ends it")]


def espeak(voice: str, text: str, work: Path) -> np.ndarray:
    raw, wav = work / "raw.wav", work / "16k.wav"
    subprocess.run(["espeak-ng", "-v", voice, "-s", "170", "-w", str(raw), text], check=True)
    subprocess.run(["sox", "-D", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(wav)], check=True)
    with wave.open(str(wav)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def make_clip() -> tuple[np.ndarray, str]:
    with tempfile.TemporaryDirectory() as tmp:
        parts = [(int(t0 * SR), espeak(v, text, Path(tmp))) for v, t0, text in LINES]
    n = max(s + len(p) for s, p in parts) + SR // 4 + 77  # n % 160 != 0: a zero last frame
    x = np.zeros(n, np.float32)
    for s, p in parts:
        x[s:s + len(p)] += 0.6 * p
    desc = ("espeak-ng 1.51 -s 170, voices en-us and en-us+f3 at " +
            ", ".join(f"{t0} s" for _, t0, _ in LINES) + " (overlapping), sox -D to 16 kHz, x0.6, summed")
    return x, desc


# ---------------------------------------------------------------------------
# Frontend (spec 1.4 with section 4.3's framing)
# ---------------------------------------------------------------------------

def slaney_filters(n_mels: int, fmin=0.0, fmax=8000.0) -> np.ndarray:
    """librosa.filters.mel(htk=False, norm='slaney') in float64: [n_mels, n_fft/2 + 1]."""
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, math.log(6.4) / 27.0

    def hz_to_mel(f):
        f = np.asarray(f, np.float64)
        return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-10) / min_log_hz) / logstep,
                        f / f_sp)

    def mel_to_hz(m):
        return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)

    fft_f = np.linspace(0, SR / 2, N_FFT // 2 + 1)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_f[None, :]
    w = np.zeros((n_mels, len(fft_f)))
    for i in range(n_mels):
        w[i] = np.maximum(0, np.minimum(-ramps[i] / fdiff[i], ramps[i + 2] / fdiff[i + 1]))
    return w * (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]


def log_mel(pcm: np.ndarray, n_mels: int) -> np.ndarray:
    """[ceil(n/hop), n_mels], float64 inside, frames >= floor(n/hop) zero."""
    x = np.asarray(pcm, np.float64)
    x = np.concatenate([x[:1], x[1:] - PRE_EMPH * x[:-1]])
    xp = np.pad(x, (N_FFT // 2, N_FFT // 2))
    n_frames = -(-len(x) // HOP)
    k = np.arange(WIN)
    wpad = np.zeros(N_FFT)
    wpad[(N_FFT - WIN) // 2:(N_FFT - WIN) // 2 + WIN] = 0.5 - 0.5 * np.cos(2 * np.pi * k / (WIN - 1))
    idx = np.arange(n_frames)[:, None] * HOP + np.arange(N_FFT)[None, :]
    spec = np.abs(np.fft.rfft(xp[idx] * wpad, axis=1)) ** 2
    mel = np.log(spec @ slaney_filters(n_mels).T + 2.0 ** -24)
    mel[len(x) // HOP:] = 0.0
    return mel.astype(np.float32)


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------

def build_encoder(c: dict):
    from transformers import ParakeetEncoder, ParakeetEncoderConfig
    cfg = ParakeetEncoderConfig(hidden_size=c["d"], num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                                intermediate_size=c["ff"], conv_kernel_size=c["kernel"],
                                subsampling_conv_channels=c["channels"], num_mel_bins=c["mels"],
                                attention_bias=True, convolution_bias=True, scale_input=True,
                                dropout=0.0, dropout_positions=0.0, layerdrop=0.0, activation_dropout=0.0,
                                attention_dropout=0.0)
    return ParakeetEncoder(cfg).eval()


def init_params(named, g: torch.Generator) -> None:
    """Weights N(0, 1/fan_in) (He gain in the ReLU subsampling), norm affines near (1, 0),
    BatchNorm statistics away from (0, 1), position biases N(0, 0.3^2)."""
    n = lambda shape, std: torch.randn(shape, generator=g) * std  # noqa: E731
    with torch.no_grad():
        for name, p in named:
            if ("norm" in name) and name.endswith("weight") and p.dim() == 1:
                p.copy_(1.0 + n(p.shape, 0.1))
            elif name.endswith(("bias_u", "bias_v")):
                p.copy_(n(p.shape, 0.3))
            elif name.endswith("running_mean"):
                p.copy_(n(p.shape, 0.2))
            elif name.endswith("running_var"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif p.dim() >= 2:
                gain = 2.0 if name.startswith("subsampling.") else 1.0
                p.copy_(n(p.shape, gain / math.sqrt(int(np.prod(p.shape[1:])))))
            elif not name.endswith("num_batches_tracked"):
                p.copy_(n(p.shape, 0.1))


def make_diar(c: dict, g: torch.Generator) -> dict:
    """encoder_proj, the transformer blocks and the head as plain tensors (PyTorch order)."""
    def lin(o, i):
        return [torch.randn(o, i, generator=g) / math.sqrt(i), torch.randn(o, generator=g) * 0.1]

    def ln(n):
        return [1.0 + torch.randn(n, generator=g) * 0.1, torch.randn(n, generator=g) * 0.1]

    D, F = c["tf_d"], c["tf_ff"]
    p = {"encoder_proj": lin(D, c["d"]), "fc1": lin(D, D), "single_spk_head": lin(c["spk"], D),
         "spk_head": lin(c["spk"], 2 * D), "tf": []}
    for _ in range(c["tf_layers"]):
        p["tf"].append(dict(q=lin(D, D), k=lin(D, D), v=lin(D, D), out=lin(D, D), norm_1=ln(D),
                            ff_in=lin(F, D), ff_out=lin(D, F), norm_2=ln(D)))
    return p


def post_ln_block(x: torch.Tensor, b: dict, heads: int) -> torch.Tensor:
    """x = LN1(x + Wo MHA(x)); x = LN2(x + FFN(x)); q and k each times dh^-1/4 (NeMo)."""
    T, D = x.shape
    dh = D // heads
    s = 1.0 / math.sqrt(math.sqrt(dh))
    f = torch.nn.functional
    q = (f.linear(x, *b["q"]) * s).view(T, heads, dh).transpose(0, 1)
    k = (f.linear(x, *b["k"]) * s).view(T, heads, dh).transpose(0, 1)
    v = f.linear(x, *b["v"]).view(T, heads, dh).transpose(0, 1)
    a = torch.softmax(q @ k.transpose(1, 2), dim=-1) @ v
    x = f.layer_norm(x + f.linear(a.transpose(0, 1).reshape(T, D), *b["out"]), (D,), *b["norm_1"], eps=1e-5)
    h = f.linear(torch.relu(f.linear(x, *b["ff_in"])), *b["ff_out"])
    return f.layer_norm(x + h, (D,), *b["norm_2"], eps=1e-5)


@torch.no_grad()
def forward(enc, diar: dict, c: dict, embs: torch.Tensor):
    """[cache | fifo | chunk] pre-encode embeddings [T, d] -> (encoder out [T, d], preds [T, spk])."""
    x = embs[None] * enc.input_scale
    pos = enc.encode_positions(x)
    for layer in enc.layers:
        x = layer(x, position_embeddings=pos)
    e = x[0]
    f = torch.nn.functional
    t = f.linear(e, *diar["encoder_proj"])
    for b in diar["tf"]:
        t = post_ln_block(t, b, c["tf_heads"])
    h = torch.relu(f.linear(torch.relu(t), *diar["fc1"]))
    return e, torch.sigmoid(f.linear(h, *diar["single_spk_head"]))


# ---------------------------------------------------------------------------
# Streaming (spec 4.5), in numpy float32 on the model's outputs
# ---------------------------------------------------------------------------

class Margins:
    """The closest any decision came to its threshold."""

    def __init__(self):
        self.worst, self.where = float("inf"), ""

    def see(self, gap: float, where: str) -> None:
        if gap < self.worst:
            self.worst, self.where = gap, where


def topk_stable(v: np.ndarray, k: int, margins: Margins, what: str) -> np.ndarray:
    """Indices of the k largest of v, ties to the lower index."""
    order = np.argsort(-v, kind="stable")
    if k < len(v):
        a, b = v[order[k - 1]], v[order[k]]
        if np.isfinite(a) and np.isfinite(b) and a != b:
            margins.see(float(a - b), what)
    return order[:k]


def compress(embs, preds, sil_emb, c, margins: Margins):
    """Keeps c['cache'] frames of the n > cache candidates (spec 4.5 step 4)."""
    n, spk = preds.shape
    per_spk = c["cache"] // spk - SIL_PER_SPK
    strong, weak = math.floor(per_spk * STRONG_RATE), math.floor(per_spk * WEAK_RATE)
    min_pos = math.floor(per_spk * MIN_POS_RATE)
    floor = np.float32(PRED_FLOOR)
    lp = np.log(np.maximum(preds, floor))
    l1 = np.log(np.maximum(np.float32(1) - preds, floor))
    scores = (lp - l1 + l1.sum(axis=1, keepdims=True) - np.float32(math.log(0.5))).astype(np.float32)
    for v in preds.ravel():
        margins.see(abs(float(v) - 0.5), "compress p > 0.5")
    speech = preds > 0.5
    scores = np.where(speech, scores, -np.inf).astype(np.float32)
    pos = scores > 0
    for v in scores[np.isfinite(scores)]:
        margins.see(abs(float(v)), "compress score > 0")
    drop = ~pos & speech & (pos.sum(axis=0, keepdims=True) >= min_pos)
    scores = np.where(drop, -np.inf, scores).astype(np.float32)
    scores[c["cache"]:] += np.float32(BOOST_LATEST)
    for count, gain in ((strong, -2 * math.log(0.5)), (weak, -math.log(0.5))):
        for s in range(spk):
            if count > 0:
                top = topk_stable(scores[:, s], count, margins, "boost top-k")
                scores[top, s] += np.float32(gain)
    scores = np.concatenate([scores, np.full((SIL_PER_SPK, spk), np.inf, np.float32)])
    rows = scores.shape[0]
    flat = scores.T.ravel()
    picks = topk_stable(flat, c["cache"], margins, "cache top-k")
    sentinel = 1 << 30
    picks = np.sort(np.where(flat[picks] == -np.inf, sentinel, picks))
    frames = picks % rows
    off = (picks == sentinel) | (frames >= rows - SIL_PER_SPK)
    frames[off] = 0
    new_embs = np.where(off[:, None], sil_emb[None], embs[frames]).astype(np.float32)
    new_preds = np.where(off[:, None], np.float32(0), preds[frames]).astype(np.float32)
    return new_embs, new_preds


class Stream:
    def __init__(self, c: dict):
        self.c = c
        d, s = c["d"], c["spk"]
        self.cache = np.zeros((0, d), np.float32)
        self.cache_preds = np.zeros((0, s), np.float32)
        self.fifo = np.zeros((0, d), np.float32)
        self.fifo_preds = np.zeros((0, s), np.float32)
        self.sil_emb = np.zeros(d, np.float32)
        self.n_sil = 0
        self.compressed = False
        self.compressions = 0
        self.out = []

    def silence(self, embs, preds, margins: Margins):
        sums = preds.sum(axis=1)
        for v in sums:
            margins.see(abs(float(v) - SIL_THRESHOLD), "silence sum < 0.2")
        sil = sums < SIL_THRESHOLD
        if sil.any():
            total = self.sil_emb * np.float32(self.n_sil) + embs[sil].sum(axis=0)
            self.n_sil += int(sil.sum())
            self.sil_emb = (total / np.float32(self.n_sil)).astype(np.float32)

    def update(self, chunk, preds, lc, rc, margins: Margins):
        """chunk: this window's embeddings [lc + C + rc, d]; preds over [cache | fifo | window]."""
        c = self.c
        S, F = len(self.cache), len(self.fifo)
        C = len(chunk) - lc - rc
        self.fifo_preds = preds[S:S + F]
        chunk_preds = preds[S + F + lc:S + F + lc + C]
        self.fifo = np.concatenate([self.fifo, chunk[lc:lc + C]])
        self.fifo_preds = np.concatenate([self.fifo_preds, chunk_preds])
        if F + C > c["fifo"]:
            pop = min(max(c["period"], C - c["fifo"] + F), F + C)
            pe, pp = self.fifo[:pop], self.fifo_preds[:pop]
            self.silence(pe, pp, margins)
            self.fifo, self.fifo_preds = self.fifo[pop:], self.fifo_preds[pop:]
            old = self.cache_preds if self.compressed else preds[:S]
            self.cache = np.concatenate([self.cache, pe])
            self.cache_preds = np.concatenate([old, pp])
            if len(self.cache) > c["cache"]:
                self.cache, self.cache_preds = compress(self.cache, self.cache_preds, self.sil_emb, c, margins)
                self.compressed = True
                self.compressions += 1
        for v in chunk_preds.ravel():
            margins.see(abs(float(v) - 0.5), "output p > 0.5")
        self.out.append(chunk_preds)


def run_stream(enc, diar, c, mel: np.ndarray, margins: Margins):
    """NeMo's streaming_feat_loader + forward_streaming_step + streaming_update."""
    sub, T_mel = 8, mel.shape[0]
    st = Stream(c)
    chunks = []
    stt = end = 0
    while end < T_mel:
        left = min(LC * sub, stt)
        end = min(stt + c["chunk"] * sub, T_mel)
        right = min(RC * sub, T_mel - end)
        lc, rc = (left + sub // 2) // sub, (right + sub - 1) // sub
        with torch.no_grad():
            win = torch.from_numpy(mel[stt - left:end + right])[None]
            embs = enc.subsampling(win, None)[0].numpy().astype(np.float32)
        cat = np.concatenate([st.cache, st.fifo, embs])
        e, p = forward(enc, diar, c, torch.from_numpy(cat))
        p = p.numpy().astype(np.float32)
        chunks.append(dict(embs=embs, enc=e.numpy().astype(np.float32), preds=p,
                           meta=[len(st.cache), len(st.fifo), len(embs), lc, rc, stt - left, end + right,
                                 st.n_sil, st.compressions]))
        st.update(embs, p, lc, rc, margins)
        stt = end
    preds = np.concatenate(st.out)[: -(-T_mel // sub)]
    return chunks, preds, st.compressions, st.n_sil


def segments(preds: np.ndarray) -> list[tuple[int, int, int]]:
    """Runs of p > 0.5 per speaker: (start ms, end ms, speaker from 1), speaker by speaker."""
    out = []
    for s in range(preds.shape[1]):
        on = -1
        for t in range(preds.shape[0] + 1):
            act = t < preds.shape[0] and preds[t, s] > 0.5
            if act and on < 0:
                on = t
            elif not act and on >= 0:
                out.append((on * 80, t * 80, s + 1))
                on = -1
    return out


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

def tensor_plan(enc, diar: dict) -> list[tuple[str, np.ndarray]]:
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in enc.state_dict().items()}
    plan = []
    for i in (0, 2, 3, 5, 6):
        plan.append((f"enc.pre_encode.conv.{i}.weight", sd[f"subsampling.layers.{i}.weight"]))
        plan.append((f"enc.pre_encode.conv.{i}.bias", sd[f"subsampling.layers.{i}.bias"]))
    plan.append(("enc.pre_encode.out.weight", sd["subsampling.linear.weight"]))
    plan.append(("enc.pre_encode.out.bias", sd["subsampling.linear.bias"]))
    for b in range(len(enc.layers)):
        for dst, src in conv.BLOCK_TENSORS + conv.BLOCK_BIASES:
            plan.append((f"enc.blocks.{b}.{dst}", sd[f"layers.{b}.{src}"]))
    n = lambda t: t.detach().numpy().astype(np.float32)  # noqa: E731
    plan += [("diar.encoder_proj.weight", n(diar["encoder_proj"][0])),
             ("diar.encoder_proj.bias", n(diar["encoder_proj"][1]))]
    for i, b in enumerate(diar["tf"]):
        names = (("norm_1", "norm_1"), ("q", "attn.q"), ("k", "attn.k"), ("v", "attn.v"), ("out", "attn.out"),
                 ("norm_2", "norm_2"), ("ff_in", "ff.in"), ("ff_out", "ff.out"))
        for part, name in names:
            plan.append((f"tf.blocks.{i}.{name}.weight", n(b[part][0])))
            plan.append((f"tf.blocks.{i}.{name}.bias", n(b[part][1])))
    for h in ("fc1", "single_spk_head", "spk_head"):
        plan.append((f"diar.{h}.weight", n(diar[h][0])))
        plan.append((f"diar.{h}.bias", n(diar[h][1])))
    return plan


def write_model(path: Path, c: dict, plan) -> None:
    w = gguf.GGUFWriter(str(path), "sortformer")
    u32 = lambda k, v: w.add_key_value(k, int(v), VT.UINT32)  # noqa: E731
    f32 = lambda k, v: w.add_key_value(k, float(v), VT.FLOAT32)  # noqa: E731
    s = lambda k, v: w.add_key_value(k, str(v), VT.STRING)  # noqa: E731
    s("general.name", "sortformer-tiny (random weights, steno test fixture)")
    s("stt.variant", "diar_streaming_sortformer_4spk-v2.1")
    u32("general.file_type", 0)
    p = "stt.sortformer."
    u32(p + "max_speakers", c["spk"])
    u32(p + "frame_hop", HOP * 8)
    for k, v in (("n_layers", c["layers"]), ("d_model", c["d"]), ("n_heads", c["heads"]), ("d_ff", c["ff"]),
                 ("conv_kernel", c["kernel"]), ("subsampling_factor", 8),
                 ("subsampling_channels", c["channels"]), ("feat_in", c["mels"]), ("pos_emb_max_len", 5000)):
        u32(p + "encoder." + k, v)
    s(p + "encoder.conv_norm_type", "batch_norm")
    for k, v in (("n_layers", c["tf_layers"]), ("d_model", c["tf_d"]), ("n_heads", c["tf_heads"]),
                 ("d_ff", c["tf_ff"])):
        u32(p + "transformer." + k, v)
    s(p + "transformer.activation", "relu")
    w.add_key_value(p + "transformer.pre_ln", False, VT.BOOL)
    for k, v in (("chunk_len", c["chunk"]), ("spkcache_len", c["cache"]), ("fifo_len", c["fifo"]),
                 ("spkcache_update_period", c["period"])):
        u32(p + "stream." + k, v)
    for k, v in (("sample_rate", SR), ("num_mels", c["mels"]), ("n_fft", N_FFT), ("hop_length", HOP),
                 ("win_length", WIN)):
        u32("stt.frontend." + k, v)
    s("stt.frontend.window", "hann")
    s("stt.frontend.normalize", "none")
    f32("stt.frontend.pre_emphasis", PRE_EMPH)
    f32("stt.frontend.dither", 1e-5)
    for name, arr in plan:
        w.add_tensor(name, np.ascontiguousarray(arr, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_ref(path: Path, pcm, desc, mel, chunks, preds, segs, compressions, margins: Margins) -> None:
    w = gguf.GGUFWriter(str(path), "steno-ref")
    w.add_key_value("ref.source", "scripts/sortformer_ref.py: transformers " + __import__("transformers").__version__
                    + " ParakeetEncoder, torch " + torch.__version__, VT.STRING)
    w.add_key_value("ref.description", desc, VT.STRING)
    w.add_key_value("ref.chunks", len(chunks), VT.UINT32)
    w.add_key_value("ref.compressions", compressions, VT.UINT32)
    w.add_key_value("ref.margin", float(margins.worst), VT.FLOAT32)
    w.add_tensor("pcm", pcm.astype(np.float32))
    w.add_tensor("mel", mel)
    for i, ch in enumerate(chunks):
        w.add_key_value(f"ref.chunk.{i}.meta", [int(v) for v in ch["meta"]], VT.ARRAY, sub_type=VT.INT32)
        w.add_tensor(f"chunk.{i}.embs", ch["embs"])
        w.add_tensor(f"chunk.{i}.enc", ch["enc"])
        w.add_tensor(f"chunk.{i}.preds", ch["preds"])
    w.add_tensor("preds", preds)
    w.add_key_value("ref.segments", [int(v) for seg in segs for v in seg], VT.ARRAY, sub_type=VT.INT32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tune_head(enc, diar, c, mel) -> None:
    """Centres each speaker's head logit over the clip's first chunk-free pass (the whole
    clip as one window) at a different quantile, and scales it, so that the four columns
    switch on and off over the clip."""
    with torch.no_grad():
        embs = enc.subsampling(torch.from_numpy(mel)[None], None)[0]
        e, _ = forward(enc, diar, c, embs)
        f = torch.nn.functional
        t = f.linear(e, *diar["encoder_proj"])
        for b in diar["tf"]:
            t = post_ln_block(t, b, c["tf_heads"])
        h = torch.relu(f.linear(torch.relu(t), *diar["fc1"]))
        logit = f.linear(h, *diar["single_spk_head"])
        W, B = diar["single_spk_head"]
        std = logit.std(dim=0).clamp_min(1e-6)
        for s, q in enumerate((0.6, 0.7, 0.75, 0.85)[: c["spk"]]):
            scale = 3.0 / std[s]
            W[s] *= scale
            B[s] *= scale
            B[s] -= torch.quantile(logit[:, s] * scale, q)


def build(c: dict, seed: int, mel: np.ndarray):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    enc = build_encoder(c)
    # Parameters and the BatchNorm statistics; not the positions' inv_freq buffer.
    stats = [(k, b) for k, b in enc.named_buffers() if k.endswith(("running_mean", "running_var"))]
    init_params(list(enc.named_parameters()) + stats, g)
    diar = make_diar(c, g)
    tune_head(enc, diar, c, mel)
    margins = Margins()
    chunks, preds, compressions, n_sil = run_stream(enc, diar, c, mel, margins)
    return enc, diar, margins, chunks, preds, compressions, n_sil


# The published model's shapes (spec 4.1), for timing and load checks with random weights.
REAL = dict(seed=42, mels=128, channels=256, d=512, heads=8, ff=2048, kernel=9, layers=17,
            tf_d=192, tf_heads=8, tf_ff=768, tf_layers=18, spk=4,
            chunk=188, cache=188, fifo=0, period=188)


def real_shape(out: Path) -> int:
    """diar_streaming_sortformer_4spk-v2.1's shapes, random weights, F32 (no reference)."""
    c = REAL
    torch.manual_seed(c["seed"])
    g = torch.Generator().manual_seed(c["seed"])
    enc = build_encoder(c)
    stats = [(k, b) for k, b in enc.named_buffers() if k.endswith(("running_mean", "running_var"))]
    init_params(list(enc.named_parameters()) + stats, g)
    out.mkdir(parents=True, exist_ok=True)
    write_model(out / "sortformer_real.gguf", c, tensor_plan(enc, make_diar(c, g)))
    print(f"wrote {out / 'sortformer_real.gguf'}")
    return 0


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--real-shape":
        return real_shape(Path(sys.argv[2]))
    c = TINY
    out = ROOT / "tests" / "fixtures"
    pcm, desc = make_clip()
    mel = log_mel(pcm, c["mels"])
    # The first seed from c["seed"] on whose every streaming decision is MARGIN clear of
    # its threshold, whose cache is compressed at least 3 times and whose silence
    # profile sees at least 10 frames.
    for seed in range(c["seed"], c["seed"] + 40):
        enc, diar, margins, chunks, preds, compressions, n_sil = build(c, seed, mel)
        print(f"seed {seed}: closest decision {margins.worst:.2e} ({margins.where}), {compressions} compressions, "
              f"{n_sil} silent frames")
        if margins.worst >= MARGIN and compressions >= 3 and n_sil >= 10:
            break
    else:
        print("no seed gives clear decisions", file=sys.stderr)
        return 1
    segs = segments(preds)
    print(f"clip {len(pcm)} samples, mel {mel.shape}, {len(chunks)} chunks, {compressions} compressions, "
          f"preds {preds.shape}, {len(segs)} segments")
    print("active fraction per speaker:", (preds > 0.5).mean(axis=0).round(2).tolist())
    write_model(out / "sortformer_tiny.gguf", c, tensor_plan(enc, diar))
    write_ref(out / "sortformer_tiny.ref.gguf", pcm, desc, mel, chunks, preds, segs, compressions, margins)
    return 0


if __name__ == "__main__":
    sys.exit(main())
