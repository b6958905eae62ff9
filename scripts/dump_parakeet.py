#!/usr/bin/env python3
"""Build tiny random-init transformers Parakeet models (CTC, TDT, RNN-T), convert them
with convert_parakeet.py, and dump reference tensors for the C engine's parity
tests.

    python scripts/dump_parakeet.py                    # writes tests/fixtures/parakeet_*
    python scripts/dump_parakeet.py --kinds rnnt       # only tests/fixtures/parakeet_rnnt_tiny*
    python scripts/dump_parakeet.py --kinds tdt_cap    # only the max_symbols fixture (NeMo vs transformers)
    python scripts/dump_parakeet.py --real-shape       # 0.6B TDT shapes, into build/parakeet_real

Everything is seeded; the clips come from espeak-ng + sox (speech) and numpy
(a synthetic signal). See tests/fixtures/README.md for what the files hold.
Needs torch, transformers, librosa, gguf, numpy, safetensors, protobuf.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import convert_parakeet as conv  # noqa: E402
import parakeet_spec_numpy as spec  # noqa: E402

import gguf  # noqa: E402
from gguf import GGUFValueType as VT  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SR = 16000
HOP = 160

SPEECH_TEXT = "the quick brown fox jumps over the lazy dog"

# ---------------------------------------------------------------------------
# Tiny configurations
# ---------------------------------------------------------------------------

TINY = {
    # CTC: like parakeet-ctc (80 mels, biases, xscaling), kernel 9, 4 heads of 16.
    "ctc": dict(
        seed=1234,
        encoder=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                     conv_kernel_size=9, subsampling_conv_channels=16, num_mel_bins=80,
                     attention_bias=True, convolution_bias=True, scale_input=True),
    ),
    # TDT: like parakeet-tdt-0.6b-v2 (128 mels, no biases, no xscaling), kernel 5,
    # 2 heads of 32, 2-layer LSTM predictor of 40 (not a multiple of 32: exercises
    # the Q8_0 -> F16 fallback).
    "tdt": dict(
        seed=5678,
        encoder=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256,
                     conv_kernel_size=5, subsampling_conv_channels=24, num_mel_bins=128,
                     attention_bias=False, convolution_bias=False, scale_input=False),
        decoder=dict(decoder_hidden_size=40, num_decoder_layers=2, durations=[0, 1, 2, 3, 4],
                     max_symbols_per_step=10, hidden_act="relu"),
    ),
    # RNN-T: like parakeet-rnnt-0.6b (80 mels, biases, xscaling, 8 heads), 8 heads of 8,
    # kernel 7, a narrow FFN and a 1-layer LSTM of 32, to stay small. The predictor
    # projection is twice the TDT's scale: its feedback then ends some runs of
    # symbols at one frame before the max_symbols cap.
    "rnnt": dict(
        seed=9012, pred_scale=4.0,
        encoder=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=8, intermediate_size=128,
                     conv_kernel_size=7, subsampling_conv_channels=16, num_mel_bins=80,
                     attention_bias=True, convolution_bias=True, scale_input=True),
        decoder=dict(decoder_hidden_size=32, num_decoder_layers=1, max_symbols_per_step=10, hidden_act="relu"),
    ),
    # TDT where NeMo and transformers part ways: a smaller encoder (the file stays
    # small) and a duration-0 bias raised until some frame wants more than
    # max_symbols symbols of duration 0. NeMo stops at the cap; transformers'
    # generate() does not (tests/fixtures/README.md, difference 2).
    "tdt_cap": dict(
        seed=3456, head="tdt", cap=True,
        encoder=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                     conv_kernel_size=5, subsampling_conv_channels=8, num_mel_bins=80,
                     attention_bias=False, convolution_bias=False, scale_input=False),
        decoder=dict(decoder_hidden_size=24, num_decoder_layers=1, durations=[0, 1, 2, 3, 4],
                     max_symbols_per_step=10, hidden_act="relu"),
    ),
}

# parakeet-tdt-0.6b-v2 shapes (ParakeetTDTConfig defaults + v2's 128 mels, no biases,
# no xscaling, 1024 SentencePiece pieces).
REAL = dict(
    seed=42,
    encoder=dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=8, intermediate_size=4096,
                 conv_kernel_size=9, subsampling_conv_channels=256, num_mel_bins=128,
                 attention_bias=False, convolution_bias=False, scale_input=False),
    decoder=dict(decoder_hidden_size=640, num_decoder_layers=2, durations=[0, 1, 2, 3, 4],
                 max_symbols_per_step=10, hidden_act="relu"),
    n_spm=1024,
)

NO_DROPOUT = dict(dropout=0.0, dropout_positions=0.0, layerdrop=0.0, activation_dropout=0.0,
                  attention_dropout=0.0)


# ---------------------------------------------------------------------------
# Clips
# ---------------------------------------------------------------------------

def speech_clip(work: Path) -> tuple[np.ndarray, str]:
    """espeak-ng speech resampled to 16 kHz by sox, trimmed (by < 160 trailing
    samples of silence) so that floor(n / hop) is odd: then transformers'
    attention mask changes nothing and the masked and unmasked references agree."""
    raw, wav = work / "speech_raw.wav", work / "speech_16k.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "175", "-w", str(raw), SPEECH_TEXT], check=True)
    # -D: no dither, so the resampled clip is the same on every run
    subprocess.run(["sox", "-D", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(wav)], check=True)
    with wave.open(str(wav)) as w:
        assert w.getframerate() == SR and w.getnchannels() == 1 and w.getsampwidth() == 2
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
    if (len(pcm) // HOP) % 2 == 0:
        pcm = pcm[: (len(pcm) // HOP) * HOP - 1]
    desc = (f'espeak-ng 1.51 "-v en-us -s 175" "{SPEECH_TEXT}", sox 14.4.2 -D (no dither) to 16 kHz 16-bit, '
            f"int16/32768, trimmed so floor(n/160) is odd")
    return pcm, desc


def synth_clip() -> tuple[np.ndarray, str]:
    """1.1 s: a chirp, two tone bursts and seeded noise. Its length is chosen so
    floor(n / hop) is a multiple of 8: transformers' masked subsampling then
    gives one encoder frame fewer than the unmasked run (see the README)."""
    n = 112 * HOP + 37                       # floor(n/160) = 112, a multiple of 8
    t = np.arange(n) / SR
    rng = np.random.default_rng(20240611)
    chirp = 0.3 * np.sin(2 * np.pi * (150 * t + 0.5 * (2500 - 150) / t[-1] * t ** 2))
    env = 0.5 + 0.5 * np.sin(2 * np.pi * 3.0 * t)
    x = chirp * env
    for t0, f in ((0.2, 440.0), (0.7, 1250.0)):
        m = (t >= t0) & (t < t0 + 0.15)
        x[m] += 0.25 * np.sin(2 * np.pi * f * t[m])
    x += 0.01 * rng.standard_normal(n)
    desc = ("synthetic: chirp 150->2500 Hz with 3 Hz AM, 440 Hz and 1250 Hz bursts at 0.2 s and 0.7 s, "
            "noise 0.01 (numpy default_rng(20240611)); floor(n/160) = 112, a multiple of 8")
    return x.astype(np.float32), desc


# ---------------------------------------------------------------------------
# Tokenizer: a synthetic SentencePiece BPE model
# ---------------------------------------------------------------------------

TINY_PIECES = [
    ("<unk>", 2), ("<s>", 3), ("</s>", 3), (".", 1), ("\u2581is", 1),
    ("\u2581the", 1), ("\u2581a", 1), ("\u2581to", 1), ("\u2581of", 1), ("\u2581and", 1),
    ("\u2581quick", 1), ("\u2581brown", 1), ("\u2581fox", 1), ("\u2581jump", 1), ("\u2581dog", 1),
    ("\u2581s", 1), ("\u2581t", 1), ("\u2581w", 1), ("\u2581", 1), ("ing", 1), ("er", 1), ("ed", 1),
    ("th", 1), ("ou", 1), ("an", 1), ("ll", 1), ("e", 1), ("t", 1), ("a", 1), ("o", 1), ("i", 1),
    ("n", 1), ("s", 1), ("h", 1), ("r", 1), ("d", 1), ("l", 1), ("<sep>", 4), ("y", 1), ("z", 1),
]


def real_pieces(n: int) -> list[tuple[str, int]]:
    """n synthetic pieces: the tiny list, then letter pairs and ▁-words."""
    pieces = list(TINY_PIECES)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for a in letters:
        for b in letters:
            for p in (a + b, "\u2581" + a + b):
                if len(pieces) < n and (p, 1) not in pieces:
                    pieces.append((p, 1))
    assert len(pieces) == n
    return pieces


def write_spm_model(path: Path, pieces: list[tuple[str, int]]) -> None:
    """A SentencePiece BPE ModelProto (scores -i, as spm's BPE trainer writes)."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    m = pb.ModelProto()
    for i, (p, ty) in enumerate(pieces):
        sp = m.pieces.add()
        sp.piece, sp.score, sp.type = p, float(-i), ty
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.vocab_size = len(pieces)
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = True
    m.normalizer_spec.escape_whitespaces = True
    m.normalizer_spec.remove_extra_whitespaces = True
    path.write_bytes(m.SerializeToString())


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------

def build_config(kind: str, spec_: dict, n_spm: int):
    from transformers import ParakeetCTCConfig, ParakeetRNNTConfig, ParakeetTDTConfig
    enc = dict(spec_["encoder"], **NO_DROPOUT)
    if kind == "ctc":
        return ParakeetCTCConfig(vocab_size=n_spm + 1, encoder_config=enc, pad_token_id=n_spm)
    cls = ParakeetTDTConfig if kind == "tdt" else ParakeetRNNTConfig
    return cls(vocab_size=n_spm + 1, blank_token_id=n_spm, pad_token_id=n_spm, encoder_config=enc,
               **spec_["decoder"])


@torch.no_grad()
def init_weights(model, seed: int) -> None:
    """Re-initialise every parameter from one seeded generator so that all paths
    carry signal: linear and conv weights N(0, 1/fan_in), LayerNorm and BatchNorm
    affines near (1, 0), BatchNorm running statistics away from (0, 1),
    position biases N(0, 0.3²). The embedding's blank row is zero, as NeMo's
    padding_idx row is (the spec's predictor starts from a zero vector)."""
    g = torch.Generator().manual_seed(seed)
    n = lambda shape, std: torch.randn(shape, generator=g) * std  # noqa: E731
    for name, p in model.named_parameters():
        if ".norm" in name and name.endswith("weight"):          # LayerNorm / BatchNorm gamma
            p.copy_(1.0 + n(p.shape, 0.1))
        elif name.endswith(("bias_u", "bias_v")):
            p.copy_(n(p.shape, 0.3))
        elif name == "decoder.embedding.weight":
            p.copy_(n(p.shape, 1.0))
            p[-1].zero_()
        elif p.dim() >= 2:
            # He gain in the ReLU subsampling stack, so the input's variation survives it
            gain = 2.0 if name.startswith("encoder.subsampling.") else 1.0
            fan_in = int(np.prod(p.shape[1:]))
            p.copy_(n(p.shape, gain / math.sqrt(fan_in)))
        else:
            p.copy_(n(p.shape, 0.1))
    for name, b in model.named_buffers():
        if name.endswith("running_mean"):
            b.copy_(n(b.shape, 0.2))
        elif name.endswith("running_var"):
            b.copy_(0.5 + torch.rand(b.shape, generator=g))


def features(pcm: np.ndarray, n_mels: int):
    from transformers import ParakeetFeatureExtractor
    fe = ParakeetFeatureExtractor(feature_size=n_mels)
    return fe(pcm, sampling_rate=SR, return_tensors="pt")


def ctc_collapse(ids: list[int], blank: int):
    toks, frames, prev = [], [], -1
    for f, c in enumerate(ids):
        if c != prev and c != blank:
            toks.append(c)
            frames.append(f)
        prev = c
    return toks, frames


@torch.no_grad()
def tdt_greedy_torch(model, enc_proj: torch.Tensor, n_frames: int):
    """Spec 1.9 TDT greedy on the transformers modules (zero start input, state
    committed on non-blank, ties to the lowest id, max_symbols cap)."""
    cfg = model.config
    V, durs, max_sym = cfg.vocab_size, list(cfg.durations), cfg.max_symbols_per_step
    dec = model.decoder
    L, H = cfg.num_decoder_layers, cfg.decoder_hidden_size
    state = (torch.zeros(L, 1, H), torch.zeros(L, 1, H))
    out, state = dec.lstm(torch.zeros(1, 1, H), state)
    p = dec.decoder_projector(out)[0, 0]
    step = nsym = 0
    toks, frames, dl, steps, cap_hits = [], [], [], [], 0
    while step < n_frames:
        lg = model.joint(p, enc_proj[step])
        steps.append((step, lg.numpy().copy()))
        tok = int(torch.argmax(lg[:V]))
        dur = durs[int(torch.argmax(lg[V:]))]
        if tok == V - 1 and dur == 0:
            # The spec repeats this identical step until the cap, then moves one
            # frame (spec 8.12); transformers moves at once. Same result; one step.
            step, nsym = step + 1, 0
            continue
        if tok != V - 1:
            toks.append(tok)
            frames.append(step)
            dl.append(dur)
            out, state = dec.lstm(dec.embedding(torch.tensor([[tok]])), state)
            p = dec.decoder_projector(out)[0, 0]
        step += dur
        nsym += 1
        if dur != 0:
            nsym = 0
        elif nsym >= max_sym:
            step += 1
            nsym = 0
            cap_hits += tok != V - 1
        if len(steps) > 16 * n_frames + 1024:
            raise RuntimeError("TDT greedy did not finish")
    return toks, frames, dl, steps, cap_hits


@torch.no_grad()
def tdt_generate(model, inputs):
    """transformers' own TDT decoding (generate), turned into tokens/frames/durations."""
    model.generation_config.decoder_start_token_id = model.config.blank_token_id
    model.generation_config.bos_token_id = model.config.blank_token_id
    out = model.generate(input_features=inputs["input_features"], attention_mask=inputs.get("attention_mask"))
    seq, adv = out.sequences[0, 1:].tolist(), out.durations[0, 1:].tolist()
    V = model.config.vocab_size
    assert max(seq) < V, "generate() picked a duration logit as a token"
    toks, frames, dl, frame = [], [], [], 0
    for s, a in zip(seq, adv):
        if s != V - 1:
            toks.append(s)
            frames.append(frame)
            dl.append(model.config.durations[a] if a < len(model.config.durations) else a)
        frame += a
    return toks, frames, dl


def _predictor(model):
    """The transformers predictor as NeMo's decoder.predict: start (label None)
    from a zero input and zero state, as NeMo's blank-as-pad start does; then one
    LSTM step per label. Returns (projected output, state)."""
    dec, cfg = model.decoder, model.config
    L, H = cfg.num_decoder_layers, cfg.decoder_hidden_size

    def predict(label, state):
        x = torch.zeros(1, 1, H) if label is None else dec.embedding(torch.tensor([[label]]))
        out, state = dec.lstm(x, state if state is not None else (torch.zeros(L, 1, H), torch.zeros(L, 1, H)))
        return dec.decoder_projector(out)[0, 0], state
    return predict


@torch.no_grad()
def nemo_tdt_label_looping(model, enc_proj: torch.Tensor, n_frames: int):
    """NeMo's default TDT decoding (decoding strategy "greedy_batch", the one
    parakeet-tdt models ship with): GreedyBatchedTDTLabelLoopingComputer.torch_impl
    in nemo/collections/asr/parts/submodules/transducer_decoding/tdt_label_looping.py,
    followed step by step for a batch of one (no LM, no CUDA graphs), with the
    transformers modules as NeMo's decoder and joint. Its rules: a blank's
    duration 0 is forced to 1; blanks are skipped in an inner loop; a found
    label is stored at the frame it was found (BatchedHyps.add_results_masked_
    counts labels at one timestamp in last_timestamp_lasts); stage 4 moves one
    frame on when the label is not blank, last_timestamp_lasts >= max_symbols and
    the time index did not move (force_blank_mask). Returns tokens, frames,
    durations and the number of those forced moves."""
    cfg = model.config
    V, durs, max_sym = cfg.vocab_size, list(cfg.durations), cfg.max_symbols_per_step
    blank = V - 1
    predict = _predictor(model)
    decoder_output, state = predict(None, None)
    last_timesteps = max(n_frames - 1, 0)
    time_indices = 0
    safe_time_indices = min(time_indices, last_timesteps)
    active = time_indices < n_frames
    last_timestamp, last_timestamp_lasts = -1, 0
    toks, frames, dl, forced = [], [], [], 0

    def pick():
        logits = model.joint(decoder_output, enc_proj[safe_time_indices])
        return int(torch.argmax(logits[:V])), durs[int(torch.argmax(logits[V:]))]

    while active:
        active_prev = active
        label, duration = pick()                                  # stage 1.1
        blank_mask = label == blank
        if duration == 0 and blank_mask:
            duration = 1
        time_indices_current_labels = time_indices
        time_indices += duration
        safe_time_indices = min(time_indices, last_timesteps)
        active = time_indices < n_frames
        advance = active and blank_mask
        while advance:                                            # stage 1.2
            time_indices_current_labels = time_indices
            label, duration = pick()
            blank_mask = label == blank
            if duration == 0 and blank_mask:
                duration = 1
            time_indices += duration
            safe_time_indices = min(time_indices, last_timesteps)
            active = time_indices < n_frames
            advance = active and blank_mask
        if active_prev and label != blank:                        # found_labels_mask
            toks.append(label)
            frames.append(time_indices_current_labels)
            dl.append(duration)
            last_timestamp_lasts = last_timestamp_lasts + 1 if last_timestamp == time_indices_current_labels else 1
            last_timestamp = time_indices_current_labels
            decoder_output, state = predict(label, state)         # stage 3
        if active and label != blank and last_timestamp_lasts >= max_sym and last_timestamp == time_indices:
            time_indices += 1                                     # stage 4: force_blank_mask
            safe_time_indices = min(time_indices, last_timesteps)
            active = time_indices < n_frames
            forced += 1
    return toks, frames, dl, forced


@torch.no_grad()
def nemo_tdt_greedy_infer(model, enc_proj: torch.Tensor, n_frames: int):
    """NeMo's per-utterance TDT decoding (decoding strategy "greedy"):
    GreedyTDTInfer._greedy_decode in
    nemo/collections/asr/parts/submodules/rnnt_greedy_decoding.py, followed step
    by step with the transformers modules. It differs from label looping in one
    corner: when the max_symbols-th symbol at a frame (blanks of duration 0
    counted) has a duration d > 0, it moves d + 1 frames. Returns tokens, frames
    and durations."""
    cfg = model.config
    V, durs, max_sym = cfg.vocab_size, list(cfg.durations), cfg.max_symbols_per_step
    blank = V - 1
    predict = _predictor(model)
    dec_state, last_token = None, None
    toks, frames, dl = [], [], []
    time_idx = 0
    while time_idx < n_frames:
        f = enc_proj[time_idx]
        symbols_added = 0
        need_loop = True
        while need_loop and symbols_added < max_sym:
            g, hidden_prime = predict(last_token, dec_state)
            logits = model.joint(g, f)
            k = int(torch.argmax(logits[:V]))
            skip = durs[int(torch.argmax(torch.log_softmax(logits[V:], dim=-1)))]
            if k != blank:
                toks.append(k)
                frames.append(time_idx)
                dl.append(skip)
                dec_state, last_token = hidden_prime, k
            symbols_added += 1
            time_idx += skip
            need_loop = skip == 0
        if skip == 0:   # NeMo sets it but no longer uses it here
            skip = 1
        if symbols_added == max_sym:
            time_idx += 1
    return toks, frames, dl


@torch.no_grad()
def rnnt_greedy_torch(model, enc_proj: torch.Tensor, n_frames: int):
    """Spec 1.9 RNN-T greedy on the transformers modules: blank moves to the next
    frame; a token is emitted, the predictor state committed, and the decode stays
    on the frame until blank or max_symbols consecutive tokens there (the cap:
    forced advance). Returns tokens, frames, the (frame, logits) of every step
    and the number of cap hits."""
    cfg = model.config
    V, max_sym, dec = cfg.vocab_size, cfg.max_symbols_per_step, model.decoder
    L, H = cfg.num_decoder_layers, cfg.decoder_hidden_size
    state = (torch.zeros(L, 1, H), torch.zeros(L, 1, H))
    out, state = dec.lstm(torch.zeros(1, 1, H), state)
    p = dec.decoder_projector(out)[0, 0]
    step = nsym = cap_hits = 0
    toks, frames, steps = [], [], []
    while step < n_frames:
        lg = model.joint(p, enc_proj[step])
        steps.append((step, lg.numpy().copy()))
        tok = int(torch.argmax(lg))
        if tok == V - 1:
            step, nsym = step + 1, 0
            continue
        toks.append(tok)
        frames.append(step)
        out, state = dec.lstm(dec.embedding(torch.tensor([[tok]])), state)
        p = dec.decoder_projector(out)[0, 0]
        nsym += 1
        if nsym >= max_sym:
            step, nsym, cap_hits = step + 1, 0, cap_hits + 1
    return toks, frames, steps, cap_hits


@torch.no_grad()
def rnnt_generate(model, inputs):
    """transformers' own RNN-T decoding (generate), turned into tokens/frames: the
    per-step advance (0 after a token, 1 after blank or a forced advance) summed."""
    model.generation_config.decoder_start_token_id = model.config.blank_token_id
    model.generation_config.bos_token_id = model.config.blank_token_id
    out = model.generate(input_features=inputs["input_features"], attention_mask=inputs.get("attention_mask"))
    seq, adv = out.sequences[0, 1:].tolist(), out.durations[0, 1:].tolist()
    toks, frames, frame = [], [], 0
    for s, a in zip(seq, adv):
        if s != model.config.blank_token_id:
            toks.append(s)
            frames.append(frame)
        frame += a
    return toks, frames


def spec_rnnt_greedy(enc_proj: np.ndarray, kv: dict, t: dict):
    """Spec 1.9 RNN-T greedy in float64 on the GGUF's tensors (the cap is 10:
    the GGUF has no key for it)."""
    V, act = kv["stt.parakeet.predictor.vocab"], kv["stt.parakeet.joint.activation"]
    pred = spec.Predictor(kv, t)
    p_out, p_state = pred.step(None, [(np.zeros(pred.Hp), np.zeros(pred.Hp)) for _ in range(pred.L)])
    step = nsym = 0
    toks, frames = [], []
    while step < enc_proj.shape[0]:
        tok = spec.argmax_lowest(spec.joint(enc_proj[step], p_out, t, act))
        if tok == V - 1:
            step, nsym = step + 1, 0
            continue
        toks.append(tok)
        frames.append(step)
        p_out, p_state = pred.step(tok, p_state)
        nsym += 1
        if nsym >= 10:
            step, nsym = step + 1, 0
    return toks, frames


def symbols_per_frame(frames: list) -> dict:
    """{symbols emitted at one frame: how many frames}, frames with none left out."""
    counts = {}
    for f in set(frames):
        n = frames.count(f)
        counts[n] = counts.get(n, 0) + 1
    return dict(sorted(counts.items()))


def margins(rows: np.ndarray) -> float:
    """Smallest gap between the best and second-best entry over rows."""
    s = np.sort(rows, axis=-1)
    return float((s[..., -1] - s[..., -2]).min())


@torch.no_grad()
def run_reference(model, kind: str, pcm: np.ndarray, n_mels: int, masked: bool) -> dict:
    inp = features(pcm, n_mels)
    am = inp["attention_mask"] if masked else None
    r = {"mel": inp["input_features"][0].numpy()}
    if kind == "ctc":
        out = model(input_features=inp["input_features"], attention_mask=am, output_hidden_states=False)
        enc = model.encoder(input_features=inp["input_features"], attention_mask=am)
        logits = out.logits[0]
        t_valid = int(enc.attention_mask.sum()) if am is not None else logits.shape[0]
        r.update(encoder_out=enc.last_hidden_state[0].numpy(), logits=logits.numpy(), t_enc_valid=t_valid)
        ids = (model.generate(input_features=inp["input_features"], attention_mask=am)[0].tolist())
        gen_toks, gen_frames = ctc_collapse(ids[:t_valid], model.config.vocab_size - 1)
        own = ctc_collapse(logits[:t_valid].argmax(-1).tolist(), model.config.vocab_size - 1)
        assert (gen_toks, gen_frames) == own, "generate() and the greedy rule disagree"
        r.update(tokens=gen_toks, frames=gen_frames, durations=[1] * len(gen_toks),
                 margin=margins(logits[:t_valid].numpy()))
    elif kind == "rnnt":
        feats = model.get_audio_features(input_features=inp["input_features"], attention_mask=am)
        enc_proj = feats.pooler_output[0]
        t_valid = int(feats.attention_mask.sum()) if am is not None else enc_proj.shape[0]
        toks, frames, steps, caps = rnnt_greedy_torch(model, enc_proj, t_valid)
        # generate() stops after max_symbols * T_enc - 1 steps: a decode that long
        # would be cut short there.
        assert len(steps) < model.config.max_symbols_per_step * t_valid - 1, "decode reaches generate()'s limit"
        gen = rnnt_generate(model, {"input_features": inp["input_features"], "attention_mask": am})
        assert gen == (toks, frames), f"generate() and the spec greedy disagree:\n{gen}\n{(toks, frames)}"
        sl = np.stack([s[1] for s in steps])
        r.update(encoder_out=feats.last_hidden_state[0].numpy(), enc_proj=enc_proj.numpy(),
                 t_enc_valid=t_valid, tokens=toks, frames=frames, durations=[1] * len(toks), cap_hits=caps,
                 step_frames=[s[0] for s in steps], step_logits=sl, margin=margins(sl))
    else:
        feats = model.get_audio_features(input_features=inp["input_features"], attention_mask=am)
        enc_proj = feats.pooler_output[0]
        t_valid = int(feats.attention_mask.sum()) if am is not None else enc_proj.shape[0]
        toks, frames, dl, steps, caps = tdt_greedy_torch(model, enc_proj, t_valid)
        gen = tdt_generate(model, {"input_features": inp["input_features"], "attention_mask": am})
        nemo = nemo_tdt_label_looping(model, enc_proj, t_valid)
        assert nemo == (toks, frames, dl, caps), f"NeMo's label looping and the spec greedy disagree:\n{nemo}"
        assert nemo_tdt_greedy_infer(model, enc_proj, t_valid) == (toks, frames, dl), "NeMo's two decoders disagree"
        if caps == 0:
            assert gen == (toks, frames, dl), f"generate() and the spec greedy disagree:\n{gen}\n{(toks, frames, dl)}"
        else:   # the cap fixture: keep transformers' decode to show the difference
            assert gen != (toks, frames, dl), "generate() agrees with NeMo although the cap was hit"
            r.update(gen_tokens=gen[0], gen_frames=gen[1], gen_durations=gen[2])
        V = model.config.vocab_size
        sl = np.stack([s[1] for s in steps])
        r.update(encoder_out=feats.last_hidden_state[0].numpy(), enc_proj=enc_proj.numpy(),
                 t_enc_valid=t_valid, tokens=toks, frames=frames, durations=dl, cap_hits=caps,
                 step_frames=[s[0] for s in steps], step_logits=sl,
                 margin=min(margins(sl[:, :V]), margins(sl[:, V:])))
    return r


# Fractions of the speech clip's frames where blank beats every token with the
# start predictor state, tried in turn for the RNN-T blank logit.
RNNT_BLANK_QUANTILES = (0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.5)


def _centered_linear(lin, x: torch.Tensor, scale: float, g) -> None:
    """Set a linear layer so that its output on x has zero mean over time and
    about `scale` standard deviation: a random model's encoder output is mostly
    the same vector at every frame, and an uncentred head would pick the same
    class everywhere."""
    mu, sd = x.mean(0), x.std(0) + 1e-6
    w = torch.randn(lin.weight.shape, generator=g) * scale / math.sqrt(x.shape[1]) / sd
    lin.weight.copy_(w)
    lin.bias.copy_(-(w @ mu))


def _split_between(gaps: np.ndarray, q: float) -> float:
    """A threshold near quantile q of `gaps`, halfway between two neighbours, so
    that no frame sits on a tie."""
    g = np.sort(gaps)
    k = min(max(int(q * len(g)), 0), len(g) - 2)
    return float(0.5 * (g[k] + g[k + 1]))


@torch.no_grad()
def tune_heads(model, kind: str, clips: list, n_mels: int, seed: int, pred_scale: float,
               cap: bool = False) -> None:
    """Make the random model decode to several different tokens (and, for TDT,
    durations): centred, scaled heads, then a blank bias that leaves roughly
    half of the frames (CTC) or the steps (TDT) blank, or (RNN-T) that gives
    frames with several symbols and a max_symbols cap hit."""
    g = torch.Generator().manual_seed(seed + 1)
    inp = features(clips[0], n_mels)
    if kind == "ctc":
        enc = model.encoder(input_features=inp["input_features"],
                            attention_mask=inp["attention_mask"]).last_hidden_state[0]
        h = model.ctc_head
        w = torch.empty(h.weight.shape[:2])
        lin = torch.nn.Linear(w.shape[1], w.shape[0])
        _centered_linear(lin, enc, 4.0, g)
        h.weight.copy_(lin.weight[:, :, None])
        h.bias.copy_(lin.bias)
        lg = model(input_features=inp["input_features"], attention_mask=inp["attention_mask"]).logits[0]
        gap = (lg[:, :-1].max(-1).values - lg[:, -1]).numpy()
        h.bias[-1] += _split_between(gap, 0.5)
        return
    h, gap = _tune_joint(model, inp, g, pred_scale)
    V = model.config.vocab_size
    if kind == "rnnt":
        _tune_rnnt_blank(model, h, gap, clips, n_mels)
        return
    h.bias[V - 1] += _split_between(gap, 0.3)
    # transformers' generate() appends argmax over ALL joint outputs as the next
    # decoder input (it splits tokens from durations only for the frame advance);
    # a duration logit above every token logit would index past the embedding.
    # A constant shift of the duration logits leaves their argmax unchanged.
    h.bias[V:] -= 20.0
    if cap:
        _tune_tdt_cap(model, h, clips, n_mels)
        return
    # transformers' TDT generate() has no max_symbols cap: a random predictor
    # can settle into emitting one token with duration 0 forever. Lower the
    # duration-0 logit until no clip needs the cap, keeping several durations.
    bias0 = float(h.bias[V])
    tried = []
    for b0 in (0.0, -0.5, -1.0, -1.5, -2.0, -2.5, -3.0, -4.0, -5.0, -8.0, -12.0, -20.0, -1e4):
        h.bias[V] = bias0 + b0
        ok, seen = True, set()
        for masked, enc_proj, n in _clip_projections(model, clips, n_mels):
            toks, _, dl, _, caps = tdt_greedy_torch(model, enc_proj, n)
            ok &= caps == 0 and len(toks) >= 4
            seen |= set(dl)
            tried.append((b0, masked, len(toks), caps, sorted(set(dl))))
        if ok and len(seen) >= min(4, len(clips) + 2):
            return
    raise RuntimeError(f"no duration-0 bias gives a varied TDT decode without max_symbols cap hits: {tried}")


@torch.no_grad()
def _tune_tdt_cap(model, h, clips: list, n_mels: int) -> None:
    """The cap fixture: raise the duration-0 logit until NeMo's decode hits the
    max_symbols cap in every run (and so differs from transformers' generate(),
    which has no cap), NeMo's two decoders agree, the tokens have at least two
    durations, and in at least one run generate() ends before its length limit
    of max_symbols · T_enc − 1 steps (a run that does not is cut there)."""
    bias0 = float(h.bias[model.config.vocab_size])
    tried = []
    for b0 in (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0):
        h.bias[model.config.vocab_size] = bias0 + b0
        ok, ended = True, 0
        for masked, enc_proj, n in _clip_projections(model, clips, n_mels):
            toks, frames, dl, forced = nemo_tdt_label_looping(model, enc_proj, n)
            gen = tdt_generate_on(model, enc_proj, n)
            ok &= (forced >= 1 and len(set(dl)) >= 2 and gen != (toks, frames, dl)
                   and nemo_tdt_greedy_infer(model, enc_proj, n) == (toks, frames, dl))
            ended += gen is not None
            tried.append((b0, masked, len(toks), forced, None if gen is None else len(gen[0])))
        if ok and ended:
            return
    raise RuntimeError(f"no duration-0 bias gives a TDT decode where the cap binds: {tried}")


@torch.no_grad()
def tdt_generate_on(model, enc_proj: torch.Tensor, n_frames: int):
    """transformers' TDT generate() rule (no cap; a blank of duration 0 moves one
    frame) on a given encoder projection, for tuning; None when it would reach
    generate()'s limit of max_symbols · T − 1 steps."""
    cfg = model.config
    V, durs = cfg.vocab_size, list(cfg.durations)
    predict = _predictor(model)
    p, state = predict(None, None)
    toks, frames, dl, step = [], [], [], 0
    for _ in range(cfg.max_symbols_per_step * n_frames - 1):
        if step >= n_frames:
            return toks, frames, dl
        lg = model.joint(p, enc_proj[step])
        tok, d = int(torch.argmax(lg[:V])), int(torch.argmax(lg[V:]))
        if tok != V - 1:
            toks.append(tok)
            frames.append(step)
            dl.append(durs[d])
            p, state = predict(tok, state)
        step += 1 if tok == V - 1 and d == 0 else d
    return None


def _clip_projections(model, clips: list, n_mels: int):
    """(masked, joint encoder projection, frames to decode) of every clip, masked
    and unmasked."""
    for clip in clips:
        for masked in (True, False):
            ci = features(clip, n_mels)
            f = model.get_audio_features(input_features=ci["input_features"],
                                         attention_mask=ci["attention_mask"] if masked else None)
            n = int(f.attention_mask.sum()) if masked else f.pooler_output.shape[1]
            yield masked, f.pooler_output[0], n


@torch.no_grad()
def _tune_joint(model, inp, g, pred_scale: float):
    """Transducer joint: centred encoder projection, scaled predictor projection,
    joint output centred over the speech clip's frames. Returns the output layer
    and, per frame, the best token logit minus the blank logit."""
    V, H = model.config.vocab_size, model.config.decoder_hidden_size
    enc = model.encoder(input_features=inp["input_features"],
                        attention_mask=inp["attention_mask"]).last_hidden_state[0]
    _centered_linear(model.encoder_projector, enc, 1.0, g)
    dp = model.decoder.decoder_projector
    dp.weight.copy_(torch.randn(dp.weight.shape, generator=g) * pred_scale / math.sqrt(H))
    dp.bias.zero_()
    # Centre every joint output over the frames (with the start predictor state),
    # so that no token or duration wins by a constant offset.
    h = model.joint.head
    e = model.encoder_projector(enc)
    out, _ = model.decoder.lstm(torch.zeros(1, 1, H))
    z = torch.relu(e + dp(out)[0, 0])
    w = torch.randn(h.weight.shape, generator=g) * 6.0 / math.sqrt(H) / (z.std(0) + 1e-6)
    h.weight.copy_(w)
    h.bias.copy_(-(w @ z.mean(0)))
    lg = model.joint(dp(out)[0, 0], e)
    return h, (lg[:, :V - 1].max(-1).values - lg[:, V - 1]).numpy()


@torch.no_grad()
def _tune_rnnt_blank(model, h, gap: np.ndarray, clips: list, n_mels: int) -> None:
    """RNN-T: place the blank logit so that every decode emits several tokens
    (at most 3 per frame on average) with some frame emitting two to nine, and at
    least one frame reaches the max_symbols cap (a frame whose encoder projection
    outweighs the predictor's feedback repeats tokens until the cap forces the
    advance)."""
    V = model.config.vocab_size
    bias0 = float(h.bias[V - 1])
    runs = list(_clip_projections(model, clips, n_mels))
    tried = []
    for q in RNNT_BLANK_QUANTILES:
        h.bias[V - 1] = bias0 + _split_between(gap, q)
        ok, caps = True, 0
        for masked, enc_proj, n in runs:
            toks, frames, _, c = rnnt_greedy_torch(model, enc_proj, n)
            per = symbols_per_frame(frames)
            ok &= 4 <= len(toks) <= 3 * n and any(2 <= m < model.config.max_symbols_per_step for m in per)
            caps += c
            tried.append((q, masked, len(toks), c, per))
        if ok and caps >= 1:
            return
    raise RuntimeError(f"no blank bias gives an RNN-T decode with multi-symbol frames and a cap hit: {tried}")


def build_model(kind: str, cfg_spec: dict, n_spm: int, clips: list):
    from transformers import ParakeetForCTC, ParakeetForRNNT, ParakeetForTDT
    config = build_config(kind, cfg_spec, n_spm)
    torch.manual_seed(cfg_spec["seed"])
    model = {"ctc": ParakeetForCTC, "tdt": ParakeetForTDT, "rnnt": ParakeetForRNNT}[kind](config).eval()
    init_weights(model, cfg_spec["seed"])
    tune_heads(model, kind, clips, config.encoder_config.num_mel_bins, cfg_spec["seed"],
               cfg_spec.get("pred_scale", 2.0), cfg_spec.get("cap", False))
    return model


def save_checkpoint(model, n_mels: int, pieces, out_dir: Path) -> None:
    from transformers import ParakeetFeatureExtractor
    if out_dir.exists():
        shutil.rmtree(out_dir)
    model.save_pretrained(out_dir)
    ParakeetFeatureExtractor(feature_size=n_mels).save_pretrained(out_dir)
    write_spm_model(out_dir / "tokenizer.model", pieces)


# ---------------------------------------------------------------------------
# Reference GGUF
# ---------------------------------------------------------------------------

def write_ref(path: Path, model_file: str, kind: str, clips: dict, refs: dict, kv_model: dict) -> None:
    w = gguf.GGUFWriter(str(path), "steno-ref")

    def put(k, v, t):
        w.add_key_value(k, v, t)

    def ints(k, v):
        # add_array drops empty lists; every list here is non-empty by construction
        assert len(v) > 0, k
        w.add_key_value(k, [int(x) for x in v], VT.ARRAY, sub_type=VT.INT32)

    put("ref.model", model_file, VT.STRING)
    put("ref.head_kind", kind, VT.STRING)
    put("ref.source", "transformers " + __import__("transformers").__version__ + ", torch " + torch.__version__,
        VT.STRING)
    w.add_key_value("ref.clips", list(clips), VT.ARRAY, sub_type=VT.STRING)
    for name, (pcm, desc) in clips.items():
        p = f"ref.{name}."
        put(p + "description", desc, VT.STRING)
        put(p + "sample_rate", SR, VT.UINT32)
        put(p + "n_samples", len(pcm), VT.UINT32)
        w.add_tensor(f"{name}.pcm", pcm.astype(np.float32))
        for variant in ("", "nomask."):
            r = refs[name][variant]
            q = p + variant
            put(q + "n_frames", r["mel"].shape[0], VT.UINT32)
            put(q + "n_frames_valid", len(pcm) // HOP, VT.UINT32)
            put(q + "t_enc", r["encoder_out"].shape[0], VT.UINT32)
            put(q + "t_enc_valid", r["t_enc_valid"], VT.UINT32)
            ints(q + "tokens", r["tokens"])
            ints(q + "token_frames", r["frames"])
            ints(q + "token_durations", r["durations"])
            put(q + "text", spec.detokenize(r["tokens"], kv_model), VT.STRING)
            put(q + "min_margin", r["margin"], VT.FLOAT32)
            t = f"{name}.{variant}"
            if variant == "":
                w.add_tensor(t + "mel", r["mel"].astype(np.float32))
            w.add_tensor(t + "encoder_out", r["encoder_out"].astype(np.float32))
            if "gen_tokens" in r:   # the cap fixture: transformers' generate(), which has no cap
                ints(q + "generate.tokens", r["gen_tokens"])
                ints(q + "generate.token_frames", r["gen_frames"])
                ints(q + "generate.token_durations", r["gen_durations"])
            if kind == "ctc":
                w.add_tensor(t + "logits", r["logits"].astype(np.float32))
            else:
                w.add_tensor(t + "enc_proj", r["enc_proj"].astype(np.float32))
                ints(q + "step_frames", r["step_frames"])
                w.add_tensor(t + "step_logits", r["step_logits"].astype(np.float32))
        put(p + "mask_changes_output",
            bool(np.abs(refs[name][""]["encoder_out"].shape[0] - refs[name]["nomask."]["encoder_out"].shape[0]) > 0
                 or not np.array_equal(refs[name][""]["encoder_out"], refs[name]["nomask."]["encoder_out"])),
            VT.BOOL)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------

def check_gguf_layout(path: Path, model, kind: str, outtype: str) -> None:
    """Read a converted file back: key types, tensor types by bucket, values."""
    r = gguf.GGUFReader(str(path))
    f = r.fields
    assert f["general.architecture"].contents() == "parakeet"
    u32 = ["stt.parakeet.encoder." + k for k in ("n_layers", "d_model", "n_heads", "d_ff", "conv_kernel",
                                                 "subsampling_factor", "subsampling_channels", "pos_emb_max_len")]
    u32 += ["stt.frontend." + k for k in ("num_mels", "sample_rate", "n_fft", "win_length", "hop_length")]
    u32 += ["general.file_type", "tokenizer.ggml.blank_token_id", "tokenizer.ggml.unknown_token_id"]
    i32 = ["stt.parakeet.encoder." + k for k in ("att_context_left", "att_context_right",
                                                 "conv_context_left", "conv_context_right")]
    if kind != "ctc":
        u32 += ["stt.parakeet.predictor." + k for k in ("hidden", "n_layers", "vocab")]
        u32 += ["stt.parakeet.joint.hidden", "stt.parakeet.joint.num_extra_outputs"]
    if kind == "tdt":
        u32 += ["stt.parakeet.tdt.max_symbols"]
    assert f["stt.parakeet.head_kind"].contents() == kind
    if kind == "rnnt":   # spec 1.2: no durations, no cap key (fixed at 10)
        assert f["stt.parakeet.joint.num_extra_outputs"].contents() == 0
        assert not any(k.startswith("stt.parakeet.tdt.") for k in f), "RNN-T file with tdt.* keys"
    for k in u32:
        assert f[k].types == [VT.UINT32], (k, f[k].types)
    for k in i32:
        assert f[k].types == [VT.INT32], (k, f[k].types)
    assert f["tokenizer.ggml.token_type"].types == [VT.ARRAY, VT.INT32]
    assert f["tokenizer.ggml.scores"].types == [VT.ARRAY, VT.FLOAT32]
    if kind == "tdt":
        assert f["stt.parakeet.tdt.durations"].types == [VT.ARRAY, VT.INT32]
    for k in ("stt.parakeet.encoder.use_bias", "stt.parakeet.encoder.xscaling", "stt.capability.streaming"):
        assert f[k].types == [VT.BOOL], k
    for k in ("stt.frontend.dither", "stt.frontend.pre_emphasis", "stt.frontend.f_min", "stt.frontend.f_max"):
        assert f[k].types == [VT.FLOAT32], k
    for t in r.tensors:
        want = conv.target_type(t.name, int(t.shape[0]), outtype)
        assert t.tensor_type == want, (t.name, t.tensor_type, want)


def check_against_spec(model_gguf: Path, kind: str, pcm: np.ndarray, ref_nomask: dict, ref_mask: dict) -> dict:
    """Recompute the clip from the GGUF with the numpy spec implementation."""
    kv, t = spec.read_gguf(model_gguf)
    mel_spec = spec.log_mel(pcm, kv)
    res = {"mel_max_abs": float(np.abs(mel_spec - ref_mask["mel"]).max())}
    enc = spec.encoder(ref_nomask["mel"], kv, t)           # transformers' mel, no mask
    res["enc_max_abs"] = float(np.abs(enc - ref_nomask["encoder_out"]).max())
    enc_from_spec_mel = spec.encoder(mel_spec, kv, t)
    res["enc_from_spec_mel_max_abs"] = float(np.abs(enc_from_spec_mel - ref_nomask["encoder_out"]).max())
    if kind == "ctc":
        lg = spec.ctc_logits(enc, t)
        res["out_max_abs"] = float(np.abs(lg - ref_nomask["logits"]).max())
        toks, frames = spec.ctc_greedy(lg)
        res["tokens_equal"] = (toks, frames) == (ref_nomask["tokens"], ref_nomask["frames"])
    elif kind == "rnnt":
        ep = spec.joint_enc(enc, t)
        res["out_max_abs"] = float(np.abs(ep - ref_nomask["enc_proj"]).max())
        res["tokens_equal"] = spec_rnnt_greedy(ep, kv, t) == (ref_nomask["tokens"], ref_nomask["frames"])
    else:
        ep = spec.joint_enc(enc, t)
        res["out_max_abs"] = float(np.abs(ep - ref_nomask["enc_proj"]).max())
        toks, frames, dl, _ = spec.tdt_greedy(ep, kv, t)
        res["tokens_equal"] = (toks, frames, dl) == (ref_nomask["tokens"], ref_nomask["frames"],
                                                     ref_nomask["durations"])
    return res


def check_tokenizer(model_dir: Path, tmp: Path, n_spm: int) -> None:
    """The sentencepiece library agrees with the converter's own proto reader, and
    a tokenizer.json made by transformers' ParakeetConverter yields the same
    pieces and types."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=str(model_dir / "tokenizer.model"))
    tok = conv.read_spm_model(model_dir / "tokenizer.model")
    assert tok["tokens"] == [sp.id_to_piece(i) for i in range(sp.vocab_size())]
    assert (tok["unk_id"], tok["bos_id"], tok["eos_id"]) == (sp.unk_id(), sp.bos_id(), sp.eos_id())
    from transformers.convert_slow_tokenizer import ParakeetConverter
    hf = ParakeetConverter(str(model_dir / "tokenizer.model")).converted()
    only_json = tmp / "tokjson"
    only_json.mkdir(exist_ok=True)
    hf.save(str(only_json / "tokenizer.json"))
    tj = conv.load_vocab(only_json, n_spm)
    ts = conv.load_vocab(model_dir, n_spm)
    assert tj["tokens"] == ts["tokens"], "tokenizer.json pieces differ"
    assert tj["types"] == ts["types"], (tj["types"], ts["types"])


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def make_fixture(name: str, cfg_spec: dict, pieces, clips: dict, out_dir: Path, work: Path,
                 stem: str, meta: dict, check: bool, quant_check: bool) -> dict:
    kind = cfg_spec.get("head", name)   # tdt_cap is a TDT model
    n_spm = len(pieces)
    n_mels = cfg_spec["encoder"]["num_mel_bins"]
    model = build_model(kind, cfg_spec, n_spm, [c[0] for c in clips.values()])
    ckpt = work / f"{stem}_hf"
    save_checkpoint(model, n_mels, pieces, ckpt)
    model_gguf = out_dir / f"{stem}.gguf"
    conv.convert(ckpt, model_gguf, "f32", meta)
    check_gguf_layout(model_gguf, model, kind, "f32")
    kv_model = conv_keys(model_gguf)

    refs, report = {}, {"config": cfg_spec, "clips": {}}
    for name, (pcm, _) in clips.items():
        refs[name] = {"": run_reference(model, kind, pcm, n_mels, True),
                      "nomask.": run_reference(model, kind, pcm, n_mels, False)}
        rr = refs[name][""]
        info = {"n_samples": len(pcm), "t_enc": rr["encoder_out"].shape[0], "t_enc_valid": rr["t_enc_valid"],
                "tokens": rr["tokens"], "frames": rr["frames"], "durations": rr["durations"],
                "text": spec.detokenize(rr["tokens"], kv_model), "min_margin": rr["margin"],
                "nomask_tokens": refs[name]["nomask."]["tokens"],
                "nomask_t_enc": refs[name]["nomask."]["encoder_out"].shape[0]}
        if kind == "tdt":
            info["cap_hits"] = [rr["cap_hits"], refs[name]["nomask."]["cap_hits"]]
            capped = cfg_spec.get("cap", False)
            assert (rr["cap_hits"] > 0 and refs[name]["nomask."]["cap_hits"] > 0) == capped
            if capped:
                info["generate_tokens"] = rr["gen_tokens"]
                info["generate_frames"] = rr["gen_frames"]
        if kind == "rnnt":
            info["cap_hits"] = [rr["cap_hits"], refs[name]["nomask."]["cap_hits"]]
            info["symbols_per_frame"] = symbols_per_frame(rr["frames"])
        if check:
            info["spec_check"] = check_against_spec(model_gguf, kind, pcm, refs[name]["nomask."], rr)
        report["clips"][name] = info
    write_ref(out_dir / f"{stem}.ref.gguf", model_gguf.name, kind, clips, refs, kv_model)
    if cfg_spec.get("cap"):
        write_endless(model_gguf, out_dir / "parakeet_tdt_endless_tiny.gguf")

    if quant_check:   # the other file types convert, follow the dtype policy, and stay close
        report["quant"] = {}
        for ot in ("f16", "bf16", "q8_0"):
            q = work / f"{stem}.{ot}.gguf"
            conv.convert(ckpt, q, ot, meta)
            check_gguf_layout(q, model, kind, ot)
            if check:
                r = check_against_spec(q, kind, clips["speech"][0], refs["speech"]["nomask."], refs["speech"][""])
                report["quant"][ot] = {k: r[k] for k in ("enc_max_abs", "out_max_abs", "tokens_equal")}
    return report


def write_endless(src: Path, dst: Path) -> None:
    """A copy of the TDT model at src whose joint never emits blank and always
    picks duration 0, with tdt.max_symbols at steno's limit (100): a search runs
    100 · T steps (the CLI's interruption test, tests/cli_interrupt.sh)."""
    r = gguf.GGUFReader(str(src))
    w = gguf.GGUFWriter(str(dst), r.fields["general.architecture"].contents())
    vocab = r.fields["stt.parakeet.predictor.vocab"].contents()
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        v = 100 if k == "stt.parakeet.tdt.max_symbols" else f.contents()
        vt = f.types[0]
        if vt == VT.ARRAY:
            w.add_key_value(k, v, vt, sub_type=f.types[-1])
        else:
            w.add_key_value(k, v, vt)
    for t in r.tensors:
        data = np.array(t.data)
        if t.name == "joint.out.bias":
            data[vocab - 1] = -1e4   # blank never wins
            data[vocab] = 1e4        # duration 0 always does
        w.add_tensor(t.name, data, raw_shape=list(reversed([int(x) for x in t.shape])),
                     raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def conv_keys(path: Path) -> dict:
    r = gguf.GGUFReader(str(path))
    return {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out-dir", type=Path, default=ROOT / "tests" / "fixtures")
    p.add_argument("--work-dir", type=Path, default=ROOT / "build" / "parakeet_fixture_work",
                   help="checkpoints and the f16/bf16/q8_0 conversions (not committed)")
    p.add_argument("--real-shape", action="store_true",
                   help="build the 0.6B TDT shape (parakeet-tdt-0.6b-v2) into build/parakeet_real instead")
    p.add_argument("--no-check", action="store_true", help="skip the numpy spec cross-check")
    p.add_argument("--kinds", nargs="+", choices=list(TINY), default=list(TINY),
                   help="which tiny fixtures to (re)write (default: all)")
    a = p.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    a.work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as td:
        clips = {"speech": speech_clip(Path(td))}
    if a.real_shape:
        out = ROOT / "build" / "parakeet_real" if a.out_dir == ROOT / "tests" / "fixtures" else a.out_dir
        out.mkdir(parents=True, exist_ok=True)
        pieces = real_pieces(REAL["n_spm"])
        meta = dict(variant="tdt-0.6b-v2", name="Parakeet TDT 0.6B shape, random weights", version="v2",
                    size_label="0.6B")
        rep = make_fixture("tdt", REAL, pieces, clips, out, out, "parakeet_tdt_0.6b_random", meta,
                           check=not a.no_check, quant_check=False)
        print(json.dumps(rep, indent=1, default=str))
        return 0
    clips["synth"] = synth_clip()
    a.out_dir.mkdir(parents=True, exist_ok=True)
    check_tokenizer_dir = a.work_dir / "tok"
    check_tokenizer_dir.mkdir(exist_ok=True)
    report = {}
    for kind in a.kinds:
        meta = dict(variant=f"{kind}-tiny-random", name=f"Parakeet {kind.upper()} tiny, random weights (steno fixture)",
                    version="fixture")
        report[kind] = make_fixture(kind, TINY[kind], TINY_PIECES, clips, a.out_dir, a.work_dir,
                                    f"parakeet_{kind}_tiny", meta, check=not a.no_check,
                                    quant_check=not TINY[kind].get("cap"))
    check_tokenizer(a.work_dir / f"parakeet_{a.kinds[0]}_tiny_hf", check_tokenizer_dir, len(TINY_PIECES))
    (a.work_dir / "report.json").write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
