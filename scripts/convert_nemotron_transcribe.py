#!/usr/bin/env python3
"""Convert an HF Nemotron 3.5 Transcribe checkpoint (NVIDIA's NeMo export, as
transformers' save_pretrained also writes it) to steno's GGUF layout,
docs/nemotron-transcribe-gguf.md (architecture "nemotron3_5_transcribe").

Input: a directory with config.json, model.safetensors (or a sharded index),
preprocessor_config.json (optional: the reference defaults), tokenizer.json,
tokenizer_config.json, chat_template.jinja (or the template in
tokenizer_config.json), processor_config.json (optional: the default prompt) and
alignment_tokenizer/tokenizer.json (optional).

Needs only numpy and gguf (gguf-py); safetensors if installed. No torch.

    python scripts/convert_nemotron_transcribe.py MODEL_DIR OUT.gguf [--outtype auto]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_tensors import encode  # noqa: E402
from convert_parakeet import _read_safetensors  # noqa: E402
from convert_whisper import slaney_filterbank  # noqa: E402

ARCH = "nemotron3_5_transcribe"
P = ARCH + "."
OUTTYPES = ("auto", "f32", "f16", "bf16", "q8_0")
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}
TOK_NORMAL, TOK_CONTROL, TOK_USER = 1, 3, 4

FRONTEND_DEFAULTS = dict(sampling_rate=16000, n_fft=512, win_length=400, hop_length=160,
                         preemphasis=0.97, feature_size=128, mel_filters_dtype="float32")
DEFAULT_PROMPT = ("Audio transcription. Language: as spoken. Wording: verbatim, including fillers and "
                  "repetitions. Formatting: punctuation and capitalization. Output: transcript only.")


class ConvertError(Exception):
    pass


def read_json(path: Path, required: bool = True) -> dict:
    if not path.exists():
        if required:
            raise ConvertError(f"missing {path}")
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def load_state_dict(model_dir: Path) -> dict[str, np.ndarray]:
    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        files = [model_dir / s for s in sorted(set(read_json(index)["weight_map"].values()))]
    else:
        files = [model_dir / "model.safetensors"]
    sd: dict[str, np.ndarray] = {}
    for f in files:
        if not f.exists():
            raise ConvertError(f"missing weights file {f}")
        sd.update(_read_safetensors(f))
    return {k: (v.astype(np.float32) if v.dtype.kind == "f" else v) for k, v in sd.items()}


def weight_dtypes(model_dir: Path) -> set[str]:
    """The stored dtypes of the checkpoint (for --outtype auto)."""
    import struct
    index = model_dir / "model.safetensors.index.json"
    files = ([model_dir / s for s in sorted(set(read_json(index)["weight_map"].values()))]
             if index.exists() else [model_dir / "model.safetensors"])
    out = set()
    for f in files:
        with open(f, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            out |= {v["dtype"] for k, v in json.loads(fh.read(n)).items() if k != "__metadata__"}
    return out


# ---------------------------------------------------------------------------
# Hyperparameters: every config value the reference reads
# ---------------------------------------------------------------------------

def _rope(cfg: dict, default_partial: float) -> tuple[float, float]:
    rp = cfg.get("rope_parameters") or {}
    if rp.get("rope_type", "default") != "default":
        raise ConvertError(f"rope_type {rp.get('rope_type')!r}: only 'default' is supported")
    return float(rp.get("rope_theta", 10000.0)), float(rp.get("partial_rotary_factor", default_partial))


def _tower(cfg: dict, defaults: dict, partial: float) -> dict:
    t = {k: cfg.get(k, v) for k, v in defaults.items()}
    if t["num_key_value_heads"] is None:
        t["num_key_value_heads"] = t["num_attention_heads"]
    t["rope_theta"], t["partial_rotary_factor"] = _rope(cfg, partial)
    if t["hidden_size"] % t["num_attention_heads"]:
        raise ConvertError(f"hidden_size {t['hidden_size']} is not a multiple of the heads")
    if t["num_key_value_heads"] != t["num_attention_heads"]:
        raise ConvertError("the fused q|k|v projection needs num_key_value_heads == num_attention_heads")
    if t["hidden_act"] != "gelu":
        raise ConvertError(f"hidden_act {t['hidden_act']!r}: the audio towers use 'gelu'")
    return t


ASR_DEFAULTS = dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=10,
                    num_key_value_heads=None, hidden_act="gelu", num_mel_bins=128, subsampling_factor=8,
                    max_position_embeddings=5000)
DIAR_DEFAULTS = dict(hidden_size=512, intermediate_size=2048, num_hidden_layers=31, num_attention_heads=8,
                     num_key_value_heads=None, hidden_act="gelu", num_mel_bins=128, subsampling_factor=8,
                     max_position_embeddings=5000)
WTS_DEFAULTS = dict(hidden_size=1280, intermediate_size=640, num_hidden_layers=2, num_attention_heads=16,
                    num_key_value_heads=None, hidden_act="gelu", max_position_embeddings=5000,
                    vocab_size=23863, blank_token_id=23862, residual_scale=0.1, upsampling_factor=2)
# The audio config's diarization defaults (Nemotron3_5TranscribeAudioConfig.sub_configs_defaults).
DIAR_OFFLINE_DEFAULTS = dict(chunk_length=500, chunk_left_context=50, chunk_right_context=50, fifo_length=40,
                             speaker_cache_update_period=300)
STREAMING_DEFAULTS = dict(fifo_length=264, speaker_cache_update_period=222, speaker_cache_length=188,
                          speaker_cache_silence_frames_per_speaker=1, prediction_score_threshold=0.25,
                          latest_frames_score_boost=0.05, strong_boost_rate=0.75, weak_boost_rate=1.5,
                          min_positive_scores_rate=0.5, num_speakers=8)


def read_hparams(cfg: dict) -> dict:
    audio = cfg.get("audio_config") or {}
    dcfg = audio.get("diarization_config") or {}
    head = dcfg.get("head_config") or {}
    stream = {k: (dcfg.get("streaming_config") or {}).get(k, v) for k, v in STREAMING_DEFAULTS.items()}
    hp = {"asr": _tower(audio.get("asr_config") or {}, ASR_DEFAULTS, 0.5),
          "diar": _tower(dcfg.get("audio_config") or {}, DIAR_DEFAULTS, 1.0)}
    d = hp["diar"]
    d["head_hidden_size"] = int(head.get("hidden_size", 192))
    d["num_speakers"] = int(head.get("num_speakers", 8))
    for k, v in DIAR_OFFLINE_DEFAULTS.items():
        d[k] = int(dcfg.get(k, v))
    for k in ("speaker_cache_length", "speaker_cache_silence_frames_per_speaker", "prediction_score_threshold",
              "latest_frames_score_boost", "strong_boost_rate", "weak_boost_rate", "min_positive_scores_rate"):
        d[k] = stream[k]
    d["streaming_fifo_length"] = stream["fifo_length"]
    d["streaming_speaker_cache_update_period"] = stream["speaker_cache_update_period"]
    if int(head.get("audio_hidden_size", d["hidden_size"])) != d["hidden_size"]:
        raise ConvertError("diarization head_config.audio_hidden_size differs from its audio hidden_size")
    if stream["num_speakers"] != d["num_speakers"]:
        raise ConvertError("diarization streaming_config.num_speakers differs from head_config.num_speakers")
    if d["subsampling_factor"] != hp["asr"]["subsampling_factor"]:
        raise ConvertError("the ASR encoder and the diarization model must subsample alike")
    if d["chunk_right_context"] >= d["chunk_length"]:
        raise ConvertError("chunk_right_context must be below chunk_length")
    hp["speaker_activity_threshold"] = float(audio.get("speaker_activity_threshold", 0.5))
    wts_cfg = cfg.get("word_timestamp_config") or {}
    hp["wts"] = _tower(wts_cfg, WTS_DEFAULTS, 0.5)
    hp["lm"] = dict(cfg.get("text_config") or {})
    hp["audio_token_id"] = int(cfg.get("audio_token_id", 131072))
    if "layers_block_type" not in hp["lm"] or "vocab_size" not in hp["lm"]:
        raise ConvertError("text_config lacks layers_block_type or vocab_size")
    return hp


# ---------------------------------------------------------------------------
# Frontend constants
# ---------------------------------------------------------------------------

def bf16_round(a: np.ndarray) -> np.ndarray:
    """Rounds f32 to the nearest bf16 (ties to even), as torch's .to(bfloat16)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def frontend(model_dir: Path, sd: dict, n_mels: int) -> tuple[dict, np.ndarray, np.ndarray]:
    pre = dict(FRONTEND_DEFAULTS)
    src = read_json(model_dir / "preprocessor_config.json", required=False)
    if not src:
        src = read_json(model_dir / "processor_config.json", required=False).get("feature_extractor") or {}
    pre.update({k: v for k, v in src.items() if k in FRONTEND_DEFAULTS and v is not None})
    if pre["feature_size"] != n_mels:
        raise ConvertError(f"preprocessor feature_size {pre['feature_size']} != encoder num_mel_bins {n_mels}")
    bins, win = pre["n_fft"] // 2 + 1, pre["win_length"]
    rnd = bf16_round if pre["mel_filters_dtype"] == "bfloat16" else (lambda a: a.astype(np.float32))
    if pre["mel_filters_dtype"] not in ("float32", "bfloat16"):
        raise ConvertError(f"mel_filters_dtype {pre['mel_filters_dtype']!r} is not float32 or bfloat16")
    window = sd.pop("perception.preprocessor.featurizer.window", None)
    if window is None:  # torch.hann_window(win, periodic=False) in f32, then the dtype's rounding
        k = np.arange(win, dtype=np.float64)
        window = rnd((0.5 - 0.5 * np.cos(2.0 * np.pi * k / (win - 1))).astype(np.float32))
    fb = sd.pop("perception.preprocessor.featurizer.fb", None)
    if fb is None:
        fb = rnd(slaney_filterbank(bins, n_mels, pre["sampling_rate"]).astype(np.float32))
    window, fb = np.asarray(window, np.float32).reshape(-1), np.asarray(fb, np.float32).reshape(-1, bins)
    if window.shape != (win,) or fb.shape != (n_mels, bins):
        raise ConvertError(f"frontend window {window.shape} / filterbank {fb.shape}, expected ({win},) / "
                           f"({n_mels}, {bins})")
    for k in list(sd):
        if k.startswith("perception.preprocessor."):
            del sd[k]
    return pre, window, fb


# ---------------------------------------------------------------------------
# Tensors: NeMo names -> GGUF names (docs/nemotron-transcribe-gguf.md)
# ---------------------------------------------------------------------------

RENAMES = [  # longest first where prefixes nest
    ("perception.encoder.diarization_model.sortformer_modules.", "diar.sf."),
    ("perception.encoder.diarization_model.encoder.", "diar."),
    ("perception.encoder.asr_encoder.", "asr."),
    ("perception.encoder.asr_norm.", "asr_norm."),
    ("perception.encoder.diar_norm.", "diar_norm."),
    ("perception.proj.", "proj."),
    ("ctc_timestamp.decoder.transformer.", "wts."),
    ("ctc_timestamp.decoder.upsample.", "wts.upsample."),
    ("ctc_timestamp.decoder.decoder_layers.0.", "wts.head."),
    ("llm.model.", "lm."),
    ("llm.lm_head.", "lm_head."),
]
SKIPPED = [r"^llm\.mtp\.", r"^perception\.encoder\.diarization_model\.preprocessor\.",
           r"^perception\.encoder\.diarization_model\.sortformer_modules\.hidden_to_spks\.",
           r"\._extra_state$", r"^ctc_timestamp\.decoder\.residual_scale$",
           r"^ctc_timestamp\.decoder\.upsample_factor$", r"^ctc_timestamp\.tokenizer\.model_proto$"]
EXPERT = re.compile(r"^(lm\.layers\.\d+\.mixer\.experts)\.(\d+)\.(up_proj|down_proj)\.weight$")


def rename_all(sd: dict) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    experts: dict[tuple[str, str], dict[int, np.ndarray]] = {}
    for name, arr in sd.items():
        if any(re.search(p, name) for p in SKIPPED):
            continue
        new = next((dst + name[len(src):] for src, dst in RENAMES if name.startswith(src)), None)
        if new is None:
            raise ConvertError(f"checkpoint tensor {name} has no place in the GGUF")
        new = new.replace(".mixer._fp32_params.", ".mixer.")
        m = EXPERT.match(new)
        if m:
            experts.setdefault((m.group(1), m.group(3)), {})[int(m.group(2))] = arr
            continue
        if new.endswith(".mixer.experts.gate_and_up_projs"):  # (E, in, out) in NeMo's grouped layout
            new, arr = new[: -len("gate_and_up_projs")] + "up_proj.weight", arr.transpose(0, 2, 1)
        elif new.endswith(".mixer.experts.down_projs"):
            new, arr = new[: -len("down_projs")] + "down_proj.weight", arr.transpose(0, 2, 1)
        out[new] = arr
    for (prefix, kind), per in experts.items():
        if sorted(per) != list(range(len(per))):
            raise ConvertError(f"{prefix}: experts {sorted(per)} are not 0..E-1")
        out[f"{prefix}.{kind}.weight"] = np.stack([per[i] for i in range(len(per))])
    return out


def _block_shapes(prefix: str, t: dict, qk_norm: bool) -> dict[str, tuple]:
    d, ff, h = t["hidden_size"], t["intermediate_size"], t["hidden_size"] // t["num_attention_heads"]
    shapes = {}
    for n in range(t["num_hidden_layers"]):
        b = f"{prefix}layers.{n}."
        shapes.update({b + "norm1.weight": (d,), b + "norm1.bias": (d,), b + "norm2.weight": (d,),
                       b + "norm2.bias": (d,), b + "attn.w_qkv.weight": (3 * d, d),
                       b + "attn.out_proj.weight": (d, d), b + "attn.out_proj.bias": (d,),
                       b + "ffn.net.0.weight": (ff, d), b + "ffn.net.0.bias": (ff,),
                       b + "ffn.net.3.weight": (d, ff), b + "ffn.net.3.bias": (d,)})
        if qk_norm:
            for q in ("q_norm", "k_norm"):
                shapes[f"{b}attn.{q}.weight"] = shapes[f"{b}attn.{q}.bias"] = (h,)
    for nm in ("embed_norm", "final_norm"):
        shapes[f"{prefix}{nm}.weight"] = shapes[f"{prefix}{nm}.bias"] = (d,)
    return shapes


def audio_shapes(hp: dict) -> dict[str, tuple]:
    """PyTorch shapes of every audio-side tensor the loader needs."""
    a, dz, w = hp["asr"], hp["diar"], hp["wts"]
    d, D, Hh, S, s = a["hidden_size"], dz["hidden_size"], dz["head_hidden_size"], dz["num_speakers"], \
        a["subsampling_factor"]
    d_lm = int(hp["lm"]["hidden_size"])
    shapes = _block_shapes("asr.", a, True)
    shapes["asr.pre_encode.proj.weight"] = (d, s * a["num_mel_bins"])
    shapes.update(_block_shapes("diar.", dz, False))
    shapes["diar.pre_encode.proj.weight"] = (D, s * dz["num_mel_bins"])
    shapes.update({"diar.sf.encoder_proj.weight": (Hh, D), "diar.sf.encoder_proj.bias": (Hh,),
                   "diar.sf.subpixel_upsample.weight": (s * Hh, Hh, 3), "diar.sf.subpixel_upsample.bias": (s * Hh,),
                   "diar.sf.first_hidden_to_hidden.weight": (Hh, Hh), "diar.sf.first_hidden_to_hidden.bias": (Hh,),
                   "diar.sf.single_hidden_to_spks.weight": (S, Hh), "diar.sf.single_hidden_to_spks.bias": (S,),
                   "diar.sf.learnable_sil_emb": (D,), "asr_norm.weight": (d,), "asr_norm.bias": (d,),
                   "diar_norm.weight": (S,), "diar_norm.bias": (S,), "proj.weight": (d_lm, d), "proj.bias": (d_lm,)})
    if w["hidden_size"] != d:
        raise ConvertError("the word timestamp encoder must be as wide as the ASR encoder")
    return shapes


def check_tensors(hp: dict, t: dict[str, np.ndarray]) -> None:
    for name, shape in audio_shapes(hp).items():
        if name not in t:
            raise ConvertError(f"checkpoint lacks {name}")
        if tuple(t[name].shape) != shape:
            raise ConvertError(f"{name} has shape {tuple(t[name].shape)}, expected {shape}")
    if t.get("lm.embed_tokens.weight") is None or t["lm.embed_tokens.weight"].shape[0] != hp["lm"]["vocab_size"]:
        raise ConvertError("lm.embed_tokens.weight is missing or not vocab_size rows")


# ---------------------------------------------------------------------------
# Tokenizer and chat template
# ---------------------------------------------------------------------------

def load_tokenizer(model_dir: Path, hp: dict) -> dict | None:
    tj = read_json(model_dir / "tokenizer.json", required=False)
    if not tj:
        return None
    model = tj.get("model") or {}
    if model.get("type") != "BPE":
        raise ConvertError(f"tokenizer.json: model type {model.get('type')!r}, expected BPE")
    by_id = {int(i): (s, TOK_NORMAL) for s, i in model["vocab"].items()}
    for a in tj.get("added_tokens", []):
        by_id[int(a["id"])] = (a["content"], TOK_CONTROL if a.get("special") else TOK_USER)
    n = max(max(by_id) + 1, hp["audio_token_id"] + 1)
    tokens = [by_id.get(i, (f"<|unused_{i}|>", TOK_USER))[0] for i in range(n)]
    types = [by_id.get(i, ("", TOK_USER))[1] for i in range(n)]
    merges = [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in model.get("merges", [])]
    regex = []
    unlike = []  # what steno's encoder does not do as this tokenizer does (no instruction keys then)

    def walk(pt):
        if not pt:
            return
        if pt.get("type") == "Sequence":
            for p in pt.get("pretokenizers", []):
                walk(p)
        elif pt.get("type") == "Split":
            pat = pt.get("pattern") or {}
            regex.append(pat.get("Regex") or re.escape(pat.get("String", "")))
            if pt.get("behavior", "Isolated") != "Isolated" or pt.get("invert"):
                unlike.append(f"a Split of behavior {pt.get('behavior')}, invert {pt.get('invert')}")
        elif pt.get("type") == "ByteLevel":
            if pt.get("use_regex", True) and regex:
                unlike.append("a ByteLevel pre-tokenizer with its own regex after a Split")
        else:
            unlike.append(f"a {pt.get('type')} pre-tokenizer")

    walk(tj.get("pre_tokenizer"))
    if len(regex) > 1:
        unlike.append(f"{len(regex)} Split patterns")
    if tj.get("normalizer"):
        unlike.append(f"a {tj['normalizer'].get('type')} normalizer")
    if any(a.get("lstrip") or a.get("rstrip") for a in tj.get("added_tokens", [])):
        unlike.append("added tokens that strip white space")
    added = [a["content"] for a in tj.get("added_tokens", [])]
    cfg = read_json(model_dir / "tokenizer_config.json", required=False)
    ids = {s: i for i, s in enumerate(tokens)}

    def special(key):
        v = cfg.get(key)
        v = v.get("content") if isinstance(v, dict) else v
        return ids.get(v) if v is not None else None

    tmpl_file = model_dir / "chat_template.jinja"
    template = tmpl_file.read_text(encoding="utf-8") if tmpl_file.exists() else cfg.get("chat_template")
    audio_tok = read_json(model_dir / "processor_config.json", required=False).get("audio_token", "<|audio|>")
    if ids.get(audio_tok) != hp["audio_token_id"]:
        raise ConvertError(f"tokenizer has {audio_tok!r} at {ids.get(audio_tok)}, config audio_token_id is "
                           f"{hp['audio_token_id']}")
    return {"tokens": tokens, "types": types, "merges": merges, "regex": regex, "template": template,
            "bos": special("bos_token"), "eos": special("eos_token"), "pad": special("pad_token"),
            "audio_token": audio_tok, "added": added, "ignore_merges": bool(model.get("ignore_merges")),
            "unlike": unlike}


def prompt_ids(model_dir: Path, tok: dict | None, prompt: str) -> tuple[list[int], list[int]] | None:
    """The default transcription request around its audio: the ids before and
    after the run of audio tokens, as the processor's apply_transcription_request
    makes them (the chat template rendered with the prompt text then one audio
    item, generation prompt on, thinking off; the text tokenized, the audio token
    being a special token that splits it). None without transformers or a template."""
    if not tok or not tok["template"]:
        return None
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError:
        print("convert_nemotron_transcribe: no transformers here: the prompt keys are left out", file=sys.stderr)
        return None
    t = PreTrainedTokenizerFast(tokenizer_file=str(model_dir / "tokenizer.json"))
    conv = [{"role": "user", "content": [{"type": "text", "text": prompt}, {"type": "audio"}]}]
    text = t.apply_chat_template(conv, chat_template=tok["template"], tokenize=False, add_generation_prompt=True,
                                 enable_thinking=False)
    if text.count(tok["audio_token"]) != 1:
        raise ConvertError(f"the chat template renders {text.count(tok['audio_token'])} audio tokens, not 1")
    before, after = text.split(tok["audio_token"])
    enc = lambda s: t(s, add_special_tokens=False)["input_ids"] if s else []  # noqa: E731
    return enc(before), enc(after)


SENTINELS = ("qzxv sentinel one", "Jkw Sentinel Two!")
# Instructions the derived split must reproduce exactly (with the default prompt).
PROBES = ("", " leading space", "\nnew line first", "Transcribe; then stop.\n", "trailing space ",
          "Ünïcödé, 数字 123 and 'quotes'", "  two  spaces\t tab", "<b>tags</b>")


def instruction_split(model_dir: Path, tok: dict | None, prompt: str) -> dict | None:
    """The request around a user instruction, for building the prompt of any
    instruction at run time. The template is rendered with two sentinel
    instructions: the text around them must be the same. The instruction is
    tokenized in one piece with the text around it up to the nearest added
    (special) tokens, as the processor tokenizes the whole rendered string and
    added tokens are the only hard splits: `lead` (text after the last added
    token before the instruction) and `trail` (text up to the next one). Around
    that: `head` ids before it, `middle` ids up to the audio run, and the
    suffix ids after it. Checked on PROBES and the default prompt."""
    if not tok or not tok["template"]:
        return None
    if tok["unlike"]:
        print(f"convert_nemotron_transcribe: the tokenizer has {'; '.join(tok['unlike'])}, which steno's "
              "encoder does not do: no instruction keys", file=sys.stderr)
        return None
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError:
        return None
    t = PreTrainedTokenizerFast(tokenizer_file=str(model_dir / "tokenizer.json"))
    audio = tok["audio_token"]

    def render(instr: str) -> str:
        conv = [{"role": "user", "content": [{"type": "text", "text": instr}, {"type": "audio"}]}]
        return t.apply_chat_template(conv, chat_template=tok["template"], tokenize=False,
                                     add_generation_prompt=True, enable_thinking=False)

    parts = [render(x).split(x) for x in SENTINELS]
    if any(len(p) != 2 for p in parts) or parts[0] != parts[1] or parts[0][1].count(audio) != 1 \
            or audio in parts[0][0]:
        print("convert_nemotron_transcribe: the template does not put the instruction once before the audio: "
              "no instruction keys", file=sys.stderr)
        return None
    before, after = parts[0]
    cut = max((before.rfind(a) + len(a) for a in tok["added"] if a and a in before), default=0)
    head, lead = before[:cut], before[cut:]
    stops = [after.find(a) for a in tok["added"] if a and a in after]
    end = min(stops)  # <|audio|> is one of them
    trail, rest = after[:end], after[end:]
    middle, suffix = rest.split(audio)
    enc = lambda s: t(s, add_special_tokens=False)["input_ids"] if s else []  # noqa: E731
    out = {"head": enc(head), "lead": lead, "trail": trail, "middle": enc(middle), "suffix": enc(suffix)}
    aid = t.convert_tokens_to_ids(audio)
    for x in PROBES + (prompt,) + SENTINELS:
        full = enc(render(x).replace(audio, audio * 3))
        mine = out["head"] + enc(lead + x + trail) + out["middle"] + [aid] * 3 + out["suffix"]
        if full != mine:
            raise ConvertError(f"the instruction split does not reproduce the prompt of {x!r}")
    return out


# The tags the processor's align_word_timestamps keeps in a transcript (speaker,
# event and style tags): every other special token of the tokenizer becomes a space.
KEPT_TAG = re.compile(r"(?i:<spk:\d+>)|<(?:ev|sty):[^<>]*>")


def dropped_tokens(model_dir: Path) -> list[str]:
    """The special tokens align_word_timestamps replaces by spaces: the tokenizer's
    all_special_tokens (bos, eos, unk, pad and the additional ones) that are not tags."""
    try:
        from transformers import AutoTokenizer
        names = AutoTokenizer.from_pretrained(str(model_dir)).all_special_tokens
    except Exception:  # no transformers: the same names from tokenizer_config.json
        tc = read_json(model_dir / "tokenizer_config.json", required=False)
        names = [tc.get(k) for k in ("bos_token", "eos_token", "unk_token", "pad_token", "cls_token",
                                     "sep_token", "mask_token")]
        names += list(tc.get("additional_special_tokens") or tc.get("extra_special_tokens") or [])
        names = [n.get("content") if isinstance(n, dict) else n for n in names]
    out = []
    for n in names:
        if n and not KEPT_TAG.fullmatch(n) and n not in out:
            out.append(n)
    return out


def alignment_tokenizer(model_dir: Path) -> dict | None:
    """The word timestamp head's vocabulary (pieces by id) and, for a BPE model,
    its merges, unknown token and flags: what align_word_timestamps encodes each
    word with (docs/nemotron-transcribe-gguf.md §6)."""
    tj = read_json(model_dir / "alignment_tokenizer" / "tokenizer.json", required=False)
    if not tj:
        return None
    model = tj["model"]
    by_id = {int(i): s for s, i in model["vocab"].items()}
    for a in tj.get("added_tokens", []):
        by_id[int(a["id"])] = a["content"]
    out = {"tokens": [by_id.get(i, "") for i in range(max(by_id) + 1)], "dropped": dropped_tokens(model_dir)}
    if model.get("type") != "BPE" or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        print("convert_nemotron_transcribe: the alignment tokenizer is not a plain BPE: no merges written "
              "(no word times)", file=sys.stderr)
        return out
    out["merges"] = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    if model.get("unk_token") in model["vocab"]:
        out["unk"] = int(model["vocab"][model["unk_token"]])
    out["byte_fallback"] = bool(model.get("byte_fallback"))
    out["fuse_unk"] = bool(model.get("fuse_unk"))
    return out


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

F32_ONLY = re.compile(r"(norm[^.]*\.(weight|bias)$|\.bias$|^frontend\.|learnable_sil_emb$|\.A_log$|\.D$|"
                      r"\.dt_bias$|conv1d\.weight$|e_score_correction_bias$|^diar_norm\.|"
                      r"upsample\.weight$|^wts\.head\.weight$|"  # convs: the loaders take F32 or F16 there
                      r"mixer\.gate\.weight$)")  # the MoE router: fp32 in the reference (§9)


def target_type(name: str, arr: np.ndarray, outtype: str) -> QT:
    if outtype == "f32" or arr.ndim < 2 or F32_ONLY.search(name):
        return QT.F32
    if outtype == "q8_0":
        return QT.Q8_0 if arr.shape[-1] % 32 == 0 else QT.F16  # 3-D: the stacked experts
    return {"f16": QT.F16, "bf16": QT.BF16}[outtype]


def write_keys(w: gguf.GGUFWriter, hp: dict, pre: dict, tok: dict | None, prompt: str,
               align: dict | None, around: tuple[list[int], list[int]] | None,
               instr: dict | None = None) -> None:
    def put(key, v):
        if isinstance(v, bool):
            w.add_key_value(key, v, VT.BOOL)
        elif isinstance(v, int):
            if v < 0:
                raise ConvertError(f"{key} = {v} is negative")
            w.add_key_value(key, v, VT.UINT32)
        elif isinstance(v, float):
            w.add_key_value(key, v, VT.FLOAT32)
        elif isinstance(v, str):
            w.add_key_value(key, v, VT.STRING)
        elif isinstance(v, (list, tuple)) and v:
            sub = VT.STRING if isinstance(v[0], str) else VT.FLOAT32 if any(isinstance(x, float) for x in v) \
                else VT.UINT32
            vals = [float(x) if sub == VT.FLOAT32 else x for x in v]
            w.add_key_value(key, vals, VT.ARRAY, sub_type=sub)

    put(P + "audio_token_id", hp["audio_token_id"])
    put(P + "audio_token", tok["audio_token"] if tok else "<|audio|>")
    put(P + "default_prompt", prompt)
    if around:
        w.add_key_value(P + "prompt.prefix_ids", around[0], VT.ARRAY, sub_type=VT.INT32)
        w.add_key_value(P + "prompt.suffix_ids", around[1], VT.ARRAY, sub_type=VT.INT32)
    if instr:
        w.add_key_value(P + "prompt.instruction.head_ids", instr["head"], VT.ARRAY, sub_type=VT.INT32)
        w.add_key_value(P + "prompt.instruction.lead", instr["lead"], VT.STRING)
        w.add_key_value(P + "prompt.instruction.trail", instr["trail"], VT.STRING)
        if instr["middle"]:  # GGUF has no empty arrays: absent means none
            w.add_key_value(P + "prompt.instruction.middle_ids", instr["middle"], VT.ARRAY, sub_type=VT.INT32)
        w.add_key_value(P + "prompt.instruction.suffix_ids", instr["suffix"], VT.ARRAY, sub_type=VT.INT32)
    put(P + "audio.speaker_activity_threshold", hp["speaker_activity_threshold"])
    fe = {"sample_rate": int(pre["sampling_rate"]), "n_fft": int(pre["n_fft"]), "win_length": int(pre["win_length"]),
          "hop_length": int(pre["hop_length"]), "num_mel_bins": int(pre["feature_size"]),
          "preemphasis": float(pre["preemphasis"] or 0.0), "log_zero_guard": float(2.0 ** -24)}
    for k, v in fe.items():
        put(P + "frontend." + k, v)
    for tower in ("asr", "diar", "wts"):
        for k, v in hp[tower].items():
            if k == "rope_theta" or k.endswith("_rate") or k.endswith("threshold") or k.endswith("boost") \
                    or k in ("partial_rotary_factor", "residual_scale"):
                v = float(v)
            put(f"{P}{tower}.{k}", v)
        put(f"{P}{tower}.layer_norm_epsilon", 1e-5)
    if align:
        put(P + "wts.tokens", align["tokens"])
        if align.get("merges"):
            put(P + "wts.merges", align["merges"])
            if "unk" in align:
                put(P + "wts.unk_token_id", align["unk"])
            for flag in ("byte_fallback", "fuse_unk"):
                if align[flag]:
                    put(P + "wts." + flag, True)
        if align["dropped"]:
            put(P + "wts.dropped_tokens", align["dropped"])
    for k, v in sorted(hp["lm"].items()):
        if k in LM_SKIP or v is None or isinstance(v, dict):
            continue
        if k in LM_FLOATS:
            v = [float(x) for x in v] if isinstance(v, list) else float(v)
        put(f"{P}lm.{k}", v)
    if tok:
        w.add_key_value("tokenizer.ggml.model", "gpt2", VT.STRING)
        w.add_key_value("tokenizer.ggml.pre", "default", VT.STRING)
        w.add_key_value("tokenizer.ggml.tokens", tok["tokens"], VT.ARRAY, sub_type=VT.STRING)
        w.add_key_value("tokenizer.ggml.token_type", tok["types"], VT.ARRAY, sub_type=VT.INT32)
        if tok["merges"]:
            w.add_key_value("tokenizer.ggml.merges", tok["merges"], VT.ARRAY, sub_type=VT.STRING)
        for key, v in (("bos", tok["bos"]), ("eos", tok["eos"]), ("padding", tok["pad"])):
            if v is not None:
                w.add_key_value(f"tokenizer.ggml.{key}_token_id", int(v), VT.UINT32)
        w.add_key_value("tokenizer.ggml.add_bos_token", False, VT.BOOL)
        if tok["regex"]:
            w.add_key_value(P + "tokenizer.pre_regex", tok["regex"], VT.ARRAY, sub_type=VT.STRING)
        if tok["ignore_merges"]:
            w.add_key_value(P + "tokenizer.ignore_merges", True, VT.BOOL)
        if tok["template"]:
            w.add_key_value("tokenizer.chat_template", tok["template"], VT.STRING)


# text_config values that are HF bookkeeping, not model hyperparameters.
LM_SKIP = {"architectures", "model_type", "dtype", "transformers_version", "_name_or_path", "id2label",
           "label2id", "output_attentions", "output_hidden_states", "return_dict", "problem_type",
           "chunk_size_feed_forward", "is_encoder_decoder", "use_cache", "num_logits_to_keep",
           "use_mamba_kernels", "output_router_logits", "initializer_range", "rescale_prenorm_residual",
           "hidden_dropout", "attention_dropout", "mtp_layers_block_type", "num_nextn_predict_layers",
           "mamba_ssm_cache_dtype"}
LM_FLOATS = {"time_step_min", "time_step_max", "time_step_floor", "time_step_limit", "routed_scaling_factor",
             "layer_norm_epsilon"}


def _lm_fix(lm: dict) -> dict:
    """time_step_limit may hold {"__float__": "Infinity"} (transformers' JSON for inf)."""
    lm = dict(lm)
    if "time_step_limit" in lm:
        lm["time_step_limit"] = [float(x["__float__"]) if isinstance(x, dict) else float(x)
                                 for x in lm["time_step_limit"]]
    return lm


def new_writer(model_dir: Path, out: Path, hp: dict, pre: dict, outtype: str,
               name: str | None = None) -> gguf.GGUFWriter:
    """A writer holding every key (hyperparameters, tokenizer, prompt); the tensors follow."""
    tok = load_tokenizer(model_dir, hp)
    proc = read_json(model_dir / "processor_config.json", required=False)
    prompt = proc.get("default_transcription_prompt") or DEFAULT_PROMPT
    w = gguf.GGUFWriter(str(out), ARCH)
    w.add_name(name or model_dir.name)
    w.add_key_value("general.file_type", FILE_TYPE[outtype], VT.UINT32)
    write_keys(w, hp, pre, tok, prompt, alignment_tokenizer(model_dir), prompt_ids(model_dir, tok, prompt),
               instruction_split(model_dir, tok, prompt))
    return w


def read_config(model_dir: Path) -> dict:
    hp = read_hparams(read_json(model_dir / "config.json"))
    hp["lm"] = _lm_fix(hp["lm"])
    return hp


def convert(model_dir: Path, out: Path, outtype: str = "auto", name: str | None = None) -> None:
    hp = read_config(model_dir)
    if outtype == "auto":
        outtype = "bf16" if "BF16" in weight_dtypes(model_dir) else "f32"
    sd = load_state_dict(model_dir)
    pre, window, fb = frontend(model_dir, sd, hp["asr"]["num_mel_bins"])
    tensors = rename_all(sd)
    check_tensors(hp, tensors)
    w = new_writer(model_dir, out, hp, pre, outtype, name)
    w.add_tensor("frontend.window", window)
    w.add_tensor("frontend.filterbank", fb)
    for tname in sorted(tensors):
        arr = np.ascontiguousarray(tensors[tname], dtype=np.float32)
        qt = target_type(tname, arr, outtype)
        w.add_tensor(tname, encode(arr, qt), raw_dtype=None if qt in (QT.F32, QT.F16) else qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model_dir", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--outtype", choices=OUTTYPES, default="auto",
                   help="linear weights' type (auto: bf16 for a bf16 checkpoint, else f32)")
    p.add_argument("--name", help="general.name")
    a = p.parse_args(argv)
    try:
        convert(a.model_dir, a.out, a.outtype, a.name)
    except ConvertError as e:
        print(f"convert_nemotron_transcribe: {e}", file=sys.stderr)
        return 1
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
