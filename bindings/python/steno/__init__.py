"""steno: speech to text on any GPU, from Python.

A thin binding (ctypes) over the C library libsteno.so: the model runs in the
library, on a Vulkan GPU or on the CPU through Mesa's lavapipe.

    import steno
    with steno.Model("parakeet.gguf") as model:
        result = model.transcribe("talk.wav")
        for s in result.segments:
            print(f"{s.start:7.2f} {s.end:7.2f} {s.text}")
"""
import array
import ctypes
import dataclasses
import os
from typing import List, Optional, Sequence, Union

from . import _native

__version__ = "0.1.0"
__all__ = ["Model", "Result", "Segment", "Word", "Token", "Error", "FAST_AUTO", "FAST_OFF",
           "FAST_ALL", "FAST_TIMED", "NO_PIPELINE_CACHE", "NO_PROBE_CACHE"]

# steno_model_params.fast and .no_cache (steno.h).
FAST_AUTO, FAST_OFF, FAST_ALL, FAST_TIMED = 0, 1, 2, 3
NO_PIPELINE_CACHE, NO_PROBE_CACHE = 1, 2

SAMPLE_RATE = 16000  # what transcribe() expects of samples given as numbers


class Error(Exception):
    """A failure in libsteno: str(e) is the library's message, e.status its
    STENO_ERR_* code (1 invalid, 2 I/O, 3 format, 4 unsupported, 5 memory,
    6 GPU, 7 aborted)."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


@dataclasses.dataclass(frozen=True)
class Segment:
    text: str
    start: float  # seconds from the start of the audio
    end: float


@dataclasses.dataclass(frozen=True)
class Word:
    text: str
    start: float
    end: float
    p: float  # the lowest confidence of its tokens


@dataclasses.dataclass(frozen=True)
class Token:
    id: int
    text: str
    start: float
    end: float
    p: float


@dataclasses.dataclass(frozen=True)
class Result:
    text: str
    segments: List[Segment]
    words: List[Word]
    tokens: List[Token]
    duration: float  # seconds of audio
    timings: dict    # features_ms, encoder_ms, decoder_ms


def _text(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b else ""


def _check(status: int) -> None:
    if status:
        raise Error(_text(_native.library().steno_last_error()), status)


def _bytes(s: Optional[Union[str, os.PathLike]]) -> Optional[bytes]:
    return None if s is None else os.fsencode(s)


def _samples(audio):
    """(ctypes float pointer, count, the object that owns the memory) for
    samples given as a numpy array, a buffer of float32, or numbers."""
    try:
        import numpy
    except ImportError:
        numpy = None
    if numpy is not None and isinstance(audio, numpy.ndarray):
        a = numpy.ascontiguousarray(audio, dtype=numpy.float32)
        if a.ndim != 1:
            raise Error(f"audio samples must be one channel (a 1-D array), not shape {a.shape}", 1)
        return a.ctypes.data_as(_native.c_float_p), a.size, a
    try:
        view = memoryview(audio)
    except TypeError:
        view = None
    if view is not None and view.format == "f" and view.ndim == 1 and view.contiguous:
        buf = (ctypes.c_float * len(view)).from_buffer_copy(view)
    else:
        values = array.array("f", audio)  # a list, tuple, or anything of numbers
        buf = (ctypes.c_float * len(values)).from_buffer(values)
    return ctypes.cast(buf, _native.c_float_p), len(buf), buf


def _result(lib, r) -> Result:
    """Copies a steno_result into Python objects (the caller frees it)."""
    ms = 1e-3
    segments = [lib.steno_result_segment(r, i) for i in range(lib.steno_result_segment_count(r))]
    words = [lib.steno_result_word(r, i) for i in range(lib.steno_result_word_count(r))]
    tokens = [lib.steno_result_token(r, i) for i in range(lib.steno_result_token_count(r))]
    t = lib.steno_result_timings(r)
    return Result(
        text=_text(lib.steno_result_text(r)),
        segments=[Segment(_text(s.text), s.start_ms * ms, s.end_ms * ms) for s in segments],
        words=[Word(_text(w.text), w.start_ms * ms, w.end_ms * ms, w.p) for w in words],
        tokens=[Token(k.id, _text(k.text), k.start_ms * ms, k.end_ms * ms, k.p) for k in tokens],
        duration=lib.steno_result_duration(r),
        timings={"features_ms": t.features_ms, "encoder_ms": t.encoder_ms, "decoder_ms": t.decoder_ms})


def default_model_path() -> str:
    """$STENO_MODEL, else the bundled model that `cmake --install` puts beside
    the library (PREFIX/share/steno/models/steno-en-tiny-ctc.gguf)."""
    env = os.environ.get("STENO_MODEL")
    if env:
        return env
    lib = _native.library()._name
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(lib))) if os.sep in lib else "?"
    path = os.path.join(prefix, "share", "steno", "models", "steno-en-tiny-ctc.gguf")
    if not os.path.isfile(path):
        raise Error(f"no model named, no $STENO_MODEL, and no bundled model at {path}", 2)
    return path


class Model:
    """A model loaded onto a device; free it with close(), a with block, or
    by dropping it.

    path: a .gguf (or whisper.cpp .bin) file; None: default_model_path().
    device: an index (as `steno devices` lists them), part of a device's
      name, or None (a discrete GPU first, else the CPU).
    fast: FAST_AUTO, FAST_OFF, FAST_ALL or FAST_TIMED.
    cache_dir: the folder for compiled kernels and probe results (None: the
      default); no_cache: NO_PIPELINE_CACHE | NO_PROBE_CACHE to leave them off.
    threads: CPU threads (0: one per CPU)."""

    def __init__(self, path=None, device: Union[int, str, None] = None, fast: int = FAST_AUTO,
                 cache_dir=None, no_cache: int = 0, threads: int = 0):
        self._model = None
        lib = _native.library()
        path = default_model_path() if path is None else path
        params = lib.steno_model_default_params()
        self._keep = [_bytes(path), _bytes(cache_dir)]  # alive while the library reads them
        if isinstance(device, str):
            self._keep.append(device.encode())
            params.device_name = self._keep[-1]
        elif device is not None:
            params.device = int(device)
        params.fast, params.cache_dir = fast, self._keep[1]
        params.no_cache, params.threads = no_cache, threads
        model = _native.P()
        _check(lib.steno_model_load(self._keep[0], ctypes.byref(params), ctypes.byref(model)))
        self._model = model
        self.path = os.fspath(path)

    def _handle(self):
        if not self._model:
            raise Error("the model is closed", 1)
        return self._model

    @property
    def architecture(self) -> str:
        """"parakeet", "whisper", ..."""
        return _text(_native.library().steno_model_architecture(self._handle()))

    @property
    def device(self) -> str:
        """The name of the device the model runs on."""
        return _text(_native.library().steno_model_device(self._handle(), None))

    def transcribe(self, audio, language: Optional[str] = None, translate: bool = False,
                   prompt: Optional[str] = None) -> Result:
        """Transcribes a file (a str or path-like: any format FFmpeg reads,
        decoded as it is read) or samples (16 kHz mono in [-1, 1]: a numpy
        array, a float32 buffer such as array.array('f') or raw float32
        bytes, or a list of numbers).
        language, translate and prompt are for Whisper models."""
        lib = _native.library()
        handle = self._handle()
        tp = lib.steno_transcribe_default_params()
        keep = [_bytes(language), None if prompt is None else prompt.encode()]
        tp.language, tp.translate, tp.prompt = keep[0], int(bool(translate)), keep[1]
        r = _native.P()
        if isinstance(audio, (str, os.PathLike)):
            stream = _native.P()
            _check(lib.steno_audio_open(_bytes(audio), ctypes.byref(stream)))
            try:
                _check(lib.steno_transcribe_audio(handle, stream, ctypes.byref(tp), ctypes.byref(r)))
            finally:
                lib.steno_audio_close(stream)
        else:
            pcm, n, owner = _samples(audio)
            _check(lib.steno_transcribe(handle, pcm, n, ctypes.byref(tp), ctypes.byref(r)))
            del owner
        try:
            return _result(lib, r)
        finally:
            lib.steno_result_free(r)

    def close(self) -> None:
        """Frees the model and its device memory (again: nothing)."""
        if self._model:
            _native.library().steno_model_free(self._model)
            self._model = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # at interpreter exit the module may be half gone
            pass
