#!/usr/bin/env python3
"""Times transcribe.cpp (the peer engine, built by hand: docs/benchmarks.md) on
one clip, for the side-by-side tables next to `steno bench`.

  python3 bench/peer_transcribe_cpp.py --binary .peer/build/bin/transcribe-bench \
      --model parakeet_tdt_0.6b_random-F16.gguf --clip clip11.wav --runs 5

Two kinds of binary:
- transcribe-bench (built with -DTRANSCRIBE_BUILD_TOOLS=ON): one process loads
  the model once, runs --warmup 1 then --iters N, and writes a JSON document
  with per-run mel/encode/decode/wall milliseconds; we report their medians.
- transcribe-cli (or anything else): N+1 processes, the first a warm-up; each
  one's wall time (model load included) is measured here, and its own
  "timings: load=… mel=… encode=… decode=…" log line is parsed.
Prints one JSON object per measurement, as bench/parakeet_real.py does.
Arguments after `--` go to the binary unchanged."""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
import wave
from pathlib import Path

STAGES = ("mel_ms", "encode_ms", "decode_ms", "total_ms", "wall_ms")
# transcribe_print_timings' line (transcribe-cli logs it to stderr, "[info] " first).
TIMINGS = re.compile(r"timings: load=([\d.]+) ms\s+mel=([\d.]+) ms\s+"
                     r"encode=([\d.]+) ms\s+decode=([\d.]+) ms")


def clip_seconds(path: Path) -> float:
    with wave.open(str(path)) as w:
        return w.getnframes() / w.getframerate()


def summary(what: str, values: list[float], seconds: float | None = None) -> dict:
    r = dict(what=what, median_ms=statistics.median(values), min_ms=min(values),
             max_ms=max(values), runs=len(values))
    if seconds is not None and r["median_ms"] > 0:
        r["x_realtime"] = seconds / (r["median_ms"] / 1e3)
    return r


def run(cmd: list[str], timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    # errors="replace": a random-weight model can emit invalid UTF-8 as its text.
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)
    return r, (time.perf_counter() - t0) * 1e3


def failed(cmd: list[str], r: subprocess.CompletedProcess) -> dict:
    return dict(what="transcribe.cpp failed", cmd=cmd, rc=r.returncode,
                out=r.stdout[-2000:], err=r.stderr[-2000:])


def bench_tool(a: argparse.Namespace, seconds: float) -> list[dict]:
    """transcribe-bench: its own warm-up and repetitions, its own JSON."""
    cmd = [str(a.binary), "--model", str(a.model), "--sample", str(a.clip), "--warmup", "1",
           "--iters", str(a.runs), "--backend", a.backend, "--quiet", *a.extra]
    r, ms = run(cmd, a.timeout)
    if r.returncode != 0:
        return [failed(cmd, r)]
    # strict=False: the tool escapes only quotes and backslashes in the transcript.
    doc = json.loads(r.stdout, strict=False)
    name = f"transcribe.cpp ({doc.get('backend')}) {a.clip.name}"
    out = [dict(what=f"{name}: load", ms=doc.get("load_ms"), process_ms=ms,
                text=doc.get("hyp_text"), n_tokens=doc.get("n_tokens"))]
    for stage in STAGES:
        vals = [it[stage] for it in doc["per_iter"]]
        out.append(summary(f"{name}: {stage[:-3]}", vals,
                           seconds if stage in ("total_ms", "wall_ms") else None))
    return out


def bench_cli(a: argparse.Namespace, seconds: float) -> list[dict]:
    """Any other binary (transcribe-cli): one process per run, the first a warm-up."""
    cmd = [str(a.binary), "-m", str(a.model), "--backend", a.backend, *a.extra, str(a.clip)]
    walls, stages, text = [], {k: [] for k in ("load_ms", "mel_ms", "encode_ms", "decode_ms")}, None
    for i in range(a.runs + 1):
        r, ms = run(cmd, a.timeout)
        if r.returncode != 0:
            return [failed(cmd, r)]
        if i == 0:
            continue
        walls.append(ms)
        m = TIMINGS.search(r.stderr + r.stdout)
        if m:
            for k, v in zip(stages, m.groups()):
                stages[k].append(float(v))
        text = next((ln[6:] for ln in r.stdout.splitlines() if ln.startswith("text: ")), text)
    name = f"transcribe.cpp ({a.backend}) {a.clip.name}"
    out = [summary(f"{name}: process wall (load + run)", walls, seconds)]
    out += [summary(f"{name}: {k[:-3]}", v) for k, v in stages.items() if v]
    if not stages["mel_ms"]:
        out.append(dict(what=f"{name}: no timings line in the output (-q silences it)"))
    out.append(dict(what=f"{name}: text", text=text))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", type=Path, required=True,
                   help="transcribe-bench (preferred) or transcribe-cli")
    p.add_argument("--model", type=Path, required=True, help="GGUF model")
    p.add_argument("--clip", type=Path, required=True, help="16 kHz mono WAV")
    p.add_argument("--runs", type=int, default=5, help="measured runs (plus one warm-up)")
    p.add_argument("--backend", default="cuda",
                   help="auto|cpu|cpu_accel|metal|vulkan|cuda|rocm (default cuda)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per process")
    p.add_argument("extra", nargs="*", help="after --: passed to the binary")
    a = p.parse_args()
    if a.runs < 1:
        p.error("--runs must be at least 1")
    seconds = clip_seconds(a.clip)
    bench = bench_tool if "transcribe-bench" in a.binary.name else bench_cli
    try:
        results = bench(a, seconds)
    except (subprocess.TimeoutExpired, json.JSONDecodeError, KeyError, OSError) as e:
        results = [dict(what="transcribe.cpp failed", error=f"{type(e).__name__}: {e}")]
    for r in results:
        print(json.dumps(r), flush=True)
    return 0 if all(r["what"] != "transcribe.cpp failed" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
