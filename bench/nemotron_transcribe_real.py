#!/usr/bin/env python3
"""Nemotron 3.5 Transcribe at the published shapes (32.4 B parameters) on random
weights: transformers (bf16, eager; the audio tower under torch.compile with
--compile) and steno (bench/nemotron_transcribe_speed) on the same weights and
the same recording, one after the other on one GPU.

The model is built from Nemotron3_5TranscribeConfig()'s defaults (the published
config) with a fixed seed straight on the GPU in bf16; the audio tower, the
projector and the MoE routers stay fp32 as transformers keeps them. Every fp32
matrix is rounded to bf16 values first (the published checkpoint is bf16), so
the GGUF's BF16 tensors hold exactly the weights transformers runs. The GGUF is
streamed from the GPU tensors through the converter's own naming
(transformers' revert_weight_conversion → convert_nemotron_transcribe's
rename_all, keys and types): no 65 GB checkpoint on disk. --small runs the same
path on a tiny config on the CPU and also converts a save_pretrained copy with
the converter, checking both files agree tensor for tensor.

The tokenizer is a byte-level BPE trained here (random weights need no real
one), padded with unused ids to the vocabulary; <|audio|> is id 131072 as
NVIDIA's. Stages timed (median of --runs after a warm-up): features (the
processor), the audio towers on --seconds of audio, prefill (the prompt and one
token), decoding (N more tokens, no end token: transformers' min_new_tokens,
steno's bench passes no end token). Needs transformers >= 5.25 and gguf.

    python bench/nemotron_transcribe_real.py --bench BUILD/nemotron_transcribe_speed \\
        --clip clip.wav [--seconds 60] [--tokens 64] [--runs 3] [--compile] [--small]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import convert_nemotron_transcribe as conv  # noqa: E402
from dump_nemotron_transcribe import TEMPLATE  # noqa: E402  (the fixture's ChatML-like chat template)
from gguf import GGMLQuantizationType as QT  # noqa: E402

SEED = 20261203
SR = 16000
SPECIALS = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
CORPUS = ["Audio transcription. Language: as spoken. Wording: verbatim, including fillers and repetitions. "
          "Formatting: punctuation and capitalization. Output: transcript only.",
          "The quick brown fox jumps over the lazy dog.", "speaker one said yes and speaker two said no"] * 4
# --small: the tiny fixture's shapes (scripts/dump_nemotron_transcribe.py), chunking scaled down.
SMALL_AUDIO = dict(
    asr_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2),
    diarization_config=dict(
        audio_config=dict(hidden_size=24, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2),
        head_config=dict(hidden_size=12, num_speakers=4, audio_hidden_size=24),
        streaming_config=dict(speaker_cache_length=12, num_speakers=4),
        chunk_length=12, chunk_left_context=3, chunk_right_context=3, fifo_length=4,
        speaker_cache_update_period=5))
SMALL_TEXT = dict(vocab_size=512, hidden_size=32, hybrid_override_pattern="M*E-ME", num_attention_heads=2,
                  num_key_value_heads=1, head_dim=16, intermediate_size=48, mamba_num_heads=4, mamba_head_dim=16,
                  ssm_state_size=8, n_groups=2, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=24,
                  moe_shared_expert_intermediate_size=24, chunk_size=16)
SMALL_WTS = dict(hidden_size=32, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, vocab_size=20,
                 blank_token_id=19)


def log(*a) -> None:
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# The model and its processor
# ---------------------------------------------------------------------------

def make_config(small: bool):
    from transformers import Nemotron3_5TranscribeConfig
    if not small:
        return Nemotron3_5TranscribeConfig()
    return Nemotron3_5TranscribeConfig(audio_config=SMALL_AUDIO, text_config=SMALL_TEXT,
                                       word_timestamp_config=SMALL_WTS, audio_token_id=SMALL_TEXT["vocab_size"])


def make_processor(vocab: int, mels: int):
    """A byte-level BPE trained on a few sentences, padded with unused ids to
    `vocab`, <|audio|> appended at `vocab`; the chat template; a tiny alignment
    tokenizer (word times are not timed here)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (NemotronAsrStreamingFeatureExtractor, Nemotron3_5TranscribeProcessor,
                              PreTrainedTokenizerFast)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=min(vocab, 400), special_tokens=SPECIALS,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                        show_progress=False))
    j = json.loads(tok.to_str())
    used = len(j["model"]["vocab"])
    for i in range(used, vocab):
        j["model"]["vocab"][f"<|unused_{i}|>"] = i
    fast = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(j)), bos_token="<s>",
                                   eos_token="</s>", unk_token="<unk>", pad_token="<unk>")
    fast.add_special_tokens({"additional_special_tokens": ["<|audio|>"]})
    assert fast.convert_tokens_to_ids("<|audio|>") == vocab, fast.convert_tokens_to_ids("<|audio|>")
    al = Tokenizer(models.BPE(unk_token="<unk>"))
    al.pre_tokenizer = pre_tokenizers.Metaspace()
    al.train_from_iterator(["a b c d e f g"], trainers.BpeTrainer(vocab_size=19, special_tokens=["<unk>"],
                                                                   show_progress=False))
    fe = NemotronAsrStreamingFeatureExtractor(feature_size=mels, mel_filters_dtype="bfloat16")  # as the fixture's
    return Nemotron3_5TranscribeProcessor(fe, fast, PreTrainedTokenizerFast(tokenizer_object=al, unk_token="<unk>"),
                                          chat_template=TEMPLATE)


def build_model(cfg, device: str, dtype: torch.dtype):
    from transformers import Nemotron3_5TranscribeForConditionalGeneration as Model
    torch.manual_seed(SEED)
    t0 = time.perf_counter()
    with torch.device(device):
        model = Model._from_config(cfg, dtype=dtype)
    model.eval()
    keep = re.compile(r"^(model\.audio_tower\.|model\.multi_modal_projector\.|model\.word_timestamp_encoder\.|"
                      r"word_timestamp_head\.)|mixer\.gate\.(weight|e_score_correction_bias)$")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if keep.search(name) and p.dtype != torch.float32:  # as from_pretrained keeps them
                p.data = p.data.float()
            if p.dtype == torch.float32 and p.ndim >= 2:  # a bf16 checkpoint's values
                p.copy_(p.bfloat16().float())
    model.generation_config.do_sample = False
    log(f"model built in {time.perf_counter() - t0:.1f} s: "
        f"{sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters, "
        f"{sum(p.numel() * p.element_size() for p in model.parameters()) / 2**30:.1f} GiB")
    return model


# ---------------------------------------------------------------------------
# The GGUF, streamed from the live model
# ---------------------------------------------------------------------------

EXPERTS = re.compile(r"^model\.language_model\.layers\.(\d+)\.mixer\.experts\.(up_proj|down_proj)$")


def chunks(model):
    """The state dict in pieces (each LM layer alone), as the converter names
    them: transformers' save-time renaming (revert_weight_conversion), then
    the converter's rename_all. The stacked experts [E, out, in] are what the
    converter makes of the saved per-expert matrices (np.stack), taken as they are."""
    from transformers.core_model_loading import revert_weight_conversion
    sd = model.state_dict()
    groups: dict[str, dict] = {}
    for k, v in sd.items():
        m = re.match(r"^model\.language_model\.layers\.(\d+)\.", k)
        groups.setdefault(m.group(0) if m else "", {})[k] = v
    for g in sorted(groups, key=lambda s: (s != "", int(s.split(".")[3]) if s else 0)):
        part = groups[g]
        experts = {}
        for k in list(part):
            m = EXPERTS.match(k)
            if m:
                experts[f"lm.layers.{m.group(1)}.mixer.experts.{m.group(2)}.weight"] = part.pop(k)
        out = conv.rename_all(revert_weight_conversion(model, part))
        out.update(experts)
        yield out


def byte_shape(shape, qt: QT) -> tuple:
    return tuple(shape[:-1]) + (shape[-1] * (2 if qt in (QT.F16, QT.BF16) else 4),)


def stored(t: torch.Tensor, qt: QT) -> np.ndarray:
    """t as qt's bytes (uint8). BF16 from a bf16-valued tensor is its bits."""
    t = t.detach()
    if qt == QT.BF16:
        b = t.to(torch.bfloat16).contiguous()
        assert torch.equal(b.float(), t.float()), "a BF16 tensor whose values are not bf16"
        return b.view(torch.int16).cpu().numpy().view(np.uint8)
    if qt == QT.F16:
        return t.to(torch.float16).contiguous().cpu().numpy().view(np.uint8)
    return t.to(torch.float32).contiguous().cpu().numpy().view(np.uint8)


def write_gguf(model, ckpt: Path, out: Path, outtype: str) -> float:
    """The GGUF of the live model: keys from ckpt's small files, tensors streamed."""
    t0 = time.perf_counter()
    hp = conv.read_config(ckpt)
    pre, window, fb = conv.frontend(ckpt, {}, hp["asr"]["num_mel_bins"])
    shapes = {}
    for c in chunks(model):
        shapes.update({k: tuple(v.shape) for k, v in c.items()})
    conv.check_tensors(hp, {k: _Shape(v) for k, v in shapes.items()})
    w = conv.new_writer(ckpt, out, hp, pre, outtype, "nemotron3_5_transcribe random (bench)")
    w.add_tensor_info("frontend.window", window.shape, np.float32, window.nbytes)
    w.add_tensor_info("frontend.filterbank", fb.shape, np.float32, fb.nbytes)
    order = []
    for c in chunks(model):
        for k, v in c.items():
            qt = conv.target_type(k, _Shape(tuple(v.shape)), outtype)
            nbytes = int(np.prod(byte_shape(v.shape, qt)))
            w.add_tensor_info(k, byte_shape(v.shape, qt), np.uint8, nbytes, raw_dtype=qt)
            order.append((k, qt))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.write_tensor_data(window)
    w.write_tensor_data(fb)
    i = 0
    for c in chunks(model):
        for k, v in c.items():
            assert order[i][0] == k, (order[i][0], k)
            w.write_tensor_data(stored(v, order[i][1]))
            i += 1
    w.close()
    return time.perf_counter() - t0


class _Shape:
    """Shape-only stand-in for the converter's checks (shape, ndim)."""

    def __init__(self, shape):
        self.shape = tuple(shape)
        self.ndim = len(self.shape)


def compare_gguf(a: Path, b: Path) -> None:
    """Every key and tensor of a equals b's (the streamed file against the converter's)."""
    from gguf import GGUFReader
    ra, rb = GGUFReader(str(a)), GGUFReader(str(b))
    ta = {t.name: t for t in ra.tensors}
    tb = {t.name: t for t in rb.tensors}
    assert set(ta) == set(tb), sorted(set(ta) ^ set(tb))[:10]
    for k in ta:
        assert ta[k].tensor_type == tb[k].tensor_type and list(ta[k].shape) == list(tb[k].shape), k
        assert np.array_equal(np.asarray(ta[k].data).view(np.uint8), np.asarray(tb[k].data).view(np.uint8)), k
    skip = {"general.name"}
    fa = {k: f.contents() for k, f in ra.fields.items() if k not in skip and not k.startswith("GGUF.")}
    fb = {k: f.contents() for k, f in rb.fields.items() if k not in skip and not k.startswith("GGUF.")}
    assert fa == fb, sorted(k for k in set(fa) | set(fb) if fa.get(k) != fb.get(k))[:10]
    log(f"streamed GGUF = converter's GGUF: {len(ta)} tensors, {len(fa)} keys")


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------

def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, runs: int, device: str) -> dict:
    out = None
    t = []
    for _ in range(runs + 1):
        sync(device)
        t0 = time.perf_counter()
        out = fn()
        sync(device)
        t.append((time.perf_counter() - t0) * 1e3)
    return {"first_ms": t[0], "median_ms": statistics.median(t[1:]), "min_ms": min(t[1:]), "out": out}


def clip_audio(path: Path, seconds: float) -> np.ndarray:
    with wave.open(str(path)) as w:
        assert w.getframerate() == SR and w.getnchannels() == 1 and w.getsampwidth() == 2, "16 kHz mono s16"
        x = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
    n = int(seconds * SR)
    return np.tile(x, -(-n // len(x)))[:n]


def write_wav(path: Path, pcm: np.ndarray) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(SR)
        w.writeframes(np.clip(np.round(pcm * 32768), -32768, 32767).astype(np.int16).tobytes())


def bench_hf(model, proc, pcm, tokens: int, runs: int, device: str, compile_: bool) -> dict:
    feats = timed(lambda: proc.apply_transcription_request(audio=pcm), runs, "cpu")
    inputs = feats.pop("out")
    audio_dtype = next(model.model.audio_tower.parameters()).dtype
    inputs = {k: (v.to(device, audio_dtype) if k == "input_features" else v.to(device)) for k, v in inputs.items()}
    n_prompt = int(inputs["input_ids"].shape[1])
    r = {"features": feats, "prompt_tokens": n_prompt}
    with torch.no_grad():
        r["towers"] = timed(lambda: model.get_audio_features(inputs["input_features"],
                                                             inputs["input_features_mask"]), runs, device)
        r["towers"].pop("out")
        gen = lambda k: model.generate(**inputs, max_new_tokens=k, min_new_tokens=k, do_sample=False)  # noqa: E731
        r["prefill"] = timed(lambda: gen(1), runs, device)
        r["prefill"].pop("out")
        r["decode"] = timed(lambda: gen(tokens + 1), runs, device)
        r["ids"] = r["decode"].pop("out")[0, n_prompt:].tolist()
        if compile_:
            r["towers_compiled"] = compiled_towers(model, inputs, runs, device)
    per = (r["decode"]["median_ms"] - r["prefill"]["median_ms"]) / tokens
    # generate runs the audio model too: the prompt and first token alone
    r["prefill_minus_towers_ms"] = r["prefill"]["median_ms"] - r["towers"]["median_ms"]
    r["decode_ms_per_token"], r["tokens_per_s"] = per, 1e3 / per
    return r


def compiled_towers(model, inputs, runs: int, device: str) -> dict:
    """The audio tower under torch.compile (reduce-overhead); its error if it fails."""
    tower = model.model.audio_tower
    try:
        t0 = time.perf_counter()
        model.model.audio_tower = torch.compile(tower, mode="reduce-overhead")
        f = lambda: model.get_audio_features(inputs["input_features"], inputs["input_features_mask"])  # noqa: E731
        for _ in range(2):
            f()
        sync(device)
        r = timed(f, runs, device)
        r.pop("out")
        r["compile_s"] = time.perf_counter() - t0
        return r
    except Exception as e:  # noqa: BLE001 - reported, not hidden
        return {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    finally:
        model.model.audio_tower = tower


def hidden_reference(model, n: int, work: Path, device: str) -> None:
    """The language model's residual after each layer on n random ids (ids.bin, ref.bin)."""
    g = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, model.config.text_config.vocab_size, (1, n), generator=g)
    with torch.no_grad():
        out = model.model.language_model(input_ids=ids.to(device), output_hidden_states=True, use_cache=False)
    hs = torch.stack([h[0].float() for h in out.hidden_states[1:]]).cpu().numpy()
    log(f"reference hidden states {hs.shape}, max |h| per layer {[f'{x:.3g}' for x in np.abs(hs).max((1, 2))]}")
    ids.numpy().astype(np.int32).tofile(work / "ids.bin")
    hs.astype(np.float32).tofile(work / "ref.bin")


def hidden_reference_fp32(model, n: int, layers: int, work: Path, device: str) -> None:
    """The first `layers` layers' residuals in fp32 on the same n ids (ref32.bin):
    the bf16 weights upcast exactly, one layer at a time (the whole model in fp32
    would not fit), the model's own masks; each layer back to its dtypes after."""
    from transformers.models.nemotron_h import modeling_nemotron_h as mh
    lm = model.model.language_model
    g = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, model.config.text_config.vocab_size, (1, n), generator=g).to(device)
    out = []
    with torch.no_grad():
        h = lm.embeddings(ids).float()
        pos = torch.arange(n, device=h.device).unsqueeze(0)
        kw = dict(config=lm.config, inputs_embeds=h, attention_mask=None, cache=None, position_ids=pos)
        masks = {"full_attention": mh.create_causal_mask(**kw),
                 "linear_attention": mh.create_recurrent_attention_mask(**kw)}
        for block in lm.layers[:layers]:
            dtypes = {k: p.dtype for k, p in block.named_parameters()}
            block.float()
            h = block(h, attention_mask=masks.get(block.block_type), position_ids=pos, cache=None,
                      use_cache=False)
            for k, p in block.named_parameters():
                p.data = p.data.to(dtypes[k])  # bf16 values: exact both ways
            out.append(h[0].float().cpu().numpy())
    hs = np.stack(out)
    log(f"fp32 reference hidden states {hs.shape}")
    hs.astype(np.float32).tofile(work / "ref32.bin")


def run_steno(bench: Path, gguf: Path, wav: Path, tokens: int, runs: int, timeout: int) -> dict:
    t0 = time.perf_counter()
    p = subprocess.run([str(bench), str(gguf), str(wav), str(tokens), str(runs)], capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode:
        return {"error": p.stderr[-2000:], "wall_s": time.perf_counter() - t0}
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["wall_s"] = time.perf_counter() - t0
    return r


def gguf_dir(need: int, work: Path) -> Path:
    """The work folder or /dev/shm, whichever has room (a tmpfs saves the disk write)."""
    for d in (work, Path("/dev/shm")):
        d.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(d).free
        log(f"{d}: {free / 2**30:.1f} GiB free, {need / 2**30:.1f} GiB needed")
        if free > need + (2 << 30):
            return d
    raise SystemExit("no room for the GGUF")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", type=Path, required=True, help="steno's nemotron_transcribe_speed")
    p.add_argument("--clip", type=Path, required=True, help="16 kHz mono 16-bit WAV, tiled to --seconds")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--work", type=Path, default=Path("/tmp/nt_real"))
    p.add_argument("--compile", action="store_true", help="also the audio tower under torch.compile")
    p.add_argument("--small", action="store_true", help="tiny config on the CPU, f32, with the converter check")
    p.add_argument("--steno-timeout", type=int, default=420)
    p.add_argument("--out", type=Path, help="write the JSON here too")
    p.add_argument("--keep", action="store_true", help="leave the GGUF and clip in the work folder")
    p.add_argument("--hidden-fp32", type=int, default=0, metavar="L",
                   help="with --hidden: also an fp32 reference of the first L layers (upcast one at a time)")
    p.add_argument("--no-hf", action="store_true", help="skip transformers' timings (e.g. with --hidden)")
    p.add_argument("--compile-only", action="store_true",
                   help="only the audio tower eager and under torch.compile (no GGUF, no steno)")
    p.add_argument("--hidden", type=int, default=0, metavar="N",
                   help="also compare the decoder's residual after each layer on N random ids "
                        "(steno with its chosen kernels and with STENO_FAST=off)")
    a = p.parse_args()
    device = "cpu" if a.small else "cuda"
    dtype = torch.float32 if a.small else torch.bfloat16
    a.work.mkdir(parents=True, exist_ok=True)
    cfg = make_config(a.small)
    proc = make_processor(cfg.text_config.vocab_size, cfg.audio_config.asr_config.num_mel_bins)
    ckpt = a.work / "ckpt"
    cfg.save_pretrained(str(ckpt))
    proc.save_pretrained(str(ckpt))
    model = build_model(cfg, device, dtype)
    pcm = clip_audio(a.clip, a.seconds)
    wav = a.work / "clip.wav"
    write_wav(wav, pcm)
    pcm = clip_audio(wav, a.seconds)  # the 16-bit samples steno reads
    res = {"what": "Nemotron 3.5 Transcribe, random weights, " + ("tiny config (CPU)" if a.small else
                                                                  "published shapes"),
           "audio_s": a.seconds, "tokens": a.tokens, "runs": a.runs,
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu"}
    if a.compile_only:
        inputs = proc.apply_transcription_request(audio=pcm)
        inputs = {k: (v.to(device, torch.float32) if k == "input_features" else v.to(device))
                  for k, v in inputs.items()}
        with torch.no_grad():
            eager = timed(lambda: model.get_audio_features(inputs["input_features"],
                                                           inputs["input_features_mask"]), a.runs, device)
            eager.pop("out")
            res["towers_eager"] = eager
            res["towers_compiled"] = compiled_towers(model, inputs, a.runs, device)
        print(json.dumps(res, indent=1))
        if a.out:
            a.out.write_text(json.dumps(res, indent=1))
        return 0
    log("transformers ...")
    res["transformers"] = {} if a.no_hf else bench_hf(model, proc, pcm, a.tokens, a.runs, device, a.compile)
    log(json.dumps({k: v for k, v in res["transformers"].items() if k != "ids"}))
    if a.hidden:
        hidden_reference(model, a.hidden, a.work, device)
    if a.hidden and a.hidden_fp32:
        hidden_reference_fp32(model, a.hidden, a.hidden_fp32, a.work, device)
    need = sum(p.numel() * 2 for p in model.parameters()) + (1 << 30)
    out = gguf_dir(need, a.work) / "nt_random.gguf"
    res["gguf_write_s"] = write_gguf(model, ckpt, out, "f32" if a.small else "bf16")
    res["gguf_bytes"] = out.stat().st_size
    log(f"GGUF {out}: {out.stat().st_size / 2**30:.2f} GiB in {res['gguf_write_s']:.1f} s")
    if a.small:
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            for f in ckpt.iterdir():
                if f.is_file() and f.name != "config.json":
                    shutil.copy(f, tmp)
                elif f.is_dir():
                    shutil.copytree(f, Path(tmp) / f.name, dirs_exist_ok=True)
            conv.convert(Path(tmp), a.work / "converted.gguf", "f32", "x")
        compare_gguf(out, a.work / "converted.gguf")
    del model
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    log("steno ...")
    res["steno"] = run_steno(a.bench, out, wav, a.tokens, a.runs, a.steno_timeout)
    if a.hidden:
        for fast in ("auto", "off"):
            p = subprocess.run([str(a.bench), str(out), "--hidden", str(a.work / "ids.bin"), str(a.work / "ref.bin")],
                               capture_output=True, text=True, timeout=a.steno_timeout, env=dict(os.environ, STENO_FAST=fast))
            res[f"hidden_{fast}"] = (p.stdout + p.stderr[-2000:]).splitlines()
            log("\n".join(res[f"hidden_{fast}"]))
            if a.hidden_fp32:
                p = subprocess.run([str(a.bench), str(out), "--hidden", str(a.work / "ids.bin"),
                                    str(a.work / "ref32.bin")], capture_output=True, text=True,
                                   timeout=a.steno_timeout, env=dict(os.environ, STENO_FAST=fast))
                res[f"hidden_fp32_{fast}"] = (p.stdout + p.stderr[-2000:]).splitlines()
                log("\n".join(res[f"hidden_fp32_{fast}"]))
    hf_ids, st_ids = res["transformers"].get("ids", []), res["steno"].get("ids", [])
    same = next((i for i, (x, y) in enumerate(zip(hf_ids, st_ids)) if x != y), min(len(hf_ids), len(st_ids)))
    res["same_leading_ids"] = same
    if not a.keep:
        out.unlink()
    text = json.dumps(res, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
