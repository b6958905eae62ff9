#!/usr/bin/env python3
"""transformers' padded batch on the tiny TDT fixture model, for tests/test_batch.c.

    python scripts/dump_parakeet_batch.py     # writes tests/fixtures/parakeet_tdt_tiny.batch.ref.gguf

Rebuilds the tiny TDT model exactly as scripts/dump_parakeet.py does (same seed,
same tuning; its F32 conversion is asserted to hold the committed
tests/fixtures/parakeet_tdt_tiny.gguf's tensors bit for bit), then runs three clips of different
lengths as ONE padded batch through ParakeetFeatureExtractor (attention_mask)
and ParakeetEncoder, and each clip alone (with its mask) for comparison:

  speech  the fixture's speech clip (floor(n/160) = 289, odd)
  synth   the fixture's synthetic clip (112, a multiple of 8: one encoder frame masked)
  part    speech samples 8000 .. 33000 (156 frames, even)

Written per clip C (in batch order): `C.mel` [n_mels, n_frames_valid] (the
batch's features of the clip, its valid frames), `C.encoder_out` [d, t_enc_valid]
(the batch's last hidden state, the clip's valid rows), keys ref.C.n_frames_valid,
ref.C.t_enc_valid, ref.C.pcm_from / pcm_clip (which fixture clip and sample range
the pcm is: the pcm itself is read from parakeet_tdt_tiny.ref.gguf) and
ref.C.batch_vs_alone (largest |batched − alone| of the valid encoder rows).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import convert_parakeet as conv  # noqa: E402
import dump_parakeet as dp  # noqa: E402

import gguf  # noqa: E402
from gguf import GGUFValueType as VT  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"


def same_tensors(a: Path, b: Path) -> bool:
    """Whether two GGUF files hold the same tensors, bit for bit (their keys
    may differ: the converter's version strings)."""
    ta = {t.name: t for t in gguf.GGUFReader(str(a)).tensors}
    tb = {t.name: t for t in gguf.GGUFReader(str(b)).tensors}
    return ta.keys() == tb.keys() and all(
        ta[k].tensor_type == tb[k].tensor_type and np.array_equal(ta[k].data, tb[k].data) for k in ta)


@torch.no_grad()
def main() -> int:
    with tempfile.TemporaryDirectory() as td:
        speech, _ = dp.speech_clip(Path(td))
    synth, _ = dp.synth_clip()
    spec = dp.TINY["tdt"]
    n_mels = spec["encoder"]["num_mel_bins"]
    model = dp.build_model("tdt", spec, len(dp.TINY_PIECES), [speech, synth])
    meta = dict(variant="tdt-tiny-random", name="Parakeet TDT tiny, random weights (steno fixture)",
                version="fixture")
    with tempfile.TemporaryDirectory() as td:
        ckpt, out = Path(td) / "hf", Path(td) / "m.gguf"
        dp.save_checkpoint(model, n_mels, dp.TINY_PIECES, ckpt)
        conv.convert(ckpt, out, "f32", meta)
        assert same_tensors(out, FIX / "parakeet_tdt_tiny.gguf"), "not the committed TDT fixture model"

    clips = [("speech", "speech", 0, len(speech)), ("synth", "synth", 0, len(synth)),
             ("part", "speech", 8000, 33000)]
    pcms = [{"speech": speech, "synth": synth}[src][a:b] for _, src, a, b in clips]
    from transformers import ParakeetFeatureExtractor
    fe = ParakeetFeatureExtractor(feature_size=n_mels)
    batch = fe(pcms, sampling_rate=dp.SR, return_tensors="pt")
    enc = model.encoder(input_features=batch["input_features"], attention_mask=batch["attention_mask"])
    valid = batch["attention_mask"].sum(-1).tolist()
    t_valid = enc.attention_mask.sum(-1).tolist()

    w = gguf.GGUFWriter(str(FIX / "parakeet_tdt_tiny.batch.ref.gguf"), "steno-ref")
    w.add_key_value("ref.model", "parakeet_tdt_tiny.gguf", VT.STRING)
    w.add_key_value("ref.source", f"transformers {__import__('transformers').__version__}, torch "
                    f"{torch.__version__}: one padded batch", VT.STRING)
    w.add_key_value("ref.clips", [c[0] for c in clips], VT.ARRAY, sub_type=VT.STRING)
    for i, (name, src, a, b) in enumerate(clips):
        alone_in = fe(pcms[i], sampling_rate=dp.SR, return_tensors="pt")
        alone = model.encoder(input_features=alone_in["input_features"],
                              attention_mask=alone_in["attention_mask"]).last_hidden_state[0]
        tv, fv = int(t_valid[i]), int(valid[i])
        got = enc.last_hidden_state[i, :tv]
        diff = float((got - alone[:tv]).abs().max())
        mel_diff = float((batch["input_features"][i, :fv] - alone_in["input_features"][0, :fv]).abs().max())
        print(f"{name}: {len(pcms[i])} samples, {fv} mel frames, {tv} encoder frames of "
              f"{enc.last_hidden_state.shape[1]}; batched vs alone: mel {mel_diff:.2e}, encoder {diff:.2e}")
        w.add_key_value(f"ref.{name}.pcm_from", src, VT.STRING)
        w.add_key_value(f"ref.{name}.pcm_clip", [a, b], VT.ARRAY, sub_type=VT.INT32)
        w.add_key_value(f"ref.{name}.n_frames_valid", fv, VT.UINT32)
        w.add_key_value(f"ref.{name}.t_enc_valid", tv, VT.UINT32)
        w.add_key_value(f"ref.{name}.batch_vs_alone", diff, VT.FLOAT32)
        w.add_tensor(f"{name}.mel", batch["input_features"][i, :fv].numpy().astype(np.float32))
        w.add_tensor(f"{name}.encoder_out", got.numpy().astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
