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
measurement; medians of N runs after warm-ups, CUDA-synchronized."""
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


def speech_rate_model(steno: Path, model: Path, clip: Path, want: int) -> tuple[Path, float, int]:
    """A copy of the random model whose blank logit is raised until steno's greedy
    search emits about `want` tokens on the clip (real speech: ~3 a second; the
    random joint emits on almost every frame). Only joint.out.bias changes, in
    place in the copy; returns the file, the offset added and the tokens."""
    import shutil
    from gguf import GGUFReader
    out = model.with_name(model.stem + f"-speech{want}.gguf")
    shutil.copyfile(model, out)
    r = GGUFReader(out, "r+")
    extra = int(r.fields["stt.parakeet.joint.num_extra_outputs"].parts[-1][0])
    bias = next(t for t in r.tensors if t.name == "joint.out.bias").data
    blank = bias.shape[0] - extra - 1
    base = float(bias[blank])
    lo, hi, best = 0.0, 64.0, None
    for _ in range(14):   # bisect the offset on the token count (falls as the offset grows)
        mid = (lo + hi) / 2
        bias[blank] = base + mid
        r.data.flush()
        n = count_tokens(steno, out, clip)
        if best is None or abs(n - want) < abs(best[1] - want):
            best = (mid, n)
        if n == want:
            break
        lo, hi = (mid, hi) if n > want else (lo, mid)
    bias[blank] = base + best[0]
    r.data.flush()
    return out, best[0], count_tokens(steno, out, clip)


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
                   help="also a copy of the model biased to emit about TOKENS tokens on the clip, timed by steno")
    a = p.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    model = make_model(a.work)
    print(json.dumps(dict(what="model", path=str(model), seconds=round(time.time() - t0, 1))), flush=True)
    if a.speech_rate:
        biased, offset, n = speech_rate_model(a.steno, model, a.clip, a.speech_rate)
        r = subprocess.run([str(a.steno), "bench", str(biased), str(a.clip), "-n", str(a.runs)],
                           capture_output=True, text=True)
        print(json.dumps(dict(what=f"steno bench {a.clip.name}, speech-rate model ({n} tokens, "
                                   f"blank logit +{offset:.3f})", path=str(biased), rc=r.returncode,
                              out=r.stdout, err=r.stderr[-2000:])), flush=True)
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
