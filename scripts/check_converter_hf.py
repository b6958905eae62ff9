#!/usr/bin/env python3
"""Check the converters of transformers checkpoints (convert_moonshine.py for
Moonshine and Moonshine Streaming, convert_parakeet.py for Nemotron 3.5 ASR
Streaming) against the committed fixtures, without downloading anything.

For each family, the tiny random reference model is rebuilt exactly as its dump
script builds it (same seeds, same tuning), saved in the published checkpoint
layout (transformers' save_pretrained plus the tokenizer and processor files a
published repository carries), converted with the family's converter, and the
result compared with tests/fixtures/FAMILY_tiny.gguf:

  * f32: every key of the fixture present with the same GGUF type and value,
    every tensor with the same name, type, shape and bytes; keys the fixture
    lacks are listed and must be ones transcribe.cpp's converters write too;
  * f16 / q8_0: the same keys (file type aside), and every tensor's bytes equal
    to the fixture's F32 data encoded in the type the spec's dtype policy gives
    it (stated here separately from the converter's own rule).

Where the Nemotron fixture and a converted published checkpoint legitimately
differ, the difference is allowed by name and its reason printed (NEMOTRON_SKIP).

With --steno BUILD the family's C tests then run with the converted F32 file in
place of the fixture (STENO_SOURCE_DIR pointing at a copy of tests/fixtures with
the file swapped), and `steno run` on all three files.

    /root/venv/bin/python scripts/check_converter_hf.py moonshine moonshine_streaming \
        nemotron_asr nemotron_asr_spm [--work build/converter_check] [--steno build] [--reuse]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(ROOT / "scripts"))
from gguf_tensors import encode  # noqa: E402

# Keys transcribe.cpp's converters write that the fixtures' dump scripts leave out
# (spec gguf-whisper-moonshine.md 0 and 3.2, gguf-conformer-families.md 0.2/0.3).
IDENTITY = {"general.name", "general.basename", "general.size_label", "general.file_type",
            "general.license", "general.repo_url"}
EXTRA_OK = {
    "moonshine": IDENTITY | {"stt.capability.lang_detect", "stt.capability.translate",
                             "stt.capability.timestamps", "tokenizer.ggml.merges",
                             "tokenizer.ggml.byte_fallback", "tokenizer.ggml.add_bos_token"},
}
EXTRA_OK["moonshine_streaming"] = EXTRA_OK["moonshine"]
EXTRA_OK["nemotron_asr"] = IDENTITY | {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}
# Where the Nemotron fixture and a converted published checkpoint differ, and why.
NEMOTRON_SKIP = {
    "tokenizer.ggml.token_type": "compared below: USER_DEFINED pieces (<sep>) are NORMAL in the "
                                 "converted file as transcribe.cpp writes them; dump_nemotron_asr.py "
                                 "wrote SentencePiece's 4; steno reads both as text",
    "stt.parakeet.prompt.dictionary.locales": "compared below as a mapping locale -> slot: "
                                              "processor_config.json stores the dictionary sorted",
    "stt.parakeet.prompt.dictionary.indices": "(with the locales)",
}


# ---------------------------------------------------------------------------
# Comparing two GGUF files
# ---------------------------------------------------------------------------

def fields(r: gguf.GGUFReader) -> dict:
    return {k: v for k, v in r.fields.items() if not k.startswith("GGUF.")}


def _value(f):
    v = f.contents()
    return [float(x) for x in v] if isinstance(v, list) and v and isinstance(v[0], float) else v


def compare_keys(got: dict, want: dict, extra_ok: set, skip: dict) -> list[str]:
    """Fixture keys equal in type and value (except those in `skip`, each with
    its reason printed); converter-only keys must be in `extra_ok`."""
    bad = []
    for k, f in want.items():
        if k in skip:
            print(f"    {k}: not compared exactly ({skip[k]})")
            continue
        if k not in got:
            bad.append(f"key {k} missing")
        elif [t.name for t in got[k].types] != [t.name for t in f.types]:
            bad.append(f"key {k}: type {[t.name for t in got[k].types]} vs {[t.name for t in f.types]}")
        elif _value(got[k]) != _value(f):
            bad.append(f"key {k}: {str(_value(got[k]))[:80]} vs {str(_value(f))[:80]}")
    extra = sorted(set(got) - set(want))
    if extra:
        print(f"    keys only in the converted file: {', '.join(extra)}")
    bad += [f"unexpected key {k}" for k in extra if k not in extra_ok]
    return bad


def expected_type(family: str, name: str, ne0: int, ndim: int, outtype: str) -> QT:
    """The spec's dtype policy, by tensor (gguf-whisper-moonshine.md 3.3 / 4.3,
    gguf-conformer-families.md 5): 1-D tensors (norms, biases, log_k) and the
    Moonshine conv stem with its GroupNorm stay F32; Parakeet's conv kernels stay
    F32 and its pointwise convs are F16; all else is F16 (f16) or Q8_0 (q8_0),
    Q8_0 falling back to F16 where ne[0] % 32 != 0."""
    if outtype == "f32" or ndim == 1:
        return QT.F32
    if family.startswith("moonshine") and name.startswith("enc.conv."):
        return QT.F32
    if family == "nemotron_asr":
        if name.endswith(("pos_bias_u", "pos_bias_v")) or name.startswith("enc.pre_encode.conv.") \
                or name.endswith("conv.depthwise.weight"):
            return QT.F32
        if name.endswith(("conv.pointwise1.weight", "conv.pointwise2.weight")):
            return QT.F16
    if outtype == "f16" or ne0 % 32:
        return QT.F16
    return QT.Q8_0


def compare_tensors(family: str, got: gguf.GGUFReader, want: gguf.GGUFReader, outtype: str) -> list[str]:
    bad = []
    g = {t.name: t for t in got.tensors}
    w = {t.name: t for t in want.tensors}
    if set(g) != set(w):
        return [f"tensors only converted: {sorted(set(g) - set(w))[:6]}, only fixture: "
                f"{sorted(set(w) - set(g))[:6]}"]
    if [t.name for t in got.tensors] != [t.name for t in want.tensors]:
        print("    tensor order differs from the fixture's (loaders look tensors up by name)")
    for name, wt in w.items():
        gt = g[name]
        shape = [int(x) for x in wt.shape]
        if [int(x) for x in gt.shape] != shape:
            bad.append(f"{name}: ne {list(gt.shape)} vs {shape}")
            continue
        if wt.tensor_type != QT.F32:
            bad.append(f"{name}: the fixture is not F32")
            continue
        qt = expected_type(family, name, shape[0], len(shape), outtype)
        if gt.tensor_type != qt:
            bad.append(f"{name}: type {gt.tensor_type.name}, the policy gives {qt.name}")
            continue
        data = np.asarray(wt.data, dtype=np.float32).reshape(list(reversed(shape)))
        ref = np.ascontiguousarray(encode(data, qt)).view(np.uint8).ravel()
        if not np.array_equal(np.asarray(gt.data).view(np.uint8).ravel(), ref):
            bad.append(f"{name}: bytes differ from the fixture's data encoded as {qt.name}")
    return bad


def nemotron_extras(got: dict, want: dict) -> list[str]:
    bad = []
    gt, wt = got["tokenizer.ggml.token_type"].contents(), want["tokenizer.ggml.token_type"].contents()
    off = [i for i, (g, w) in enumerate(zip(gt, wt)) if g != w and not (w == 4 and g == 1)]
    if len(gt) != len(wt) or off:
        bad.append(f"token types differ at {off[:8]}")
    p = "stt.parakeet.prompt.dictionary."
    table = lambda f: dict(zip(f[p + "locales"].contents(), f[p + "indices"].contents()))  # noqa: E731
    if len(got[p + "locales"].contents()) != len(want[p + "locales"].contents()) or table(got) != table(want):
        bad.append(f"prompt dictionary {table(got)} vs {table(want)}")
    return bad


def compare(family: str, conv: Path, fixture: Path, outtype: str, skip: dict) -> bool:
    got, want = gguf.GGUFReader(str(conv)), gguf.GGUFReader(str(fixture))
    skip = dict(skip)
    if outtype != "f32" and "general.file_type" in fields(want):
        skip["general.file_type"] = f"{outtype} file"
    bad = compare_keys(fields(got), fields(want), EXTRA_OK[family], skip)
    if family == "nemotron_asr":
        bad += nemotron_extras(fields(got), fields(want))
    bad += compare_tensors(family, got, want, outtype)
    n = len(want.tensors)
    print(f"  {conv.name} vs {fixture.name}: {len(fields(want))} keys, {n} tensors: "
          + ("equal" if not bad else f"{len(bad)} differences"))
    for b in bad[:20]:
        print("    DIFF", b)
    return not bad


# ---------------------------------------------------------------------------
# Published checkpoints of the tiny models
# ---------------------------------------------------------------------------

def bpe_tokenizer_json(path: Path, pieces: list[str], specials: list[str]) -> None:
    """A tokenizer.json shaped like Moonshine's: SentencePiece-style BPE with byte
    fallback, ▁ for spaces, the control pieces as special added tokens. Merges:
    every piece that splits into two pieces of the vocabulary (first split)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = []
    for p in pieces:
        if p in specials or p.startswith("<0x"):
            continue
        for cut in range(1, len(p)):
            if p[:cut] in vocab and p[cut:] in vocab:
                merges.append((p[:cut], p[cut:]))
                break
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True,
                               fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tok.save(str(path))


def moonshine_checkpoints(work: Path) -> dict:
    """Both Moonshine fixtures' models, rebuilt by dump_moonshine.py's own seed
    search (same clips, seeds and </s> shaping), saved as published."""
    import dump_moonshine as dm
    from transformers import Wav2Vec2FeatureExtractor
    clips = {"speech": dm.speech_clip(work), "noise": dm.noise_clip()}
    pieces, _ = dm.vocabulary()
    out = {}
    m, _ = dm.find_seed(lambda seed: dm.build(len(pieces), seed), clips, range(1000, 1200), pieces)
    out["moonshine"] = m
    clips = {k: v[: len(v) // 80 * 80] for k, v in clips.items()}
    m, _ = dm.find_seed(lambda seed: dm.build_streaming(len(pieces), seed), clips, range(2000, 2200), pieces)
    out["moonshine_streaming"] = m
    dirs = {}
    for fam, model in out.items():
        d = work / f"{fam}_tiny_hf"
        shutil.rmtree(d, ignore_errors=True)
        model.save_pretrained(d)
        Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0,
                                 do_normalize=False, return_attention_mask=True).save_pretrained(d)
        bpe_tokenizer_json(d / "tokenizer.json", pieces, ["<unk>", "<s>", "</s>"])
        dirs[fam] = d
    return dirs


def torch_no_grad_lazy(fn):
    """torch.no_grad() around fn, torch imported only when fn runs."""
    def wrapped(*args, **kwargs):
        import torch
        with torch.no_grad():
            return fn(*args, **kwargs)
    return wrapped


def nemotron_checkpoint(work: Path, with_spm: bool) -> Path:
    """dump_nemotron_asr.py's model (same seeds and tuning on the same clip),
    saved as transformers publishes Nemotron3_5AsrForRNNT: save_pretrained, and
    the processor (feature extractor, prompt dictionary, the lookaheads 3, 1, 0)
    with a ParakeetTokenizer made from the tiny SentencePiece model; with_spm
    keeps tokenizer.model beside it."""
    import tempfile
    import torch
    import dump_nemotron_asr as dn
    import dump_parakeet as dp
    from transformers import (Nemotron3_5AsrProcessor, NemotronAsrStreamingFeatureExtractor,
                              ParakeetTokenizer)
    from transformers.convert_slow_tokenizer import ParakeetConverter
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        pcm, _ = dp.speech_clip(Path(tmp))
    mel, valid = dn.features(pcm)
    model = dn.build_model()
    with torch.no_grad():
        dn.tune(model, mel[0, :valid], torch.Generator().manual_seed(dn.SEED + 1))
    d = work / ("nemotron_asr_tiny_hf" + ("_spm" if with_spm else ""))
    shutil.rmtree(d, ignore_errors=True)
    model.save_pretrained(d)
    dp.write_spm_model(work / "nemotron.model", dn.PIECES)
    tok = ParakeetTokenizer(tokenizer_object=ParakeetConverter(str(work / "nemotron.model")).converted())
    fe = NemotronAsrStreamingFeatureExtractor(feature_size=dn.ENCODER["num_mel_bins"])
    Nemotron3_5AsrProcessor(fe, tok, supported_num_lookahead_tokens=[r for _, r in dn.CHOICES],
                            prompt_dictionary=dn.PROMPTS, num_prompts=dn.NUM_PROMPTS).save_pretrained(d)
    if with_spm:
        shutil.copy(work / "nemotron.model", d / "tokenizer.model")
    return d


@torch_no_grad_lazy
def nemotron_en_model(work: Path):
    """A tiny NemotronAsrStreamingForRNNT (nemotron-speech-streaming-en: no prompt)
    with dump_nemotron_asr.py's encoder, predictor, seeds and head tuning, the
    clip of the fixtures as a WAV, and transformers' greedy text on it."""
    import math
    import wave
    import torch
    import dump_nemotron_asr as dn
    import dump_parakeet as dp
    from transformers import NemotronAsrStreamingConfig, NemotronAsrStreamingForRNNT
    torch.set_num_threads(1)
    n = len(dp.TINY_PIECES)
    cfg = NemotronAsrStreamingConfig(vocab_size=n + 1, blank_token_id=n, pad_token_id=n, encoder_config=dn.ENCODER,
                                     decoder_hidden_size=dn.PRED_H, num_decoder_layers=dn.PRED_LAYERS,
                                     hidden_act="relu", max_symbols_per_step=10)
    torch.manual_seed(dn.SEED)
    model = NemotronAsrStreamingForRNNT(cfg).eval()
    dp.init_weights(model, dn.SEED)
    pcm, _ = dp.speech_clip(work)
    mel, valid = dn.features(pcm)
    g = torch.Generator().manual_seed(dn.SEED + 1)
    e = model.get_audio_features(input_features=mel[:, :valid], num_lookahead_tokens=dn.RIGHT).last_hidden_state[0]
    dp._centered_linear(model.encoder_projector, e, 1.0, g)      # as dn.tune, without the prompt
    H, dpj, h = dn.PRED_H, model.decoder.decoder_projector, model.joint.head
    dpj.weight.copy_(torch.randn(dpj.weight.shape, generator=g) * 2.0 / math.sqrt(H))
    dpj.bias.zero_()
    ep = model.encoder_projector(e)
    o, _ = model.decoder.lstm(torch.zeros(1, 1, H))
    z = torch.relu(ep + dpj(o)[0, 0])
    w = torch.randn(h.weight.shape, generator=g) * 6.0 / math.sqrt(H) / (z.std(0) + 1e-6)
    h.weight.copy_(w)
    h.bias.copy_(-(w @ z.mean(0)))
    lg = model.joint(dpj(o)[0, 0], ep)
    h.bias[n] += dp._split_between((lg[:, :n].max(-1).values - lg[:, n]).numpy(), 0.85)
    model.generation_config.decoder_start_token_id = model.generation_config.bos_token_id = n
    seq = model.generate(input_features=mel[:, :valid], num_lookahead_tokens=dn.RIGHT).sequences[0].tolist()
    with wave.open(str(work / "nemotron_en_clip.wav"), "wb") as f:
        f.setnchannels(1), f.setsampwidth(2), f.setframerate(16000)
        f.writeframes(np.round(pcm * 32768).astype("<i2").tobytes())   # the clip was int16 / 32768
    return model, dn.text_of([t for t in seq if t != n])


def nemotron_en_check(work: Path, build: Path | None) -> bool:
    """nemotron-speech-streaming-en has no fixture: its tiny model is saved as
    published (NemotronAsrStreamingProcessor, lookaheads 3, 1, 0), converted, the
    streaming keys checked, and steno's text on the clip compared with
    transformers' generate() for the f32, f16 and q8_0 files."""
    import dump_nemotron_asr as dn
    import dump_parakeet as dp
    from transformers import (NemotronAsrStreamingFeatureExtractor, NemotronAsrStreamingProcessor,
                              ParakeetTokenizer)
    from transformers.convert_slow_tokenizer import ParakeetConverter
    model, text = nemotron_en_model(work)
    d = work / "nemotron_en_tiny_hf"
    shutil.rmtree(d, ignore_errors=True)
    model.save_pretrained(d)
    dp.write_spm_model(work / "nemotron_en.model", dp.TINY_PIECES)
    tok = ParakeetTokenizer(tokenizer_object=ParakeetConverter(str(work / "nemotron_en.model")).converted())
    NemotronAsrStreamingProcessor(NemotronAsrStreamingFeatureExtractor(feature_size=dn.ENCODER["num_mel_bins"]),
                                  tok, supported_num_lookahead_tokens=[3, 1, 0]).save_pretrained(d)
    e = "stt.parakeet.encoder."
    want = {e + "att_context_left": 8, e + "att_context_right": 3, e + "att_context_style": "chunked_limited",
            e + "att_context_size_choices": [8, 3, 8, 1, 8, 0], e + "conv_context_left": 4,
            e + "conv_context_right": 0, e + "conv_norm_type": "layer_norm",
            e + "streaming.pre_encode_cache_size": 9, e + "streaming.drop_extra_pre_encoded": 2,
            e + "streaming.sampling_frames_first": 1, "stt.capability.streaming": True,
            "stt.frontend.normalize": "none", "general.languages": ["en"]}
    ok = True
    print(f"nemotron_en: transformers' text {text!r}")
    for outtype in ("f32", "f16", "q8_0"):
        out = work / f"nemotron_en_tiny.{outtype}.gguf"
        subprocess.run([sys.executable, str(ROOT / "scripts" / "convert_parakeet.py"), str(d), str(out),
                        "--outtype", outtype], check=True)
        f = fields(gguf.GGUFReader(str(out)))
        bad = [k for k, v in want.items() if k not in f or _value(f[k]) != v]
        bad += [k for k in f if ".prompt." in k]
        print(f"  {out.name}: streaming keys {'as expected' if not bad else bad}")
        ok &= not bad
        if build:
            r = subprocess.run([str(build / "steno"), "run", str(out), str(work / "nemotron_en_clip.wav")],
                               capture_output=True, text=True)
            same = r.returncode == 0 and r.stdout.strip() == text
            print(f"  steno run {out.name}: exit {r.returncode}, same text as transformers: {same}")
            ok &= same
    return ok


NEMOTRON_ARGS = ["--variant", "nemotron-3.5-asr-streaming-tiny", "--name",
                 "Nemotron 3.5 ASR Streaming (tiny, random)"]
FAMILIES = {
    "moonshine": dict(fixture="moonshine_tiny", converter="convert_moonshine.py", tests=["test_moonshine"],
                      args=["--variant", "moonshine-tiny-random", "--languages", "en"], skip={}),
    "moonshine_streaming": dict(fixture="moonshine_streaming_tiny", converter="convert_moonshine.py",
                                tests=["test_moonshine"],
                                args=["--variant", "moonshine-streaming-tiny-random", "--languages", "en"],
                                skip={}),
    # the published layout: tokenizer.json only (BPE: no SentencePiece scores, written 0.0)
    "nemotron_asr": dict(fixture="nemotron_asr_tiny", converter="convert_parakeet.py",
                         tests=["test_nemotron_asr", "test_stream"], args=NEMOTRON_ARGS,
                         skip=dict(NEMOTRON_SKIP, **{"tokenizer.ggml.scores": "tokenizer.json has no scores"})),
    # the same with tokenizer.model beside it (its scores and types are read)
    "nemotron_asr_spm": dict(fixture="nemotron_asr_tiny", converter="convert_parakeet.py",
                             tests=["test_nemotron_asr", "test_stream"], args=NEMOTRON_ARGS, skip=NEMOTRON_SKIP),
}


def convert(fam: str, ckpt: Path, out: Path, outtype: str) -> None:
    spec = FAMILIES[fam]
    cmd = [sys.executable, str(ROOT / "scripts" / spec["converter"]), str(ckpt), str(out),
           "--outtype", outtype] + spec["args"]
    subprocess.run(cmd, check=True)


# ---------------------------------------------------------------------------
# steno on the converted files
# ---------------------------------------------------------------------------

def swapped_fixtures(work: Path, swaps: dict[str, Path]) -> Path:
    """A source tree whose tests/fixtures holds links to the committed fixtures,
    with `swaps` (fixture file name -> converted file) in their place."""
    src = work / "src_tree"
    fx = src / "tests" / "fixtures"
    shutil.rmtree(src, ignore_errors=True)
    fx.mkdir(parents=True)
    for f in FIXTURES.iterdir():
        os.symlink(swaps.get(f.name, f).resolve(), fx / f.name)
    return src


def run_steno(build: Path, work: Path, files: dict[str, dict[str, Path]]) -> bool:
    ok = True
    env = dict(os.environ)
    swaps = {FAMILIES[f]["fixture"] + ".gguf": p["f32"] for f, p in files.items()}
    env["STENO_SOURCE_DIR"] = str(swapped_fixtures(work, swaps))
    for test in sorted({t for f in files for t in FAMILIES[f]["tests"]}):
        exe = build / "tests" / test
        r = subprocess.run([str(exe)], env=env, capture_output=True, text=True)
        lines = (r.stdout + r.stderr).strip().splitlines()
        tail = [x for x in lines if "check" in x.lower()][-1:] or lines[-1:] or [""]
        print(f"  {test} on the converted F32 files: exit {r.returncode}: {tail[0]}")
        ok &= r.returncode == 0
    wav = work / "speech.wav"   # sox -D: undithered, the same bytes every run
    subprocess.run(["espeak-ng", "-w", str(work / "raw.wav"), "the quick brown fox jumps over the lazy dog"],
                   check=True)
    subprocess.run(["sox", "-D", str(work / "raw.wav"), "-r", "16000", "-c", "1", "-b", "16", str(wav)], check=True)
    for fam, paths in files.items():
        texts = {}
        for outtype, p in paths.items():
            r = subprocess.run([str(build / "steno"), "run", str(p), str(wav)], capture_output=True, text=True)
            texts[outtype] = r.stdout.strip()
            print(f"  steno run {p.name}: exit {r.returncode}: {r.stdout.strip()[:70]!r} {r.stderr.strip()[:80]}")
            ok &= r.returncode == 0
        r = subprocess.run([str(build / "steno"), "run", str(FIXTURES / (FAMILIES[fam]["fixture"] + ".gguf")),
                            str(wav)], capture_output=True, text=True)
        same = texts.get("f32") == r.stdout.strip()
        print(f"  steno run on the fixture gives the same text as on the converted F32 file: {same}")
        ok &= same
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("families", nargs="+", choices=sorted(FAMILIES) + ["nemotron_en"])
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "converter_check")
    ap.add_argument("--outtypes", default="f32,f16,q8_0")
    ap.add_argument("--steno", type=Path, help="a steno build directory: run its tests on the files")
    ap.add_argument("--reuse", action="store_true",
                    help="convert the checkpoints an earlier run left in --work (no rebuilding)")
    a = ap.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    ckpts = {}
    if a.reuse:
        ckpts = {f: a.work / f"{f}_tiny_hf".replace("_spm_tiny_hf", "_tiny_hf_spm") for f in a.families}
    elif any(f.startswith("moonshine") for f in a.families):
        ckpts.update(moonshine_checkpoints(a.work))
    if "nemotron_asr" in a.families and not a.reuse:
        ckpts["nemotron_asr"] = nemotron_checkpoint(a.work, False)
    if "nemotron_asr_spm" in a.families and not a.reuse:
        ckpts["nemotron_asr_spm"] = nemotron_checkpoint(a.work, True)
    ok, files = True, {}
    if "nemotron_en" in a.families:
        ok &= nemotron_en_check(a.work, a.steno.resolve() if a.steno else None)
    for fam in [f for f in a.families if f != "nemotron_en"]:
        spec = FAMILIES[fam]
        print(f"{fam}: checkpoint {ckpts[fam]}")
        files[fam] = {}
        for outtype in a.outtypes.split(","):
            out = a.work / f"{fam}_tiny.{outtype}.gguf"
            convert(fam, ckpts[fam], out, outtype)
            ok &= compare(fam.replace("_spm", ""), out, FIXTURES / f"{spec['fixture']}.gguf", outtype, spec["skip"])
            files[fam][outtype] = out
    if a.steno and files:
        ok &= run_steno(a.steno.resolve(), a.work, files)
    print("ALL EQUAL" if ok else "DIFFERENCES FOUND")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
