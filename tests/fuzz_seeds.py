#!/usr/bin/env python3
"""Seed corpora for the fuzz targets (tests/fuzz.sh), written at test time so that no
binary is committed: OUT/<target>/ gets a few small valid inputs for each target.

usage: fuzz_seeds.py OUT [FIXTURES]   (FIXTURES: tests/fixtures)
"""
import math
import os
import shutil
import struct
import subprocess
import sys
import wave

out = sys.argv[1]
fixtures = sys.argv[2] if len(sys.argv) > 2 else "tests/fixtures"


def put(target, name, data):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    with open(os.path.join(out, target, name), "wb") as f:
        f.write(data)


def whisper_bin():
    """A whisper.cpp .bin of a 1-layer, width-4 English model: hparams, an 80-mel
    filterbank, a byte vocabulary, and the encoder's tensors (F32 and F16)."""
    d, ctx = 4, 4
    b = struct.pack("<I", 0x67676D6C)
    b += struct.pack("<11i", 51864, ctx, d, 1, 1, ctx, d, 1, 1, 80, 1)
    b += struct.pack("<ii", 80, 201) + struct.pack("<%df" % (80 * 201), *[0.01] * (80 * 201))
    vocab = [bytes([i]) for i in range(256)] + [b" the", b"ing"]
    b += struct.pack("<i", len(vocab)) + b"".join(struct.pack("<I", len(t)) + t for t in vocab)
    tensors = [("encoder.positional_embedding", 0, [d, ctx]), ("encoder.conv1.weight", 1, [3, 80, d]),
               ("encoder.conv1.bias", 0, [1, d]), ("encoder.conv2.weight", 1, [3, d, d]),
               ("encoder.conv2.bias", 0, [1, d]), ("encoder.blocks.0.attn_ln.weight", 0, [d]),
               ("encoder.blocks.0.attn.query.weight", 1, [d, d]), ("encoder.blocks.0.attn.query.bias", 0, [d]),
               ("encoder.blocks.0.mlp.0.weight", 1, [d, 4 * d]), ("encoder.ln_post.bias", 0, [d]),
               ("decoder.blocks.0.cross_attn.key.weight", 1, [d, d])]
    for name, kind, ne in tensors:
        n = math.prod(ne)
        data = struct.pack("<%df" % n, *[0.5] * n) if kind == 0 else struct.pack("<%de" % n, *[0.5] * n)
        b += struct.pack("<iii", len(ne), len(name), kind) + struct.pack("<%di" % len(ne), *ne)
        b += name.encode() + data
    return b


def wav(rate, channels, width, seconds):
    path = os.path.join(out, "tmp.wav")
    w = wave.open(path, "wb")
    w.setnchannels(channels), w.setsampwidth(width), w.setframerate(rate)
    n = int(rate * seconds)
    if width == 2:
        frames = b"".join(struct.pack("<h", int(9000 * math.sin(i * 0.07))) * channels for i in range(n))
    else:
        frames = bytes(128 + int(100 * math.sin(i * 0.07)) for i in range(n * channels))
    w.writeframes(frames)
    w.close()
    return path


def audio():
    put("fuzz_audio", "mono16k.wav", open(wav(16000, 1, 2, 0.05), "rb").read())
    put("fuzz_audio", "stereo8k.wav", open(wav(8000, 2, 2, 0.05), "rb").read())
    put("fuzz_audio", "u8.wav", open(wav(22050, 1, 1, 0.05), "rb").read())
    src = wav(16000, 1, 2, 0.2)
    if shutil.which("ffmpeg"):  # a few compressed formats, as small as they come
        for ext, args in [("flac", []), ("mp3", ["-b:a", "32k"]), ("ogg", ["-c:a", "libvorbis"]),
                          ("m4a", ["-c:a", "aac", "-b:a", "24k"])]:
            dst = os.path.join(out, "tmp." + ext)
            if subprocess.run(["ffmpeg", "-v", "quiet", "-y", "-i", src] + args + [dst]).returncode == 0:
                put("fuzz_audio", "clip." + ext, open(dst, "rb").read())
                os.remove(dst)
    os.remove(src)


def main():
    texts = [b"\0hello world, the thing is ringing", b"\1it's 123 \xc3\xa9t\xc3\xa9  the\n\t x",
             b"\0  \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x8e\xb5 I'll've 2024!", b"\1"]
    for i, t in enumerate(texts):
        put("fuzz_bpe", "text%d" % i, t)
    bin_seed = whisper_bin()
    put("fuzz_whisper_bin", "tiny.bin", bin_seed)
    put("fuzz_load", "tiny.bin", bin_seed)
    for name in sorted(os.listdir(fixtures)):
        if name.endswith(".gguf") and not name.endswith(".ref.gguf"):
            data = open(os.path.join(fixtures, name), "rb").read()
            put("fuzz_load", name, data)
            put("fuzz_gguf", name, data[:65536])  # the header, keys and tensor table
    audio()


main()
