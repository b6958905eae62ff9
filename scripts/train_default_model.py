#!/usr/bin/env python3
"""Train steno's bundled default model: a small Parakeet CTC (FastConformer) on
English speech synthesized with espeak-ng, then convert it to GGUF.

    python scripts/train_default_model.py --out DIR [--espeak PREFIX] [--train-seconds 420]

What it does, in one process plus synthesis workers:

1. trains a SentencePiece BPE tokenizer on sentences of the text generator
   (scripts/default_model_data.py);
2. starts workers that synthesize shards of utterances with espeak-ng (training
   voices and rates) while the GPU trains; shard 0 of the held-out set (voice
   variants and a rate band never used in training) is made first;
3. trains transformers' ParakeetForCTC on what has been synthesized so far, with
   augmentation on the GPU (silence, gain, coloured noise, reverb, low-pass),
   the NeMo log-mel frontend computed exactly as ParakeetFeatureExtractor does,
   and SpecAugment; AdamW, warm-up then cosine decay over the wall-clock budget;
4. measures the word error rate (greedy CTC) on the held-out set, clean and
   with noise;
5. saves the transformers checkpoint and converts it with convert_parakeet.py.

The text, voices and augmentation draws are seeded; the number of steps depends on
the wall clock unless --steps is given. --espeak names a directory where Debian's
espeak-ng packages were unpacked with dpkg -x (for a machine without espeak-ng).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import shutil
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import default_model_data as data  # noqa: E402

MODEL = dict(hidden_size=192, num_hidden_layers=8, num_attention_heads=4, intermediate_size=768,
             conv_kernel_size=9, subsampling_conv_channels=128, num_mel_bins=80,
             attention_bias=True, convolution_bias=True, scale_input=False)
# For training on a CPU: about 1.8 M parameters.
SMALL_MODEL = dict(MODEL, hidden_size=128, num_hidden_layers=4, intermediate_size=512, subsampling_conv_channels=64)
TINY_MODEL = dict(MODEL, hidden_size=64, num_hidden_layers=2, intermediate_size=256, subsampling_conv_channels=32)
SIZES = {"base": MODEL, "small": SMALL_MODEL, "tiny": TINY_MODEL}
NO_DROPOUT = dict(dropout=0.0, dropout_positions=0.0, layerdrop=0.0, activation_dropout=0.0, attention_dropout=0.0)
GGUF_NAME = "steno-en-tiny-ctc"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------
# Synthesis workers
# ---------------------------------------------------------------------------

def synth_worker(wid: int, n_workers: int, a: dict, shard_dir: str, stop) -> None:
    """Worker wid writes train shards wid, wid + n_workers, ... until told to stop
    or max_shards is reached; worker 0 writes the held-out shard first."""
    gen = data.TextGen()
    d = Path(shard_dir)
    if wid == 0:
        data.save_shard(d / "eval.npz", data.make_shard(a["seed"], 0, a["n_eval"], True, a["espeak"], gen))
    k, parent = wid, os.getppid()
    while k < a["max_shards"] and not stop.is_set() and os.getppid() == parent:   # ends with its parent
        data.save_shard(d / f"train_{k:05d}.npz",
                        data.make_shard(a["seed"], k, a["shard_size"], False, a["espeak"], gen))
        k += n_workers


def start_workers(a, shard_dir: Path):
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    cfg = dict(seed=a.seed, n_eval=a.n_eval, espeak=a.espeak, shard_size=a.shard_size, max_shards=a.max_shards)
    procs = [ctx.Process(target=synth_worker, args=(i, a.workers, cfg, str(shard_dir), stop), daemon=True)
             for i in range(a.workers)]
    for p in procs:
        p.start()
    return procs, stop


# ---------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------

def train_tokenizer(out: Path, seed: int, vocab: int, n_sentences: int) -> None:
    import sentencepiece as spm
    rng = random.Random(f"{seed}/tokenizer")
    gen = data.TextGen()
    text = [gen.sentence(rng) for _ in range(n_sentences)]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_prefix=str(out / "tokenizer"),
                                   vocab_size=vocab, model_type="bpe", character_coverage=1.0,
                                   normalization_rule_name="identity", num_threads=1, minloglevel=2)


# ---------------------------------------------------------------------------
# The audio pool on the GPU
# ---------------------------------------------------------------------------

class Pool:
    """All synthesized training audio in one int16 GPU buffer, with each
    utterance's offset, length and token ids."""

    def __init__(self, torch, device, capacity: int, sp):
        self.torch, self.device, self.sp = torch, device, sp
        self.buf = torch.zeros(capacity, dtype=torch.int16, device=device)
        self.used = 0
        self.offsets, self.lens, self.tokens = [], [], []
        self.words = []   # per utterance: (start sample or -1, piece ids) of each word
        self.loaded = set()

    def poll(self, shard_dir: Path) -> int:
        """Load the shards that appeared since the last call; returns how many."""
        new = 0
        for f in sorted(shard_dir.glob("train_*.npz")):
            if f.name in self.loaded or f.name.endswith(".tmp.npz"):
                continue
            sh = data.load_shard(f)
            n = len(sh["audio"])
            if self.used + n > self.buf.numel():
                return new
            self.buf[self.used:self.used + n] = self.torch.from_numpy(sh["audio"]).to(self.device)
            off = self.used
            for length, text, starts in zip(sh["lens"], sh["texts"], sh["word_starts"]):
                words = [(int(st), self.sp.encode(w)) for st, w in zip(starts, text.split())]
                self.offsets.append(off)
                self.lens.append(int(length))
                self.tokens.append([t for _, ids in words for t in ids])
                self.words.append(words)
                off += int(length)
            self.used += n
            self.loaded.add(f.name)
            f.unlink()
            new += 1
        return new

    def frame_targets(self, idx, leads, n_frames: int, blank: int):
        """Frame-level targets from espeak-ng's word starts: each word's pieces spread
        over its span of encoder frames (1280 samples each), blank elsewhere; -100
        (ignored) for utterances without word starts."""
        tgt = np.full((len(idx), n_frames), blank, dtype=np.int64)
        for r, (i, lead) in enumerate(zip(idx, leads)):
            words = self.words[i]
            if not words or words[0][0] < 0:
                tgt[r] = -100
                continue
            bounds = [(lead + st) // 1280 for st, _ in words] + [(lead + self.lens[i]) // 1280]
            for j, (_, ids) in enumerate(words):
                a, span = bounds[j], max(1, bounds[j + 1] - bounds[j])
                for k, t in enumerate(ids):
                    f = a + (2 * k + 1) * span // (2 * len(ids))
                    if f < n_frames:
                        tgt[r, f] = t
        return tgt

    def batches(self, rng: np.random.Generator, budget: int, max_pad: int, max_len: int | None = None):
        """Index lists of similar length whose padded size (with up to max_pad
        samples of added silence) stays within budget samples; only utterances
        of at most max_len samples when given."""
        n = len(self.lens)
        pick = rng.choice(n, size=min(n, 4096), replace=False)
        if max_len is not None:
            short = pick[np.asarray(self.lens)[pick] <= max_len]
            pick = short if len(short) >= 64 else pick
        lens = np.asarray(self.lens)[pick]
        order = pick[np.argsort(lens, kind="stable")]
        out, cur, longest = [], [], 0
        for i in order:
            ln = self.lens[i] + max_pad
            if cur and max(longest, ln) * (len(cur) + 1) > budget:
                out.append(cur)
                cur, longest = [], 0
            cur.append(int(i))
            longest = max(longest, ln)
        if cur:
            out.append(cur)
        rng.shuffle(out)
        return out


# ---------------------------------------------------------------------------
# Frontend and augmentation (GPU)
# ---------------------------------------------------------------------------

class Frontend:
    """ParakeetFeatureExtractor's log-mel, batched on the GPU: pre-emphasis 0.97,
    centred 512-point STFT of a 400-sample symmetric Hann window, hop 160, slaney
    mel filters, log(x + 2^-24), then per-utterance per-feature normalization
    over the valid frames (unbiased variance), padding zeroed."""

    def __init__(self, torch, device, n_mels: int):
        from transformers import ParakeetFeatureExtractor
        from transformers.models.parakeet import feature_extraction_parakeet as fx
        self.torch = torch
        fe = ParakeetFeatureExtractor(feature_size=n_mels)
        self.filters = fe.mel_filters.to(device)
        self.window = torch.hann_window(400, periodic=False, device=device)
        self.log_guard, self.eps = fx.LOG_ZERO_GUARD_VALUE, fx.EPSILON

    def __call__(self, x, lengths):
        t = self.torch
        keep = t.arange(x.shape[1], device=x.device)[None, :] < lengths[:, None]
        x = t.cat([x[:, :1], x[:, 1:] - 0.97 * x[:, :-1]], dim=1).masked_fill(~keep, 0.0)
        spec = t.stft(x, 512, hop_length=160, win_length=400, window=self.window, return_complex=True,
                      pad_mode="constant")
        power = spec.real.pow(2) + spec.imag.pow(2)
        mel = t.log(self.filters @ power + self.log_guard).transpose(1, 2)       # (B, T, F)
        n = t.div(lengths, 160, rounding_mode="floor")
        mask = (t.arange(mel.shape[1], device=x.device)[None, :] < n[:, None])
        m = mask.unsqueeze(-1)
        mean = (mel * m).sum(1, keepdim=True) / n[:, None, None]
        var = (((mel * m) - mean) ** 2 * m).sum(1, keepdim=True) / (n[:, None, None] - 1)
        mel = (mel - mean) / (var.sqrt() + self.eps)
        return mel * m, mask


def gather_audio(torch, pool: Pool, idx, rng: np.random.Generator, max_lead: int, max_tail: int):
    """Padded float batch from the pool, each utterance shifted by a random lead
    of silence and followed by a random tail. Sizes are drawn on the CPU so that
    nothing waits for the GPU."""
    dev = pool.device
    ln_np = np.asarray([pool.lens[i] for i in idx])
    lead_np = rng.integers(0, max_lead + 1, len(idx))
    total_np = ln_np + lead_np + rng.integers(0, max_tail + 1, len(idx))
    off = torch.from_numpy(np.asarray([pool.offsets[i] for i in idx])).to(dev)
    ln, lead = torch.from_numpy(ln_np).to(dev), torch.from_numpy(lead_np).to(dev)
    pos = torch.arange(int(total_np.max()), device=dev)[None, :] - lead[:, None]
    inside = (pos >= 0) & (pos < ln[:, None])
    src = (off[:, None] + pos.clamp(min=0)).clamp(max=pool.buf.numel() - 1)
    x = pool.buf[src].float() / 32768.0
    return x * inside, torch.from_numpy(total_np).to(dev), int(total_np.sum()), lead_np


def augment(torch, x, lengths, gen, p_reverb=0.35, p_noise=0.6, p_lowpass=0.25):
    """Reverb (exponential-decay noise impulse response), low-pass, gain and
    coloured noise at a random SNR, per utterance; all on the GPU."""
    B, N = x.shape
    dev = x.device
    u = lambda *s: torch.rand(*s, device=dev, generator=gen)  # noqa: E731
    valid = torch.arange(N, device=dev)[None, :] < lengths[:, None]
    L = 8000
    nfft = 1 << (N + L - 1).bit_length()
    t = torch.arange(L, device=dev)[None, :] / 16000.0
    rt60 = 0.15 + 0.65 * u(B, 1)
    ir = torch.randn(B, L, device=dev, generator=gen) * torch.exp(-6.9 * t / rt60) * 0.3
    ir[:, 0] = 1.0
    ir = ir / ir.norm(dim=1, keepdim=True)
    use = (u(B) < p_reverb)[:, None]
    ir = torch.where(use, ir, torch.nn.functional.one_hot(torch.zeros(B, dtype=torch.long, device=dev), L).float())
    spec = torch.fft.rfft(x, nfft) * torch.fft.rfft(ir, nfft)
    f = torch.fft.rfftfreq(nfft, 1 / 16000.0).to(dev)[None, :]
    cut = 2500 + 5000 * u(B, 1)
    lp = torch.sigmoid((cut - f) / 150.0)
    spec = spec * torch.where((u(B) < p_lowpass)[:, None], lp, torch.ones_like(lp))
    y = torch.fft.irfft(spec, nfft)[:, :N] * valid
    y = y * (10 ** ((-15 + 20 * u(B, 1)) / 20))                                  # gain -15..+5 dB
    # noise: white shaped by f^(-alpha/2), alpha in [0, 2] (white to brown)
    nz = torch.fft.rfft(torch.randn(B, N, device=dev, generator=gen))
    fn = torch.fft.rfftfreq(N, 1 / 16000.0).to(dev)[None, :]
    nz = torch.fft.irfft(nz * (1 + fn / 100.0) ** (-u(B, 1)), N)
    snr = 3 + 37 * u(B, 1)
    p_sig = (y ** 2).sum(1, keepdim=True) / lengths[:, None]
    p_nz = (nz * valid).pow(2).sum(1, keepdim=True) / lengths[:, None]
    nz = nz * torch.sqrt(p_sig / (p_nz + 1e-12) / 10 ** (snr / 10))
    y = y + nz * (u(B, 1) < p_noise) * valid
    return y.clamp(-1.0, 1.0)


def spec_augment(torch, mel, mask, gen, n_freq=2, max_f=12, max_t=30, frames_per_mask=120):
    """Two frequency masks up to 12 bins and one time mask per 1.2 s of speech,
    each up to 0.3 s (and up to a tenth of the utterance)."""
    B, T, F = mel.shape
    dev = mel.device
    u = lambda *s: torch.rand(*s, device=dev, generator=gen)  # noqa: E731
    fw = (u(B, n_freq) * (max_f + 1)).long()
    f0 = (u(B, n_freq) * (F - fw)).long()
    fr = torch.arange(F, device=dev)[None, None, :]
    fmask = ((fr >= f0[..., None]) & (fr < (f0 + fw)[..., None])).any(1)            # (B, F)
    n = mask.sum(1)
    K = max(1, T // frames_per_mask + 1)
    on = torch.arange(K, device=dev)[None, :] < (n // frames_per_mask + 1)[:, None]
    tw = (u(B, K) * torch.minimum(torch.full_like(n, max_t), n // 10)[:, None].float()).long()
    t0 = (u(B, K) * (n[:, None] - tw).clamp(min=1)).long()
    tr = torch.arange(T, device=dev)[None, None, :]
    tmask = (((tr >= t0[..., None]) & (tr < (t0 + tw)[..., None])) & on[..., None]).any(1)  # (B, T)
    return mel.masked_fill(fmask[:, None, :] | tmask[:, :, None], 0.0)


# ---------------------------------------------------------------------------
# Model, loss, decoding
# ---------------------------------------------------------------------------

def build_model(torch, n_spm: int, enc: dict, seed: int):
    from transformers import ParakeetCTCConfig, ParakeetForCTC
    torch.manual_seed(seed)
    cfg = ParakeetCTCConfig(vocab_size=n_spm + 1, pad_token_id=n_spm, encoder_config=dict(enc, **NO_DROPOUT))
    model = ParakeetForCTC(cfg)
    # transformers' N(0, 0.02) init shrinks the signal by ~20x in each of the
    # subsampling convolutions (fan-in 9), so the residual stream starts near 1e-4
    # and the first LayerNorm turns that into gradients of 1e4 and more. He init
    # there keeps it near unit scale.
    with torch.no_grad():
        for mod in model.encoder.subsampling.modules():
            if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)):
                gain = 2.0 if isinstance(mod, torch.nn.Conv2d) else 1.0
                fan_in = mod.weight[0].numel()
                mod.weight.normal_(0.0, math.sqrt(gain / fan_in))
                mod.bias.zero_()
    return model


def forward_logits(model, mel, mask):
    out = model.encoder(input_features=mel, attention_mask=mask)
    logits = model.ctc_head(out.last_hidden_state)
    return logits, out.attention_mask.sum(-1)


def ctc_loss(torch, logits, enc_lens, tokens, blank):
    lp = torch.log_softmax(logits.float(), dim=-1).transpose(0, 1)
    tgt = torch.tensor([t for seq in tokens for t in seq], device=logits.device)
    tl = torch.tensor([len(s) for s in tokens], device=logits.device)
    return torch.nn.functional.ctc_loss(lp, tgt, enc_lens, tl, blank=blank, reduction="mean",
                                        zero_infinity=True)


def greedy(logits, enc_lens, blank):
    ids = logits.argmax(-1).cpu().numpy()
    out = []
    for row, n in zip(ids, enc_lens.cpu().numpy()):
        seq, prev = [], -1
        for c in row[:n]:
            if c != prev and c != blank:
                seq.append(int(c))
            prev = c
        out.append(seq)
    return out


def edit_distance(a: list, b: list) -> int:
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            cur = min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
            prev, d[j] = d[j], cur
    return d[-1]


def wer(refs: list[str], hyps: list[str]) -> float:
    errs = sum(edit_distance(r.split(), h.split()) for r, h in zip(refs, hyps))
    return errs / max(1, sum(len(r.split()) for r in refs))


def evaluate(torch, model, fe, sp, ev: dict, noise: bool, device, limit: int | None = None, seed: int = 0):
    """Greedy CTC transcripts of the held-out shard; WER and the transcripts."""
    was_training = model.training
    model.eval()
    gen = torch.Generator(device=device).manual_seed(seed)
    lens = ev["lens"][:limit] if limit else ev["lens"]
    offs = np.concatenate([[0], np.cumsum(ev["lens"])[:-1]])
    hyps = []
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        for s in range(0, len(lens), 64):
            idx = list(range(s, min(len(lens), s + 64)))
            ln = torch.tensor([int(lens[i]) for i in idx], device=device)
            x = torch.zeros(len(idx), int(ln.max()), device=device)
            for r, i in enumerate(idx):
                x[r, :lens[i]] = torch.from_numpy(ev["audio"][offs[i]:offs[i] + lens[i]].astype(np.float32) / 32768.0)
            if noise:   # white-to-brown noise at 3..40 dB SNR, nothing else
                x = augment(torch, x, ln, gen, p_reverb=0.0, p_noise=1.0, p_lowpass=0.0)
            mel, mask = fe(x, ln)
            logits, el = forward_logits(model, mel, mask)
            hyps += [sp.decode(h) for h in greedy(logits, el, model.config.pad_token_id)]
    model.train(was_training)
    refs = ev["texts"][:len(hyps)]
    return wer(refs, hyps), hyps


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------

def lr_at(progress: float, step: int, peak: float, warmup: int) -> float:
    w = min(1.0, (step + 1) / warmup)
    return peak * w * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def aligned_weight(progress: float) -> float:
    """Weight of the frame-level loss: full for the first 15 % of training, gone by 35 %."""
    return 1.0 if progress < 0.15 else max(0.0, 1.0 - (progress - 0.15) / 0.2)


def curriculum_len(progress: float) -> int | None:
    """Short, clean utterances first: CTC finds its alignments there far sooner
    (a first run on everything at once stayed on the blank plateau)."""
    if progress < 0.08:
        return 16000 * 3
    if progress < 0.2:
        return 16000 * 6
    return None


def wait_for(path: Path, procs, timeout: float) -> None:
    t0 = time.time()
    while not path.exists():
        if time.time() - t0 > timeout or not any(p.is_alive() for p in procs):
            raise RuntimeError(f"{path} did not appear (synthesis failed?)")
        time.sleep(0.5)


def train(a, torch, device, model, fe, sp, pool: Pool, shard_dir: Path, procs, report: dict) -> None:
    blank = model.config.pad_token_id
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.98), weight_decay=1e-3,
                            fused=device.type == "cuda")
    gen = torch.Generator(device=device).manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    while len(pool.lens) < a.min_start:
        if pool.poll(shard_dir) == 0 and not any(p.is_alive() for p in procs):
            raise RuntimeError("synthesis workers died before the first shards")
        time.sleep(0.5)
    model.train()
    t0, step, seen, last_log, curve = time.time(), 0, 0.0, time.time(), []
    ev = None
    done = False
    while not done:
        pool.poll(shard_dir)
        progress = (time.time() - t0) / a.train_seconds if a.steps is None else step / a.steps
        for idx in pool.batches(rng, int(a.batch_seconds * 16000), 16000 * 7 // 10,
                                None if a.resume else curriculum_len(progress)):
            progress = (time.time() - t0) / a.train_seconds if a.steps is None else step / a.steps
            if progress >= 1.0 or (shard_dir.parent / "STOP").exists():   # touch WORK/STOP to end early
                done = True
                break
            for g in opt.param_groups:
                g["lr"] = lr_at(progress, step, a.lr, a.warmup)
            x, ln, n_samples, leads = gather_audio(torch, pool, idx, rng, 16000 * 4 // 10, 16000 * 3 // 10)
            with torch.no_grad():
                s = 1.0 if a.resume else min(1.0, progress / 0.3)   # augmentation grows in over the first 30 %
                x = augment(torch, x, ln, gen, p_reverb=0.35 * s, p_noise=0.6 * s, p_lowpass=0.25 * s)
                mel, mask = fe(x, ln)
                if progress > 0.1 or a.resume:
                    mel = spec_augment(torch, mel, mask, gen)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                logits, el = forward_logits(model, mel, mask)
            loss = ctc = ctc_loss(torch, logits, el, [pool.tokens[i] for i in idx], blank)
            lam = 0.0 if a.resume else aligned_weight(progress)
            if lam > 0:   # frame-level cross-entropy on espeak-ng's word timing: no blank plateau
                tgt = torch.from_numpy(pool.frame_targets(idx, leads, logits.shape[1], blank)).to(device)
                tgt = tgt.masked_fill(torch.arange(logits.shape[1], device=device)[None, :] >= el[:, None], -100)
                ce = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), tgt, ignore_index=-100)
                loss = ctc + lam * ce
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            seen += n_samples / 16000
            if time.time() - last_log > a.log_every or step == 1:
                last_log = time.time()
                if ev is None and (shard_dir / "eval.npz").exists():
                    ev = data.load_shard(shard_dir / "eval.npz")
                w = evaluate(torch, model, fe, sp, ev, False, device, limit=96)[0] if ev else float("nan")
                row = dict(t=round(time.time() - t0, 1), step=step, loss=round(float(ctc.detach()), 4),
                           ce=round(float(ce.detach()), 4) if lam > 0 else None,
                           grad_norm=round(float(gn), 3), lr=opt.param_groups[0]["lr"], utts=len(pool.lens),
                           hours_seen=round(seen / 3600, 2), batch=len(idx), wer96=round(w, 4))
                curve.append(row)
                log(json.dumps(row))
            if step % 50 == 0:
                pool.poll(shard_dir)
    report["training"] = dict(steps=step, seconds=round(time.time() - t0, 1), hours_seen=round(seen / 3600, 2),
                              utterances_synthesized=len(pool.lens),
                              hours_synthesized=round(sum(pool.lens) / 16000 / 3600, 2), curve=curve)


# ---------------------------------------------------------------------------
# Outputs
# ---------------------------------------------------------------------------

def save_outputs(a, torch, model, work: Path, report: dict) -> None:
    from transformers import ParakeetFeatureExtractor
    import convert_parakeet as conv
    ckpt = work / "checkpoint"
    if ckpt.exists():
        shutil.rmtree(ckpt)
    model.save_pretrained(ckpt)
    ParakeetFeatureExtractor(feature_size=model.config.encoder_config.num_mel_bins).save_pretrained(ckpt)
    shutil.copy(work / "tokenizer.model", ckpt / "tokenizer.model")
    (ckpt / "report.json").write_text(json.dumps(report, indent=1))
    tar = a.out / "checkpoint.tar"
    with tarfile.open(tar, "w") as tf:
        tf.add(ckpt, arcname="checkpoint")
    # files that come back from the GPU machine are limited to 16 MiB each
    part, raw = 0, tar.read_bytes()
    for s in range(0, len(raw), 15 << 20):
        (a.out / f"checkpoint.tar.{part:02d}").write_bytes(raw[s:s + (15 << 20)])
        part += 1
    tar.unlink()
    meta = dict(variant="ctc-en-tiny", name="steno English tiny CTC (espeak-ng speech)", version="1",
                languages=["en"], license="MIT")
    for outtype in a.outtypes.split(","):
        dst = a.out / f"{GGUF_NAME}.{outtype}.gguf"
        try:
            conv.convert(ckpt, dst, outtype, meta)
            report.setdefault("gguf", {})[dst.name] = dst.stat().st_size
        except Exception as e:  # the checkpoint is back anyway; convert there
            report.setdefault("gguf_errors", {})[outtype] = repr(e)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="report, log, checkpoint parts and GGUF files")
    p.add_argument("--work", type=Path, default=None, help="scratch (default OUT/../train_work)")
    p.add_argument("--espeak", default=None, help="prefix of an espeak-ng unpacked with dpkg -x")
    p.add_argument("--seed", type=int, default=20261202)
    p.add_argument("--train-seconds", type=float, default=420.0)
    p.add_argument("--steps", type=int, default=None, help="a fixed number of steps instead of the clock")
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    p.add_argument("--shard-size", type=int, default=400)
    p.add_argument("--max-shards", type=int, default=700)
    p.add_argument("--n-eval", type=int, default=300)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--batch-seconds", type=float, default=600.0, help="padded audio per batch")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=400)
    p.add_argument("--min-start", type=int, default=800, help="utterances synthesized before training starts")
    p.add_argument("--log-every", type=float, default=30.0)
    p.add_argument("--pool-gb", type=float, default=40.0, help="GPU memory for the audio pool")
    p.add_argument("--outtypes", default="q8_0,f16")
    p.add_argument("--size", choices=sorted(SIZES), default="base",
                   help="base: for the GPU; small: for a CPU; tiny: a smoke test")
    p.add_argument("--tiny", action="store_const", const="tiny", dest="size", help="--size tiny")
    p.add_argument("--resume", type=Path, default=None,
                   help="a checkpoint directory of an earlier run: its weights and tokenizer, then "
                        "full augmentation from the first step (no curriculum, no frame-level loss)")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    work = a.work or a.out.parent / "train_work"
    shard_dir = work / "shards"
    if shard_dir.exists():
        shutil.rmtree(shard_dir)
    shard_dir.mkdir(parents=True)

    log("starting synthesis workers")
    if a.espeak:   # the workers load libespeak-ng; its dependencies come through LD_LIBRARY_PATH
        os.environ.update(data.espeak_env(a.espeak))
    procs, stop = start_workers(a, shard_dir)
    import torch
    import sentencepiece as spm
    torch.set_num_threads(2)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if a.resume:
        shutil.copy(a.resume / "tokenizer.model", work / "tokenizer.model")
    else:
        train_tokenizer(work, a.seed, a.vocab, 40000)
    sp = spm.SentencePieceProcessor(model_file=str(work / "tokenizer.model"))
    log(f"tokenizer: {sp.vocab_size()} pieces; device {device}")
    enc = SIZES[a.size]
    if a.resume:
        from transformers import ParakeetForCTC
        model = ParakeetForCTC.from_pretrained(a.resume).to(device)
        enc = {k: getattr(model.config.encoder_config, k) for k in enc}
    else:
        model = build_model(torch, sp.vocab_size(), enc, a.seed).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    report = dict(seed=a.seed, model=enc, n_params=n_params, vocab=sp.vocab_size(), args={
        k: str(v) for k, v in vars(a).items()}, torch=torch.__version__,
        transformers=__import__("transformers").__version__)
    log(f"model: {n_params} parameters")
    fe = Frontend(torch, device, enc["num_mel_bins"])
    pool = Pool(torch, device, int(a.pool_gb * 2 ** 30 / 2), sp)
    try:
        train(a, torch, device, model, fe, sp, pool, shard_dir, procs, report)
    except Exception:   # keep what was learnt: evaluate and save it all the same
        import traceback
        report["training_error"] = traceback.format_exc()
        log(report["training_error"])
    finally:
        stop.set()
    wait_for(shard_dir / "eval.npz", procs, 120)
    ev = data.load_shard(shard_dir / "eval.npz")
    for p_ in procs:
        p_.terminate()
    w_clean, hyps = evaluate(torch, model, fe, sp, ev, False, device)
    w_noisy, hyps_noisy = evaluate(torch, model, fe, sp, ev, True, device, seed=a.seed + 1)
    report["eval"] = dict(n=len(ev["texts"]), words=sum(len(t.split()) for t in ev["texts"]),
                          wer_clean=round(w_clean, 4), wer_noise_3_40db=round(w_noisy, 4),
                          variants=data.EVAL_VARIANTS, rates=data.EVAL_RATES,
                          examples=[dict(ref=r, hyp=h, voice=v) for r, h, v in
                                    list(zip(ev["texts"], hyps, ev["voices"]))[:40]])
    log(f"held-out WER: clean {w_clean:.4f}, noisy {w_noisy:.4f} ({len(ev['texts'])} sentences)")
    save_outputs(a, torch, model.float().cpu(), work, report)
    (a.out / "report.json").write_text(json.dumps(report, indent=1))
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
