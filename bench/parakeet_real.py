#!/usr/bin/env python3
"""Parakeet TDT 0.6B shapes, side by side on one GPU machine: transformers
(bf16, eager, random init) and steno (the same weights converted to F16 GGUF by
scripts/convert_parakeet.py).

  python3 bench/parakeet_real.py --steno build/steno --clip clip11.wav --work /tmp/real

Steps: build ParakeetForTDT with the 0.6B config (128 mels, seeded random
weights as scripts/dump_parakeet.py makes them), save it, convert it to F16
GGUF; time transformers' encoder on the clip's features (one clip, and a batch
of 64) and its greedy generate; then run `steno bench` on the GGUF with the
same clip and a 10-minute clip made from it. Prints one JSON object per
measurement; medians of N runs after warm-ups, CUDA-synchronized.

--speech-rate N first makes a copy of the GGUF whose joint emits N tokens on
the clip (the random joint emits on nearly every frame; real speech ~3 a
second): see speech_rate_model. It needs transformers on the CPU for the
encoder's output and up to 10 `steno run`s; --speech-rate-only stops there.
Where transformers' feature extractor cannot run (it wants librosa on the GPU
machine), --save-features NPZ writes the clip's features elsewhere and
--features NPZ reads them."""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import wave
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import convert_parakeet as conv  # noqa: E402
import dump_parakeet as dump  # noqa: E402


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path)) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768


def write_wav(path: Path, pcm: np.ndarray) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((np.clip(pcm, -1, 1) * 32767).astype("<i2").tobytes())


def make_model(work: Path) -> Path:
    """The 0.6B TDT checkpoint and its F16 GGUF (cached in work)."""
    gguf_path = work / "parakeet_tdt_0.6b_random-F16.gguf"
    if gguf_path.exists():
        return gguf_path
    from transformers import ParakeetForTDT
    cfg = dump.build_config("tdt", dump.REAL, dump.REAL["n_spm"])
    torch.manual_seed(dump.REAL["seed"])
    model = ParakeetForTDT(cfg).eval()
    dump.init_weights(model, dump.REAL["seed"])
    ckpt = work / "hf"
    model.save_pretrained(ckpt)
    # The frontend settings the converter reads (the extractor itself needs librosa).
    (ckpt / "preprocessor_config.json").write_text(json.dumps(dict(
        feature_size=128, sampling_rate=16000, n_fft=512, win_length=400, hop_length=160,
        preemphasis=0.97)))
    dump.write_spm_model(ckpt / "tokenizer.model", dump.real_pieces(dump.REAL["n_spm"]))
    meta = dict(variant="tdt-0.6b-v2", name="Parakeet TDT 0.6B shape, random weights",
                version="v2", size_label="0.6B")
    conv.convert(ckpt, gguf_path, "f16", meta)
    return gguf_path


def sync() -> None:
    """Waits for the GPU's queued work (nothing to wait for on CPU)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn, runs: int, warm: int = 3) -> dict:
    for _ in range(warm):
        fn()
    sync()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    return dict(median_ms=statistics.median(ts), min_ms=min(ts), max_ms=max(ts), runs=runs)


def bench_encoder(encoder, label: str, seconds: float, runs: int, warm: int = 3) -> list[dict]:
    """An encoder (eager or compiled) on 1 and 64 clips of random features."""
    frames = int(seconds * 100) + 1
    out = []
    for batch in (1, 64):
        x = torch.randn(batch, frames, 128, device="cuda", dtype=torch.bfloat16)
        mask = torch.ones(batch, frames, device="cuda", dtype=torch.long)
        t0 = time.perf_counter()
        encoder(input_features=x, attention_mask=mask)
        sync()
        first = (time.perf_counter() - t0) * 1e3
        r = timed(lambda: encoder(input_features=x, attention_mask=mask), runs, warm)
        r.update(what=f"{label} encoder, {batch} × {seconds:.1f} s", first_call_ms=first,
                 x_realtime=batch * seconds / (r["median_ms"] / 1e3))
        out.append(r)
    return out


def bench_transformers(ckpt: Path, seconds: float, runs: int, compile_: bool) -> list[dict]:
    from transformers import ParakeetForTDT
    model = ParakeetForTDT.from_pretrained(ckpt, torch_dtype=torch.bfloat16).to("cuda").eval()
    frames = int(seconds * 100) + 1
    out = []
    with torch.no_grad():
        out += bench_encoder(model.encoder, "transformers bf16", seconds, runs)
        if compile_:
            # The strongest thing a PyTorch user could pick: inductor with CUDA graphs.
            compiled = torch.compile(model.encoder, mode="reduce-overhead")
            out += bench_encoder(compiled, "torch.compile(reduce-overhead) bf16", seconds, runs, warm=5)
        x = torch.randn(1, frames, 128, device="cuda", dtype=torch.bfloat16)
        mask = torch.ones(1, frames, device="cuda", dtype=torch.long)
        model.generation_config.decoder_start_token_id = model.config.blank_token_id
        r = timed(lambda: model.generate(input_features=x, attention_mask=mask), max(3, runs // 3), warm=1)
        r.update(what=f"transformers bf16 generate (encoder + TDT greedy), 1 × {seconds:.1f} s",
                 x_realtime=seconds / (r["median_ms"] / 1e3))
        out.append(r)
    return out


def count_tokens(steno: Path, model: Path, clip: Path) -> int:
    r = subprocess.run([str(steno), "run", "--json", str(model), str(clip)], capture_output=True,
                       text=True, check=True)
    return len(json.loads(r.stdout)["tokens"])


def clip_features(clip: Path) -> dict:
    """transformers' log-mel features of the clip ([1][frames][128] f32) and
    their attention mask ([1][frames]: the last frame is padding)."""
    from transformers import ParakeetFeatureExtractor
    f = ParakeetFeatureExtractor(feature_size=128)(read_wav(clip), sampling_rate=16000,
                                                    return_tensors="np")
    return dict(input_features=f["input_features"].astype(np.float32),
                attention_mask=f["attention_mask"].astype(np.int64))


def encoder_frames(ckpt: Path, clip: Path, features: Path | None = None) -> np.ndarray:
    """transformers' encoder output [frames][d] on the clip, for the
    speech-rate file's emit signal: f32 on the CPU (no TF32 convolutions), the
    weights rounded to f16 as the F16 GGUF holds them. features: the clip's
    features saved by --save-features on a machine whose transformers makes
    them (the GPU machine's asks for librosa), else made here."""
    from transformers import ParakeetForTDT
    model = ParakeetForTDT.from_pretrained(ckpt).half().float().eval()
    f = dict(np.load(features)) if features else clip_features(clip)
    with torch.no_grad():
        out = model.encoder(**{k: torch.from_numpy(v) for k, v in f.items()})
    return out.last_hidden_state[0].double().numpy()


def emit_direction(x: np.ndarray) -> np.ndarray:
    """The unit direction along which the clip's frames spread most: the first
    principal axis of the frames near the median (the random encoder's output
    is nearly the same on every frame, ~0.1 apart in norm, except a few at the
    edges that would take the whole axis)."""
    dist = np.linalg.norm(x - np.median(x, 0), axis=1)
    inner = x[dist <= 3 * np.median(dist)]
    v = np.linalg.svd(inner - inner.mean(0), full_matrices=False)[2][0]
    return v / np.linalg.norm(v)


# The emit signal's gain in the joint: the encoder row (f16, entries ≤ ~6) and
# the blank's weight on the signal (f16, exact): 2^20 per unit of projection,
# so frames ~1e-3 apart differ by ~1000 in the blank logit, against token
# logits of O(1).
ENC_GAIN, BLANK_GAIN = 32.0, 32768.0


def _set_emit_threshold(t: dict, u: tuple[int, int], theta: float) -> None:
    t["joint.enc.bias"][u[0]] = -ENC_GAIN * theta
    t["joint.enc.bias"][u[1]] = ENC_GAIN * theta


def _make_emit_joint(t: dict, v: np.ndarray, durations: list[int],
                     extra: int) -> tuple[tuple[int, int], np.ndarray]:
    """Rewires joint units 0 and 1 so the blank logit is
    BLANK_GAIN·(relu(a) − relu(−a)) + bias = BLANK_GAIN·a + bias with
    a = ENC_GAIN·(v·x_t − θ): frame t's encoder output alone, not the
    predictor, decides blank (v·x_t > θ) or a token; the duration head is
    fixed to duration 1 so every frame is visited once and a token frame
    emits exactly one token. Returns the units and v as stored (f16)."""
    u = (0, 1)
    ew, pw, ow, ob = (t[k] for k in ("joint.enc.weight", "joint.pred.weight", "joint.out.weight",
                                     "joint.out.bias"))
    row = (ENC_GAIN * v).astype(ew.dtype)
    ew[u[0]], ew[u[1]] = row, -row
    for k in u:   # the predictor adds nothing to the two units
        pw[k] = 0
        t["joint.pred.bias"][k] = 0
    vocab = ow.shape[0] - extra
    ow[:, list(u)] = 0           # no other output sees them...
    ow[vocab - 1, u[0]], ow[vocab - 1, u[1]] = BLANK_GAIN, -BLANK_GAIN   # ...but blank
    ow[vocab:] = 0               # durations: a constant head that picks duration 1
    ob[vocab:] = [1.0 if d == 1 else 0.0 for d in durations]
    return u, row.astype(np.float64) / ENC_GAIN


def speech_rate_model(steno: Path, model: Path, clip: Path, want: int, ckpt: Path,
                      features: Path | None = None,
                      max_runs: int = 10) -> tuple[Path, int, list[tuple[int, int]]]:
    """A copy of the random model that emits about `want` tokens on the clip
    (real speech: ~3 a second; the random joint emits on almost every frame,
    and its blank-vs-token margin is so nearly the same on every frame that a
    bias on the blank logit jumps from ~all frames to ~none). Only the joint's
    tensors change (_make_emit_joint): a token is emitted exactly on the frames
    whose encoder output projects below θ on emit_direction, so steno's count
    grows with θ one frame at a time. θ starts between the want-th and
    want+1-th smallest projections of transformers' encoder output; each steno
    run's count narrows a bracket on θ, the next θ being the transformers cut
    `want − count` frames further (steno's encoder differs from transformers'
    by rounding, ~1e-3 on the projection, about the gap between frames) or,
    when that falls outside the bracket, its middle. At most max_runs steno
    runs; the file keeps the θ whose count came nearest. Returns the file, the
    tokens steno emitted with it, and (frames below θ by transformers, steno's
    count) per run."""
    import shutil
    from gguf import GGUFReader
    out = model.with_name(model.stem + f"-speech{want}.gguf")
    shutil.copyfile(model, out)
    r = GGUFReader(out, "r+")
    f = r.fields["stt.parakeet.tdt.durations"]
    durations = [int(f.parts[i][0]) for i in f.data]
    extra = int(r.fields["stt.parakeet.joint.num_extra_outputs"].parts[-1][0])
    t = {x.name: x.data for x in r.tensors if x.name.startswith("joint.")}
    x = encoder_frames(ckpt, clip, features)
    u, v = _make_emit_joint(t, emit_direction(x), durations, extra)
    proj = np.sort(x @ v)
    cuts = np.concatenate([[proj[0] - 1], (proj[1:] + proj[:-1]) / 2, [proj[-1] + 1]])
    theta = float(cuts[min(max(want, 0), len(proj))])
    lo, hi, seen, best = -np.inf, np.inf, [], None   # steno's count < want at lo, > want at hi
    for _ in range(max_runs):
        _set_emit_threshold(t, u, theta)
        r.data.flush()
        n = count_tokens(steno, out, clip)
        k = int(np.searchsorted(proj, theta))
        seen.append((k, n))
        print(f"speech-rate: θ {theta:.6f} ({k} frames below by transformers): steno emitted "
              f"{n} tokens", file=sys.stderr, flush=True)
        if best is None or abs(n - want) < abs(best[1] - want):
            best = (theta, n)
        if n == want:
            break
        lo, hi = (lo, theta) if n > want else (theta, hi)
        guess = float(cuts[min(max(k + want - n, 0), len(proj))])
        if not lo < guess < hi:
            if not (np.isfinite(lo) and np.isfinite(hi)) or hi - lo < 1e-7:
                break   # at the end of the grid, or below the bias's f32 resolution
            guess = (lo + hi) / 2
        theta = guess
    if best[0] != theta:
        _set_emit_threshold(t, u, best[0])
        r.data.flush()
    return out, best[1], seen


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steno", type=Path, required=True)
    p.add_argument("--clip", type=Path, required=True, help="16 kHz mono 16-bit WAV (~11 s)")
    p.add_argument("--work", type=Path, default=Path("/tmp/parakeet_real"))
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--compile", action="store_true",
                   help="also time the encoder under torch.compile(mode='reduce-overhead')")
    p.add_argument("--long-runs", type=int, default=None,
                   help="steno runs on the 10-minute clip (default runs/4, at least 2; 0 skips it)")
    p.add_argument("--speech-rate", type=int, default=0, metavar="TOKENS",
                   help="also a copy of the model whose joint emits about TOKENS tokens on the clip, "
                        "timed by steno")
    p.add_argument("--speech-rate-only", action="store_true",
                   help="stop after making the --speech-rate file (no timings)")
    p.add_argument("--features", type=Path, default=None,
                   help="the clip's features for --speech-rate, as --save-features wrote them")
    p.add_argument("--save-features", type=Path, default=None, metavar="NPZ",
                   help="only write the clip's features (transformers' extractor) to NPZ")
    a = p.parse_args()
    if a.save_features:
        np.savez(a.save_features, **clip_features(a.clip))
        return 0
    a.work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    model = make_model(a.work)
    print(json.dumps(dict(what="model", path=str(model), seconds=round(time.time() - t0, 1))), flush=True)
    if a.speech_rate:
        biased, n, seen = speech_rate_model(a.steno, model, a.clip, a.speech_rate, a.work / "hf",
                                            a.features)
        print(json.dumps(dict(what="speech-rate model", path=str(biased), want=a.speech_rate,
                              tokens=n, runs=[dict(frames_below=k, tokens=c) for k, c in seen])),
              flush=True)
        if a.speech_rate_only:
            return 0
        r = subprocess.run([str(a.steno), "bench", str(biased), str(a.clip), "-n", str(a.runs)],
                           capture_output=True, text=True)
        print(json.dumps(dict(what=f"steno bench {a.clip.name}, speech-rate model ({n} tokens)",
                              path=str(biased), rc=r.returncode, out=r.stdout,
                              err=r.stderr[-2000:])), flush=True)
    pcm = read_wav(a.clip)
    seconds = len(pcm) / 16000
    long = a.work / "clip600.wav"
    reps = int(np.ceil(600 / (seconds + 1)))
    write_wav(long, np.concatenate([np.concatenate([pcm, np.zeros(16000, np.float32)])] * reps)[: 600 * 16000])
    long_runs = max(2, a.runs // 4) if a.long_runs is None else a.long_runs
    for clip, runs in ((a.clip, a.runs), (long, long_runs)):
        if runs == 0:
            continue
        r = subprocess.run([str(a.steno), "bench", str(model), str(clip), "-n", str(runs)],
                           capture_output=True, text=True)
        print(json.dumps(dict(what=f"steno bench {clip.name}", rc=r.returncode,
                              out=r.stdout, err=r.stderr[-2000:])), flush=True)
    for r in bench_transformers(a.work / "hf", seconds, a.runs, a.compile):
        print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
