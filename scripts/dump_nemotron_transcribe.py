#!/usr/bin/env python3
"""Tiny Nemotron 3.5 Transcribe fixture: a random-init model (fixed seed) of
transformers 5.25's Nemotron3_5TranscribeForConditionalGeneration, saved as an HF
checkpoint, converted with scripts/convert_nemotron_transcribe.py (so the
converter is exercised), and the reference tensors of its audio module on one
clip in a .ref.gguf.

The offline chunking (500 encoder frames with 50 of context each side, FIFO 40,
cache update 300, speaker cache 188) is scaled down (12 / 3 / 3, FIFO 4, update
5, cache 12) so that the 3.2 s clip runs four ASR chunks with context, and the
diarization speaker cache overflows and is compressed.

    python scripts/dump_nemotron_transcribe.py [--out tests/fixtures]

Writes nemotron_transcribe_tiny.gguf and nemotron_transcribe_tiny.ref.gguf.
Reference tensors (ne order, F32): pcm [n]; features [mels, frames] (raw log-mel,
zero-padded to a multiple of 8 frames); features_norm (the ASR encoder's input);
asr_states [d, T] (ASR encoder output before asr_norm); speaker_logits [S, frames];
speaker_probs [S, T] (sigmoid averaged per encoder frame); speaker_activity [S, T]
(0/1); audio_states [d, T] (asr_norm + speaker embedding); audio_embeds [d_lm, T]
(projected); word_timestamp_logits [V, 2T] (the word timestamp encoder and head on
asr_states, in the ASR chunks). Keys: ref.valid_frames, ref.encoder_frames; and the decoder side:
ref.prompt_ids (the processor's apply_transcription_request with the default
prompt: a ChatML-like template, the clip's <|audio|> tokens expanded),
ref.generated_ids (greedy generate, GEN_TOKENS new tokens) and ref.min_margin (the
smallest top-1/top-2 logit gap over those steps), with first_logits [vocab] (the
logits after the prompt); the same for a user instruction (apply_transcription_request's
prompt=): ref.instruction (its text), ref.instruction.prompt_ids,
ref.instruction.generated_ids, ref.instruction.min_margin; and the prompt ids only of
the EXTRA instructions: ref.instruction.extra (texts), .extra_lengths, .extra_ids
(concatenated). Word times (transformers' processor align_word_timestamps, which
needs scipy and torchaudio): ref.words.generated_ids (greedy as steno run makes it:
16 + 8·seconds new tokens, stopping at steno's end tokens), ref.words.transcript (their
decode with special tokens), ref.words.run.{text,start,end,tag} (its words: seconds as
FLOAT64, tag -1 before the first <spk:N>), ref.words.texts (ALIGN_TEXTS) with
ref.words.I.{text,start,end,tag}, all on the reference's word timestamp and speaker
logits; and ref.ctc.I.{targets,path} with ctc.I.logp [C, T] (torchaudio's forced_align
on random log probabilities).

The tiny checkpoint carries a byte-level BPE tokenizer trained here (320 ids with
specials, <|audio|> appended at 320 as NVIDIA's), the chat template, and a
18-piece alignment tokenizer (a-g, 日, ▁ and their merges, fuse_unk), so the converter's
tokenizer path runs too.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import gguf
from gguf import GGUFValueType as VT

sys.path.insert(0, str(Path(__file__).resolve().parent))
import convert_nemotron_transcribe as conv  # noqa: E402

NAME = "nemotron_transcribe_tiny"
SEED = 1234
SR = 16000
N_SAMPLES = 51300  # 320 valid frames of 321, 328 after padding: the last encoder frame is padding (masked)
MELS = 16
HEAD_SCALE = 20.0
MARGIN = 0.004  # smallest |speaker probability − threshold| accepted

AUDIO = dict(
    asr_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                    num_mel_bins=MELS),
    diarization_config=dict(
        audio_config=dict(hidden_size=24, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                          num_mel_bins=MELS),
        head_config=dict(hidden_size=12, num_speakers=4, audio_hidden_size=24),
        streaming_config=dict(speaker_cache_length=12, num_speakers=4),
        chunk_length=12, chunk_left_context=3, chunk_right_context=3, fifo_length=4,
        speaker_cache_update_period=5),
)
TEXT = dict(vocab_size=320, hidden_size=32, hybrid_override_pattern="M*E-", num_attention_heads=2,
            num_key_value_heads=1, head_dim=16, intermediate_size=48, mamba_num_heads=4, mamba_head_dim=16,
            ssm_state_size=8, n_groups=2, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=24,
            moe_shared_expert_intermediate_size=24, chunk_size=16, bos_token_id=1, eos_token_id=2,
            pad_token_id=0)
WTS = dict(hidden_size=32, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, vocab_size=20,
           blank_token_id=19)


GEN_TOKENS = 8
LM_HEAD_SCALE = 100.0  # random init gives logits within ±0.1: scaled so greedy steps are not near-ties
TEXTS = ["Audio transcription. Language: as spoken. Wording: verbatim, including fillers and repetitions. "
         "Formatting: punctuation and capitalization. Output: transcript only.",
         "The quick brown fox jumps over the lazy dog.", "Hello world, this is a test of the tiny tokenizer.",
         "speaker one said yes and speaker two said no"] * 3
SPECIALS = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<spk:0>", "<spk:1>"]
# The split pattern of Nemotron-H's tokenizer.json, then byte-level pieces.
SPLIT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
         r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
         r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
TEMPLATE = (
    "{%- for message in messages -%}\n<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for c in message['content'] %}{% if c['type'] == 'text' %}{{ c['text'] }}"
    "{% elif c['type'] == 'audio' %}<|audio|>{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor -%}\n{%- if add_generation_prompt -%}<|im_start|>assistant\n"
    "{% if not (enable_thinking | default(true)) %}<think></think>{% endif %}{%- endif -%}")


def processor(fe):
    """The processor of the tiny checkpoint: tokenizer, alignment tokenizer, template."""
    from tokenizers import Tokenizer, Regex, decoders, models, pre_tokenizers, trainers
    from transformers import Nemotron3_5TranscribeProcessor, PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXTS, trainers.BpeTrainer(vocab_size=TEXT["vocab_size"], special_tokens=SPECIALS,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                       show_progress=False))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<unk>")
    fast.add_special_tokens({"additional_special_tokens": ["<|audio|>"]})
    assert len(fast) == TEXT["vocab_size"] + 1 and fast.convert_tokens_to_ids("<|audio|>") == TEXT["vocab_size"]
    al = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))  # runs of unknown characters: one piece
    al.pre_tokenizer = pre_tokenizers.Metaspace()
    al.train_from_iterator(["a b c d e f g 日"], trainers.BpeTrainer(vocab_size=19, special_tokens=["<unk>"],
                                                                   show_progress=False))
    return Nemotron3_5TranscribeProcessor(fe, fast, PreTrainedTokenizerFast(tokenizer_object=al, unk_token="<unk>"),
                                          chat_template=TEMPLATE)


# A user instruction (steno run --prompt): a newline first (it would join the
# template's "user\n" if tokenized apart), words the tiny tokenizer never saw.
INSTRUCTIONS = ["\nTranscribe this, then stop: names Zoë & Øyvind; 42 words.",
                "\nTranscribe it: names Zoë & Øyvind, 42 words.", "\nSay who speaks: Zoë, Øyvind (42)."]
# More instructions whose prompt ids only are kept (the tokenizer's corners: added
# tokens inside, white space at the ends, scripts and digits, case runs).
EXTRA = ["", " leading space", "  two  spaces\t tab\n", "Ünïcödé 数字 123 'quotes' <b>x</b>",
         "tags <spk:0> and <|im_end|> inside", "ALLCAPS then lowercase CamelCase words\r\n\n"]
MIN_MARGIN = 0.02  # the first instruction whose greedy steps are this far from a tie


def generation(model, proc, pcm, prompt: str | None = None) -> dict:
    """Prompt ids, greedy tokens and their margins (the decoder-side references)."""
    inputs = proc.apply_transcription_request(audio=pcm, prompt=prompt)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=GEN_TOKENS, do_sample=False,
                             output_logits=True, return_dict_in_generate=True)
    prompt = inputs["input_ids"][0]
    gen = out.sequences[0, prompt.shape[0]:]
    margins = [float(torch.topk(l[0], 2).values.diff().abs()) for l in out.logits]
    print(f"prompt {prompt.shape[0]} ids ({int((prompt == TEXT['vocab_size']).sum())} audio), generated "
          f"{gen.tolist()}, smallest margin {min(margins):.4f}")
    return {"prompt": prompt.tolist(), "generated": gen.tolist(), "margin": min(margins),
            "first_logits": out.logits[0][0]}


def clip() -> np.ndarray:
    """3.2 s of tones and noise bursts whose loudness changes (deterministic)."""
    rng = np.random.default_rng(7)
    t = np.arange(N_SAMPLES) / SR
    x = 0.3 * np.sin(2 * np.pi * (220 + 180 * t) * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 0.7 * t))
    x += 0.2 * np.sin(2 * np.pi * 1250 * t) * (t > 1.4) * (t < 2.3)
    x += 0.05 * rng.standard_normal(N_SAMPLES) * (1 + 3 * (t > 2.5))
    return x.astype(np.float32)


def build_model():
    from transformers import Nemotron3_5TranscribeConfig, Nemotron3_5TranscribeForConditionalGeneration
    cfg = Nemotron3_5TranscribeConfig(audio_config=AUDIO, text_config=TEXT, word_timestamp_config=WTS,
                                      audio_token_id=TEXT["vocab_size"])
    torch.manual_seed(SEED)
    model = Nemotron3_5TranscribeForConditionalGeneration(cfg).eval()
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.startswith(("model.audio_tower.", "model.multi_modal_projector.",
                                    "model.word_timestamp_encoder.", "word_timestamp_head.")):
                continue
            if p.ndim >= 2:  # 1/sqrt(fan_in): states that change through every layer
                p.copy_(torch.randn(p.shape, generator=g) / p[0].numel() ** 0.5)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
        # speaker logits far from 0 so that activities (p > 0.5) and the speaker cache's
        # scores do not hang on rounding
        head = model.model.audio_tower.diarization_model.classifier.out_proj
        # (rows centred: the ReLU features are all positive, so an uncentred row gives one sign)
        head.weight.sub_(head.weight.mean(1, keepdim=True)).mul_(HEAD_SCALE)
        head.bias.zero_()
        model.lm_head.weight.mul_(LM_HEAD_SCALE)
    return model


def features(pcm: np.ndarray):
    from transformers import NemotronAsrStreamingFeatureExtractor
    fe = NemotronAsrStreamingFeatureExtractor(feature_size=MELS, mel_filters_dtype="bfloat16")
    out = fe(pcm, sampling_rate=SR, return_tensors="pt")
    feats, mask = out["input_features"], out["attention_mask"].long()
    pad = -feats.shape[1] % 8
    feats = torch.nn.functional.pad(feats, (0, 0, 0, pad))
    mask = torch.nn.functional.pad(mask, (0, pad))
    return fe, feats, mask


def references(model, feats, mask) -> dict:
    from transformers.models.nemotron3_5_transcribe.modeling_nemotron3_5_transcribe import normalize_per_feature
    tower = model.model.audio_tower
    with torch.no_grad():
        out = tower(feats, input_features_mask=mask)
        s = tower.config.subsampling_factor
        T = feats.shape[1] // s
        probs = out.speaker_logits.sigmoid().unflatten(1, (T, -1)).mean(2)
        act = (probs > tower.config.speaker_activity_threshold).float()
        emb = model.model.multi_modal_projector(out.last_hidden_state)
        wts = model.get_word_timestamp_logits(out.asr_last_hidden_state, mask)
    margin = float((probs - tower.config.speaker_activity_threshold).abs().min())
    print(f"speaker probability margin from the threshold: {margin:.4f}; active share {float(act.mean()):.2f}")
    if margin < MARGIN:
        raise SystemExit("speaker activities too close to the threshold: pick another seed or scale")
    return {"features": feats[0], "features_norm": normalize_per_feature(feats, mask)[0],
            "asr_states": out.asr_last_hidden_state[0], "speaker_logits": out.speaker_logits[0],
            "speaker_probs": probs[0], "speaker_activity": act[0], "audio_states": out.last_hidden_state[0],
            "audio_embeds": emb[0], "word_timestamp_logits": wts[0]}


def check_prompt(path: Path, prompt: list[int], n_audio: int) -> None:
    """The converted file's prompt keys rebuild the processor's prompt ids."""
    r = gguf.GGUFReader(str(path))
    pre = list(r.fields[conv.P + "prompt.prefix_ids"].contents())
    post = list(r.fields[conv.P + "prompt.suffix_ids"].contents())
    assert pre + [TEXT["vocab_size"]] * n_audio + post == prompt, (pre, post, prompt)


def write_preprocessor(fe, d: Path) -> None:
    fe.save_pretrained(str(d))
    cfg = json.loads((d / "preprocessor_config.json").read_text())
    assert cfg["mel_filters_dtype"] == "bfloat16" and cfg["feature_size"] == MELS


# Speaker-cache compressions checked directly (probabilities in, kept frames out):
# (cache length, speakers, frames) at the tiny sizes and at the published ones.
# Dense: most speakers speak in most frames; sparse: one dominant speaker per frame
# (positive scores, so the rule that drops a speaker's non-positive frames bites).
COMPRESS_CASES = [(16, 4, 40), (16, 4, 25), (188, 8, 228), (188, 8, 488), (16, 4, 40), (188, 8, 228)]
SPARSE_FROM = 4


def compress_cases() -> tuple[list[np.ndarray], list[int]]:
    """transformers' _compress on random probabilities (speech-heavy, so that every
    rule bites); the frames it keeps, the frame count meaning the silence slot."""
    from transformers.models.nemotron3_diarization.configuration_nemotron3_diarization import (
        Nemotron3DiarizationStreamingConfig)
    from transformers.models.nemotron3_diarization.modeling_nemotron3_diarization import (
        Nemotron3DiarizationSpeakerCache)
    g = torch.Generator().manual_seed(99)
    probs, frames = [], []
    for i, (L, S, n) in enumerate(COMPRESS_CASES):
        cache = Nemotron3DiarizationSpeakerCache(Nemotron3DiarizationStreamingConfig(
            speaker_cache_length=L, num_speakers=S))
        p = torch.rand(1, n, S, generator=g) ** 0.5
        if i >= SPARSE_FROM:
            lead = torch.randint(0, S, (n,), generator=g)
            p = torch.rand(1, n, S, generator=g) * 0.1
            p[0, torch.arange(n), lead] = 0.55 + 0.45 * torch.rand(n, generator=g)
        emb = torch.arange(n, dtype=torch.float32).view(1, n, 1)
        kept, _ = cache._compress(emb, p, torch.full((1,), float(n)))
        probs.append(p[0].numpy())
        frames += [int(x) for x in kept[0, :, 0]]
    return probs, frames


# Transcripts timed by the processor's align_word_timestamps on the reference
# logits: words of the tiny alignment vocabulary (a-g), speaker tags, an event
# tag, a dash, a character it lacks.
ALIGN_TEXTS = ["bad cafe dab", "<spk:0> a bad cafe <spk:1> bead face <spk:0> dab",
               "intro <spk:1> gag deaf <spk:2> bed add <spk:3> ace", "fade—ace <ev:laugh> bee x</s>",
               "<spk:1> ab <spk:0> cd <spk:1> ef <spk:0> ga",
               # Chinese and Japanese are aligned character by character (letters, marks and numbers
               # only); Korean by word; a character the vocabulary lacks, or Thai, times nothing
               "日日。 ab <spk:1> 日, ca <ev:x>", "<spk:0> 한 bad 日 <spk:1> ce", "日の", "ไทย abc"]


def stop_ids(path: Path) -> list[int]:
    """The ids steno stops at (transcribe.c's stops): the LM's eos, the file's tokenizer eos, <|im_end|>."""
    r = gguf.GGUFReader(str(path))
    vocab = TEXT["vocab_size"]
    ids = [int(x) for x in r.fields[conv.P + "lm.eos_token_id"].contents()] \
        if isinstance(r.fields[conv.P + "lm.eos_token_id"].contents(), list) \
        else [int(r.fields[conv.P + "lm.eos_token_id"].contents())]
    if "tokenizer.ggml.eos_token_id" in r.fields:
        ids.append(int(r.fields["tokenizer.ggml.eos_token_id"].contents()))
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    if "<|im_end|>" in tokens:
        ids.append(tokens.index("<|im_end|>"))
    return sorted({i for i in ids if i < vocab})


def chunks(result: dict) -> dict:
    c = result["chunks"]
    return {"text": [x["text"] for x in c], "start": [float(x["timestamp"][0]) for x in c],
            "end": [float(x["timestamp"][1]) for x in c],
            "tag": [-1 if x["speaker"] is None else int(x["speaker"]) for x in c]}


def word_times(model, proc, pcm, refs: dict, mask, path: Path) -> dict:
    """steno run's transcript (greedy, 16 + 8·seconds new tokens, stopping at
    steno's end tokens) and its words as align_word_timestamps times them; the
    same for ALIGN_TEXTS."""
    inputs = proc.apply_transcription_request(audio=pcm)
    max_new = 16 + int(8 * len(pcm) / SR)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=max_new, do_sample=False, eos_token_id=stop_ids(path),
                             output_logits=True, return_dict_in_generate=True)
    gen = out.sequences[0, inputs["input_ids"].shape[1]:].tolist()
    margin = min(float(torch.topk(l[0], 2).values.diff().abs()) for l in out.logits)
    text = proc.decode(gen, skip_special_tokens=False)
    align = lambda t: proc.align_word_timestamps(  # noqa: E731
        t, refs["word_timestamp_logits"][None], mask, refs["speaker_logits"][None])
    run = chunks(align(text))
    print(f"steno's transcript: {len(gen)} ids (margin {margin:.4f}), {len(run['text'])} timed words")
    def timed(t: str) -> dict:
        try:
            return chunks(align(t))
        except ValueError as e:  # the processor refuses it: no words
            print(f"  {t!r}: {e}")
            return {"text": [], "start": [], "end": [], "tag": []}
    texts = [timed(t) for t in ALIGN_TEXTS]
    for t, c in zip(ALIGN_TEXTS, texts):
        print(f"  {t!r}: {list(zip(c['text'], c['start'], c['end'], c['tag']))}")
    return {"ids": gen, "margin": margin, "transcript": text, "run": run, "texts": texts}


# Forced alignments by torchaudio on random log-probabilities (the blank last):
# (frames, classes, targets); rounded scores make ties.
CTC_CASES = [(12, 5, [0, 1, 1, 2]), (6, 4, [2, 2, 2]), (9, 3, [0, 1, 0, 1]), (30, 7, [5, 5, 0, 3, 3, 3, 1]),
             (4, 6, [1, 2, 3, 4])]


def ctc_cases() -> list[dict]:
    from torchaudio.functional import forced_align
    g = torch.Generator().manual_seed(SEED)
    out = []
    for i, (t, c, targets) in enumerate(CTC_CASES):
        x = torch.randn(t, c, generator=g)
        if i % 2:
            x = x.round()
        lp = x.log_softmax(-1)
        path, _ = forced_align(lp[None], torch.tensor([targets]), blank=c - 1)
        out.append({"logp": lp.numpy(), "targets": targets, "path": path[0].tolist()})
    return out


def write_words(w: gguf.GGUFWriter, words: dict) -> None:
    def put(prefix: str, c: dict) -> None:
        if c["text"]:  # GGUF has no empty arrays: absent means none
            w.add_key_value(prefix + "text", c["text"], VT.ARRAY, sub_type=VT.STRING)
            w.add_key_value(prefix + "start", c["start"], VT.ARRAY, sub_type=VT.FLOAT64)
            w.add_key_value(prefix + "end", c["end"], VT.ARRAY, sub_type=VT.FLOAT64)
            w.add_key_value(prefix + "tag", c["tag"], VT.ARRAY, sub_type=VT.INT32)
    w.add_key_value("ref.words.generated_ids", words["ids"], VT.ARRAY, sub_type=VT.INT32)
    w.add_key_value("ref.words.min_margin", words["margin"], VT.FLOAT32)
    w.add_key_value("ref.words.transcript", words["transcript"], VT.STRING)
    put("ref.words.run.", words["run"])
    w.add_key_value("ref.words.texts", ALIGN_TEXTS, VT.ARRAY, sub_type=VT.STRING)
    for i, c in enumerate(words["texts"]):
        put(f"ref.words.{i}.", c)
    for i, c in enumerate(ctc_cases()):
        w.add_key_value(f"ref.ctc.{i}.targets", c["targets"], VT.ARRAY, sub_type=VT.INT32)
        w.add_key_value(f"ref.ctc.{i}.path", c["path"], VT.ARRAY, sub_type=VT.INT32)
        w.add_tensor(f"ctc.{i}.logp", np.ascontiguousarray(c["logp"]))


def write_ref(path: Path, pcm, refs: dict, valid: int, T: int, gen: dict, words: dict) -> None:
    w = gguf.GGUFWriter(str(path), "steno-ref")
    w.add_key_value("ref.model", f"{NAME}.gguf", VT.STRING)
    w.add_key_value("ref.seed", SEED, VT.UINT32)
    w.add_key_value("ref.source", f"transformers {__import__('transformers').__version__}, torch "
                    f"{torch.__version__}", VT.STRING)
    w.add_key_value("ref.valid_frames", valid, VT.UINT32)
    w.add_key_value("ref.encoder_frames", T, VT.UINT32)
    w.add_key_value("ref.prompt_ids", gen["prompt"], VT.ARRAY, sub_type=VT.INT32)
    w.add_key_value("ref.generated_ids", gen["generated"], VT.ARRAY, sub_type=VT.INT32)
    w.add_key_value("ref.min_margin", gen["margin"], VT.FLOAT32)
    w.add_tensor("first_logits", np.ascontiguousarray(gen["first_logits"].float().numpy()))
    if "instruction" in gen:
        w.add_key_value("ref.instruction", gen["instruction"]["text"], VT.STRING)
        w.add_key_value("ref.instruction.prompt_ids", gen["instruction"]["prompt"], VT.ARRAY, sub_type=VT.INT32)
        w.add_key_value("ref.instruction.generated_ids", gen["instruction"]["generated"], VT.ARRAY,
                        sub_type=VT.INT32)
        w.add_key_value("ref.instruction.min_margin", gen["instruction"]["margin"], VT.FLOAT32)
        w.add_key_value("ref.instruction.extra", EXTRA, VT.ARRAY, sub_type=VT.STRING)
        w.add_key_value("ref.instruction.extra_lengths", [len(x) for x in gen["extra"]], VT.ARRAY,
                        sub_type=VT.INT32)
        w.add_key_value("ref.instruction.extra_ids", [i for x in gen["extra"] for i in x], VT.ARRAY,
                        sub_type=VT.INT32)
    cprobs, cframes = compress_cases()
    w.add_key_value("ref.compress.cases", [x for c in COMPRESS_CASES for x in c], VT.ARRAY, sub_type=VT.INT32)
    w.add_key_value("ref.compress.frames", cframes, VT.ARRAY, sub_type=VT.INT32)
    for i, p in enumerate(cprobs):
        w.add_tensor(f"compress.{i}.probs", np.ascontiguousarray(p))
    write_words(w, words)
    w.add_tensor("pcm", pcm)
    for k, v in refs.items():
        w.add_tensor(k, np.ascontiguousarray(v.float().numpy()))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def wide() -> None:
    """Published widths, heads, speakers, mels and offline chunking; one layer each."""
    global N_SAMPLES, MELS, MARGIN
    N_SAMPLES, MELS, MARGIN = 2_000_100, 128, 0.0
    AUDIO.update(
        asr_config=dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=1, num_attention_heads=10,
                        num_mel_bins=MELS),
        diarization_config=dict(
            audio_config=dict(hidden_size=512, intermediate_size=2048, num_hidden_layers=1, num_attention_heads=8,
                              num_mel_bins=MELS),
            head_config=dict(hidden_size=192, num_speakers=8, audio_hidden_size=512),
            streaming_config=dict(speaker_cache_length=188, num_speakers=8),
            chunk_length=500, chunk_left_context=50, chunk_right_context=50, fifo_length=40,
            speaker_cache_update_period=300))
    WTS.update(hidden_size=1280, intermediate_size=640, num_hidden_layers=1, num_attention_heads=16, vocab_size=64,
               blank_token_id=63)


def long_chunks() -> None:
    """The published offline chunking (500 ± 50, FIFO 40, update 300, cache 188) on 125 s with
    160-wide speech and word timestamp towers (heads of 80): attention over 1200 rows."""
    global MELS, MARGIN
    MELS, MARGIN = 16, 0.0
    global N_SAMPLES
    N_SAMPLES = 2_000_100
    AUDIO["asr_config"].update(hidden_size=160, num_attention_heads=2)
    AUDIO["diarization_config"].update(chunk_length=500, chunk_left_context=50, chunk_right_context=50,
                                       fifo_length=40, speaker_cache_update_period=300)
    AUDIO["diarization_config"]["streaming_config"] = dict(speaker_cache_length=188, num_speakers=4)
    WTS.update(hidden_size=160, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "tests" / "fixtures")
    ap.add_argument("--wide", action="store_true",
                    help="the published audio widths and chunking (one layer per tower) on 125 s: a local "
                         "check of steno's shapes (about 200 MB, not a fixture)")
    ap.add_argument("--long", action="store_true",
                    help="the published chunking on 125 s with small towers: a local check (not a fixture)")
    a = ap.parse_args()
    if a.wide:
        wide()
    if a.long:
        long_chunks()
    pcm = clip()
    model = build_model()
    fe, feats, mask = features(pcm)
    refs = references(model, feats, mask)
    valid, T = int(mask.sum()), feats.shape[1] // 8
    proc = processor(fe)
    gen = generation(model, proc, pcm)
    for text in INSTRUCTIONS:
        g = generation(model, proc, pcm, text)
        if g["margin"] >= MIN_MARGIN and g["generated"] != gen["generated"]:
            gen["instruction"] = dict(g, text=text)
            break
    else:
        raise SystemExit("no instruction changes the generated tokens clear of ties: add another")
    gen["extra"] = [proc.apply_transcription_request(audio=pcm, prompt=x)["input_ids"][0].tolist() for x in EXTRA]
    with tempfile.TemporaryDirectory() as tmp:
        ck = Path(tmp) / NAME
        model.save_pretrained(str(ck))
        proc.save_pretrained(str(ck))
        write_preprocessor(fe, ck)
        conv.convert(ck, a.out / f"{NAME}.gguf", "f32", NAME)
    check_prompt(a.out / f"{NAME}.gguf", gen["prompt"], -(-valid // 8))
    words = word_times(model, proc, pcm, refs, mask, a.out / f"{NAME}.gguf")
    write_ref(a.out / f"{NAME}.ref.gguf", pcm, refs, valid, T, gen, words)
    print(f"wrote {a.out}/{NAME}.gguf and .ref.gguf: {valid} valid frames, {T} encoder frames")
    return 0


if __name__ == "__main__":
    sys.exit(main())
