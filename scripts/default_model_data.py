#!/usr/bin/env python3
"""The data recipe of steno's bundled default model: English sentences, spoken by
espeak-ng with many voices, rates and pitches.

Everything here needs only the Python standard library, numpy and scipy, so that
the synthesis workers start fast. Every draw comes from a seeded generator: the
same seed gives the same sentences and the same voice settings.

    python scripts/default_model_data.py wordlist          # rebuild scripts/data/en_words.tsv
    python scripts/default_model_data.py sample --n 5      # print a few sentences and voices
    python scripts/default_model_data.py eval-set DIR      # write the held-out set as WAV + TSV

The word list is the 10 000 most frequent English words of the `wordfreq` package
(PyPI) that Debian's `wamerican` dictionary also lists in lower case (so names and
acronyms, which espeak-ng reads in unpredictable ways, stay out), with their
frequencies.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import re
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WORDS_FILE = HERE / "data" / "en_words.tsv"
SR = 16000

# espeak-ng's English voices (lang/gmw), all used in training and evaluation.
BASE_VOICES = ["en", "en-us", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-gb-x-rp",
               "en-029", "en-us-nyc"]
# Voice variants (espeak-ng-data/voices/!v). The held-out ones are never heard in
# training; "" is the base voice alone.
TRAIN_VARIANTS = ["", "m1", "m2", "m3", "m4", "m5", "m7", "m8", "f1", "f2", "f3", "f5", "klatt", "klatt4",
                  "klatt5", "klatt6", "Alex", "Alicia", "Annie", "Denis", "Gene", "Hugo", "Jacky", "Lee",
                  "Michael", "Mike", "Tweaky", "adam", "anika", "announcer", "aunty", "boris", "caleb",
                  "david", "ed", "edward", "grandma", "grandpa", "iven", "iven2", "john", "linda", "max",
                  "norbert", "paul", "quincy", "rob", "shelby", "steph", "steph2", "travis", "victor",
                  "zac", "benjamin", "michel", "pablo", "marcelo", "kaukovalta", "antonio"]
EVAL_VARIANTS = ["m6", "f4", "klatt2", "klatt3", "Andy", "belinda", "edward2", "iven3", "robert", "steph3",
                 "Gene2", "sandro"]
# Speaking rates (espeak-ng -s, words per minute): evaluation uses a band that
# training never sees.
TRAIN_RATES = [(115, 160), (186, 215)]
EVAL_RATES = [(162, 184)]

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen").split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()

# Left out of the text so that the bundled model never learns to write them.
BLOCKED = re.compile(r"^(fuck|shit|cunt|bitch|nigg|fag|whore|slut|dick|cock|pussy|asshole|bastard|"
                     r"rape|retard|porn|sex|nazi|kill|suicide|damn|hell$|crap|piss|tits?$|boob)")


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------

def number_words(n: int, rng: random.Random) -> str:
    """0..999 999 spelled out, with or without the British 'and'."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    if n < 1000:
        rest = n % 100
        head = ONES[n // 100] + " hundred"
        if rest == 0:
            return head
        return head + (" and " if rng.random() < 0.5 else " ") + number_words(rest, rng)
    head = number_words(n // 1000, rng) + " thousand"
    rest = n % 1000
    return head if rest == 0 else head + " " + number_words(rest, rng)


def number_phrase(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.4:
        return number_words(rng.randint(0, 20), rng)
    if r < 0.65:
        return number_words(rng.randint(21, 99), rng)
    if r < 0.85:
        return number_words(rng.randint(100, 999), rng)
    if r < 0.95:                                     # a year, read as two pairs
        y = rng.randint(1900, 2099)
        if y % 100 == 0 or 2000 <= y < 2010:
            return number_words(y, rng)
        return number_words(y // 100, rng) + " " + (number_words(y % 100, rng) if y % 100 >= 10
                                                     else "oh " + ONES[y % 100])
    return number_words(rng.randint(1000, 99999), rng)


class TextGen:
    """Sentences of 2..18 items: words drawn by tempered frequency (so rarer words
    come up often enough to be learnt), some drawn uniformly, some spelled-out
    numbers. Lower-case letters, apostrophes and single spaces only."""

    def __init__(self, words_file: Path = WORDS_FILE, temper: float = 0.6):
        words, freqs = [], []
        for line in words_file.read_text().splitlines():
            w, f = line.split("\t")
            words.append(w)
            freqs.append(float(f))
        self.words = words
        p = np.asarray(freqs) ** temper
        self.cum = np.cumsum(p / p.sum()).tolist()

    def word(self, rng: random.Random) -> str:
        r = rng.random()
        if r < 0.07:
            return number_phrase(rng)
        if r < 0.14:
            return self.words[rng.randrange(len(self.words))]
        import bisect
        return self.words[min(bisect.bisect(self.cum, rng.random()), len(self.words) - 1)]

    def sentence(self, rng: random.Random) -> str:
        n = rng.randint(2, 18)
        return " ".join(self.word(rng) for _ in range(n))


def build_wordlist(n: int = 10000) -> None:
    """scripts/data/en_words.tsv from wordfreq (PyPI) and wamerican (Debian)."""
    import wordfreq
    dict_words = set()
    for w in Path("/usr/share/dict/american-english").read_text(encoding="utf-8").splitlines():
        if w.islower():
            dict_words.add(w)
    out = []
    for w in wordfreq.top_n_list("en", 60000):
        if not re.fullmatch(r"[a-z']+", w) or BLOCKED.match(w):
            continue
        if len(w) == 1 and w not in ("a", "i"):
            continue
        if w not in dict_words and w != "i":
            continue
        out.append((w, wordfreq.word_frequency(w, "en")))
        if len(out) == n:
            break
    WORDS_FILE.parent.mkdir(parents=True, exist_ok=True)
    WORDS_FILE.write_text("".join(f"{w}\t{f:.4g}\n" for w, f in out))
    print(f"{WORDS_FILE}: {len(out)} words")


# ---------------------------------------------------------------------------
# Voices and synthesis
# ---------------------------------------------------------------------------

def draw_voice(rng: random.Random, held_out: bool) -> dict:
    variants = EVAL_VARIANTS if held_out else TRAIN_VARIANTS
    lo, hi = rng.choice(EVAL_RATES if held_out else TRAIN_RATES)
    v = rng.choice(variants)
    return dict(voice=rng.choice(BASE_VOICES) + ("+" + v if v else ""), rate=rng.randint(lo, hi),
                pitch=rng.randint(20, 80), gap=rng.choice([0, 0, 0, 1, 2, 4]), amp=rng.randint(60, 180))


def espeak_env(prefix: str | None) -> dict:
    """Environment for an espeak-ng unpacked from Debian packages under prefix
    (dpkg -x), or the system's when prefix is None."""
    env = dict(os.environ)
    if prefix:
        lib = f"{prefix}/usr/lib/x86_64-linux-gnu"
        env["LD_LIBRARY_PATH"] = ":".join([lib, f"{prefix}/lib/x86_64-linux-gnu", f"{lib}/pulseaudio",
                                           env.get("LD_LIBRARY_PATH", "")])
        env["ESPEAK_DATA_PATH"] = lib
    return env


def espeak_bin(prefix: str | None) -> str:
    return f"{prefix}/usr/bin/espeak-ng" if prefix else "espeak-ng"


def parse_wav(buf: bytes) -> tuple[np.ndarray, int]:
    """16-bit mono PCM from espeak-ng --stdout (its header's sizes are not final,
    so the data chunk is taken to the end of the stream)."""
    if buf[:4] != b"RIFF" or buf[8:12] != b"WAVE":
        raise ValueError("espeak-ng did not write a WAV stream")
    rate = int.from_bytes(buf[24:28], "little")
    i = buf.find(b"data", 12)
    if i < 0:
        raise ValueError("no data chunk")
    data = buf[i + 8:]
    return np.frombuffer(data[: len(data) // 2 * 2], dtype="<i2"), rate


def synthesize(text: str, v: dict, prefix: str | None, env: dict) -> np.ndarray:
    """One sentence at 16 kHz, int16."""
    from scipy.signal import resample_poly
    cmd = [espeak_bin(prefix), "-v", v["voice"], "-s", str(v["rate"]), "-p", str(v["pitch"]),
           "-g", str(v["gap"]), "-a", str(v["amp"]), "--stdout"]
    out = subprocess.run(cmd, input=text.encode(), capture_output=True, env=env, check=True).stdout
    pcm, rate = parse_wav(out)
    x = pcm.astype(np.float32)
    if rate != SR:
        g = np.gcd(SR, rate)
        x = resample_poly(x, SR // g, rate // g)
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


class Speaker:
    """libespeak-ng through ctypes, in synchronous mode: the audio and, from its word
    events, the sample where each word starts (what the training script uses to
    give CTC a first alignment). The library's own dependencies are found through
    LD_LIBRARY_PATH, so a process that uses an unpacked espeak-ng must start with
    espeak_env(prefix) as its environment."""

    def __init__(self, prefix: str | None):
        import ctypes as C

        class _Id(C.Union):
            _fields_ = [("number", C.c_int), ("name", C.c_char_p), ("string", C.c_char * 8)]

        class Event(C.Structure):   # espeak_EVENT (speak_lib.h)
            _fields_ = [("type", C.c_int), ("unique_identifier", C.c_uint), ("text_position", C.c_int),
                        ("length", C.c_int), ("audio_position", C.c_int), ("sample", C.c_int),
                        ("user_data", C.c_void_p), ("id", _Id)]

        lib_dir = f"{prefix}/usr/lib/x86_64-linux-gnu" if prefix else None
        self.lib = C.CDLL(f"{lib_dir}/libespeak-ng.so.1" if lib_dir else "libespeak-ng.so.1")
        self.lib.espeak_Initialize.argtypes = [C.c_int, C.c_int, C.c_char_p, C.c_int]
        self.lib.espeak_SetVoiceByName.argtypes = [C.c_char_p]
        self.lib.espeak_Synth.argtypes = [C.c_char_p, C.c_size_t, C.c_uint, C.c_int, C.c_uint, C.c_uint,
                                          C.c_void_p, C.c_void_p]
        self.rate = self.lib.espeak_Initialize(2, 0, lib_dir.encode() if lib_dir else None, 0)  # SYNCHRONOUS
        if self.rate <= 0:
            raise RuntimeError("espeak_Initialize failed")
        self.chunks, self.words = [], []

        def on_audio(wav, n, events):
            if n > 0:
                self.chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
            i = 0
            while events[i].type != 0:          # espeakEVENT_LIST_TERMINATED
                if events[i].type == 1:         # espeakEVENT_WORD
                    self.words.append(events[i].sample)
                i += 1
            return 0

        self._callback = C.CFUNCTYPE(C.c_int, C.POINTER(C.c_short), C.c_int, C.POINTER(Event))(on_audio)
        self.lib.espeak_SetSynthCallback(self._callback)

    def speak(self, text: str, v: dict) -> tuple[np.ndarray, list[int]]:
        """16 kHz int16 audio and the start sample of each word (16 kHz)."""
        from scipy.signal import resample_poly
        if self.lib.espeak_SetVoiceByName(v["voice"].encode()) != 0:
            raise RuntimeError(f"espeak-ng has no voice {v['voice']}")
        for param, value in ((1, v["rate"]), (2, v["amp"]), (3, v["pitch"]), (7, v["gap"])):
            self.lib.espeak_SetParameter(param, value, 0)   # RATE, VOLUME, PITCH, WORDGAP
        self.chunks, self.words = [], []
        b = text.encode()
        if self.lib.espeak_Synth(b, len(b) + 1, 0, 1, 0, 0, None, None) != 0:
            raise RuntimeError("espeak_Synth failed")
        x = np.concatenate(self.chunks).astype(np.float32) if self.chunks else np.zeros(1, np.float32)
        g = np.gcd(SR, self.rate)
        y = resample_poly(x, SR // g, self.rate // g)
        starts = [int(w * SR // self.rate) for w in self.words]
        return np.clip(np.round(y), -32768, 32767).astype(np.int16), starts


_SPEAKER: dict = {}


def make_shard(seed: int, shard: int, n: int, held_out: bool, prefix: str | None, gen: TextGen):
    """n utterances; shard k of a seed is always the same (its own generator).
    Training shards come from the library (with word start samples; -1 where the
    word events do not match the words), held-out shards from the espeak-ng
    command, as users and the CI test make their clips."""
    rng = random.Random(f"{seed}/{'eval' if held_out else 'train'}/{shard}")
    env = espeak_env(prefix)
    texts, voices, pcms, starts = [], [], [], []
    for _ in range(n):
        t, v = gen.sentence(rng), draw_voice(rng, held_out)
        texts.append(t)
        voices.append(v)
        if held_out:
            pcms.append(synthesize(t, v, prefix, env))
            starts.append([-1] * len(t.split()))
        else:
            sp = _SPEAKER.get(prefix) or _SPEAKER.setdefault(prefix, Speaker(prefix))
            pcm, st = sp.speak(t, v)
            pcms.append(pcm)
            starts.append(st if len(st) == len(t.split()) else [-1] * len(t.split()))
    lens = np.array([len(p) for p in pcms], dtype=np.int64)
    return dict(audio=np.concatenate(pcms), lens=lens, texts=texts, voices=voices,
                starts=np.array([x for s in starts for x in s], dtype=np.int64))


def save_shard(path: Path, sh: dict) -> None:
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, audio=sh["audio"], lens=sh["lens"], texts=np.array(sh["texts"]), starts=sh["starts"],
             voices=np.array([f"{v['voice']} {v['rate']} {v['pitch']} {v['gap']} {v['amp']}" for v in sh["voices"]]))
    os.replace(tmp, path)


def load_shard(path: Path) -> dict:
    """The shard, with "word_starts": per utterance, the start sample of each word."""
    z = np.load(path)
    texts = [str(t) for t in z["texts"]]
    flat = z["starts"].tolist() if "starts" in z else [-1] * sum(len(t.split()) for t in texts)
    word_starts, k = [], 0
    for t in texts:
        n = len(t.split())
        word_starts.append(flat[k:k + n])
        k += n
    return dict(audio=z["audio"], lens=z["lens"], texts=texts, word_starts=word_starts,
                voices=[str(v) for v in z["voices"]])


def write_wav(path: Path, pcm: np.ndarray) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(pcm.astype("<i2").tobytes())


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("wordlist", help="rebuild scripts/data/en_words.tsv (needs wordfreq and wamerican)")
    s = sub.add_parser("sample", help="print sentences and voices")
    s.add_argument("--n", type=int, default=5)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--held-out", action="store_true")
    e = sub.add_parser("eval-set", help="write the held-out set (WAV files + index.tsv)")
    e.add_argument("out", type=Path)
    e.add_argument("--seed", type=int, default=20261202)
    e.add_argument("--n", type=int, default=300)
    e.add_argument("--shard", type=int, default=0)
    a = p.parse_args(argv)
    if a.cmd == "wordlist":
        build_wordlist()
    elif a.cmd == "sample":
        gen, rng = TextGen(), random.Random(a.seed)
        for _ in range(a.n):
            print(draw_voice(rng, a.held_out), "|", gen.sentence(rng))
    else:
        a.out.mkdir(parents=True, exist_ok=True)
        sh = make_shard(a.seed, a.shard, a.n, True, None, TextGen())
        off = 0
        with open(a.out / "index.tsv", "w") as f:
            for i, (t, v, n) in enumerate(zip(sh["texts"], sh["voices"], sh["lens"])):
                write_wav(a.out / f"{i:04d}.wav", sh["audio"][off:off + n])
                off += n
                f.write(f"{i:04d}.wav\t{v['voice']} -s {v['rate']} -p {v['pitch']}\t{t}\n")
        print(f"{a.out}: {a.n} clips")
    return 0


if __name__ == "__main__":
    sys.exit(main())
