#!/usr/bin/env python3
"""Whisper large-v3-turbo shapes, side by side on one GPU machine: transformers
(bf16, eager, random init) and steno (the same weights converted to GGUF).

  python3 bench/whisper_real.py --steno build/steno --clip clip11.wav --work /tmp/whisper_real

Steps: build WhisperForConditionalGeneration with large-v3-turbo's shapes
(scripts/dump_whisper.py's turbo_shape: transformers' random init, saved, and
converted to F16 GGUF by scripts/convert_whisper.py; cached in --work); run
`steno bench` on the GGUF and the clip with STENO_BENCH_TOKENS=32; time
transformers' encoder on the clip's first window and its
generate(max_new_tokens=32, min_new_tokens=32, do_sample=False). Random weights
would stop or ramble at random, so both sides decode exactly 32 tokens per
window, greedily, without temperature fallback, each window once. Prints steno's report lines and
one JSON object per measurement; medians of N runs after warm-ups,
CUDA-synchronized. --tiny-shape uses the 2-layer test-fixture shape (5 s
windows) instead: a smoke test that runs on a CPU in seconds."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "scripts"))
import convert_whisper  # noqa: E402
import dump_whisper as dump  # noqa: E402
from parakeet_real import read_wav, timed  # noqa: E402


def make_model(work: Path, tiny: bool) -> tuple[Path, Path]:
    """The transformers checkpoint and its GGUF (cached in work)."""
    if not tiny:
        gguf_path, ckpt = work / "whisper_turbo_shape_random.gguf", work / "whisper_turbo_shape_hf"
        if not gguf_path.exists():
            dump.turbo_shape(work, work)
        return ckpt, gguf_path
    gguf_path, ckpt = work / "whisper_tiny_shape_random.gguf", work / "whisper_tiny_shape_hf"
    if not gguf_path.exists():
        spec = dump.MODELS["whisper_tiny_ml"]
        tok, ids = dump.build_tokenizer(spec["languages"])
        model = dump.build_model(tok, ids, spec["mels"], True)
        dump.save_checkpoint(model, tok, spec["mels"], ckpt)
        convert_whisper.convert(ckpt, gguf_path, spec["outtype"],
                                {"variant": "whisper-tiny-shape", "name": "random tiny shape"})
    return ckpt, gguf_path


def bench_steno(steno: Path, model: Path, clip: Path, runs: int, tokens: int) -> dict:
    """`steno bench` with STENO_BENCH_TOKENS; its report lines echoed, its medians parsed."""
    env = dict(os.environ, STENO_BENCH_TOKENS=str(tokens))
    r = subprocess.run([str(steno), "bench", str(model), str(clip), "-n", str(runs)],
                       capture_output=True, text=True, env=env)
    print(r.stdout, end="", flush=True)
    out = dict(what=f"steno bench {clip.name}, {tokens} tokens per window", rc=r.returncode)
    warm = re.search(r"^warm\s+([\d.]+) ms median of \d+ \(min ([\d.]+), max ([\d.]+)\)", r.stdout, re.M)
    stages = re.search(r"features ([\d.]+) ms, encoder ([\d.]+) ms, decoder ([\d.]+) ms", r.stdout)
    if warm:
        out.update(median_ms=float(warm[1]), min_ms=float(warm[2]), max_ms=float(warm[3]), runs=runs)
    if stages:
        out.update(features_ms=float(stages[1]), encoder_ms=float(stages[2]), decoder_ms=float(stages[3]))
    if r.returncode or not warm:
        out.update(err=r.stderr[-2000:])
    return out


def bench_compiled(ckpt: Path, x, seconds: float, runs: int, device: str) -> list[dict]:
    """The encoder as the strongest PyTorch pick: SDPA attention, then inductor with CUDA
    graphs (torch.compile reduce-overhead), each timed after its warm-ups."""
    from transformers import WhisperForConditionalGeneration
    model = WhisperForConditionalGeneration.from_pretrained(
        ckpt, dtype=torch.bfloat16, attn_implementation="sdpa").to(device).eval()
    out = []
    with torch.no_grad():
        r = timed(lambda: model.model.encoder(x), runs)
        r.update(what=f"transformers bf16 sdpa on {device}: encoder, one 30 s window",
                 x_realtime=seconds / (r["median_ms"] / 1e3))
        out.append(r)
        compiled = torch.compile(model.model.encoder, mode="reduce-overhead")
        t0 = time.time()
        compiled(x)
        first = time.time() - t0
        r = timed(lambda: compiled(x), runs, warm=5)
        r.update(what=f"torch.compile(reduce-overhead) bf16 sdpa on {device}: encoder, one 30 s window",
                 first_call_s=round(first, 1), x_realtime=seconds / (r["median_ms"] / 1e3))
        out.append(r)
    return out


def bench_transformers(ckpt: Path, pcm, runs: int, tokens: int, device: str,
                       compile_: bool = False) -> list[dict]:
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration, logging
    fe = WhisperFeatureExtractor.from_pretrained(ckpt)
    seconds = min(len(pcm), fe.n_samples) / 16000
    x = fe(pcm[:fe.n_samples], sampling_rate=16000, return_tensors="pt").input_features
    model = WhisperForConditionalGeneration.from_pretrained(
        ckpt, dtype=torch.bfloat16, attn_implementation="eager").to(device).eval()
    x = x.to(device, torch.bfloat16)
    tag = f"transformers bf16 eager on {device}"
    out = []
    with torch.no_grad():
        r = timed(lambda: model.model.encoder(x), runs)
        r.update(what=f"{tag}: encoder, 1 × {fe.chunk_length} s window ({seconds:.1f} s of audio)",
                 x_realtime=seconds / (r["median_ms"] / 1e3))
        out.append(r)

        # One pass over the window: without force_unique_generate_call the seek
        # loop decodes it again from any timestamp the random weights pick.
        def generate():
            return model.generate(input_features=x, max_new_tokens=tokens, min_new_tokens=tokens,
                                  do_sample=False, force_unique_generate_call=True,
                                  return_dict_in_generate=True, output_scores=True)
        steps = len(generate().scores)   # tokens actually picked (the prefix is not scored)
        logging.set_verbosity_error()    # its warnings were shown once; not once per timed call
        r = timed(generate, runs, warm=1)
        r.update(what=f"{tag}: generate (language detection, encoder, {tokens} greedy tokens), "
                      f"1 × {seconds:.1f} s", tokens=steps, x_realtime=seconds / (r["median_ms"] / 1e3))
        out.append(r)
    if compile_:
        out += bench_compiled(ckpt, x, seconds, runs, device)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steno", type=Path, required=True)
    p.add_argument("--clip", type=Path, required=True, help="16 kHz mono 16-bit WAV (~11 s)")
    p.add_argument("--work", type=Path, default=Path("/tmp/whisper_real"))
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--tokens", type=int, default=32, help="tokens decoded per window (both sides)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny-shape", action="store_true", help="the 2-layer fixture shape (smoke test)")
    p.add_argument("--skip-transformers", action="store_true")
    p.add_argument("--compile", action="store_true",
                   help="also the encoder with SDPA, eager and under torch.compile(mode='reduce-overhead')")
    a = p.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    ckpt, model = make_model(a.work, a.tiny_shape)
    print(json.dumps(dict(what="model", path=str(model), checkpoint=str(ckpt),
                          seconds=round(time.time() - t0, 1))), flush=True)
    pcm = read_wav(a.clip)
    r = bench_steno(a.steno, model, a.clip, a.runs, a.tokens)
    print(json.dumps(r), flush=True)
    if not a.skip_transformers:
        for r in bench_transformers(ckpt, pcm, a.runs, a.tokens, a.device, a.compile):
            print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
