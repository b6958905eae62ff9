"""Tensor encoding shared by the converters: f32 arrays into the GGUF types the
published files use, bit-exact with ggml's reference code."""
from __future__ import annotations

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT


def encode(arr: np.ndarray, qtype: QT) -> np.ndarray:
    """arr as qtype's stored bytes (F32 and F16 as numpy arrays)."""
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if qtype == QT.F32:
        return arr
    if qtype == QT.F16:
        return arr.astype(np.float16)  # round to nearest even, as ggml
    return gguf.quants.quantize(arr, qtype)  # BF16 (RNE, quiet NaN) and Q8_0: bit-exact with ggml
