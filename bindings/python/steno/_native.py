"""libsteno.so through ctypes: finding it, and the C API's types and prototypes
(include/steno.h). Nothing of the engine is copied here."""
import ctypes
import ctypes.util
import glob
import os
import threading

c_float_p = ctypes.POINTER(ctypes.c_float)


class Token(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("text", ctypes.c_char_p), ("start_ms", ctypes.c_int64),
                ("end_ms", ctypes.c_int64), ("p", ctypes.c_float)]


class Word(ctypes.Structure):
    _fields_ = [("text", ctypes.c_char_p), ("start_ms", ctypes.c_int64), ("end_ms", ctypes.c_int64),
                ("p", ctypes.c_float), ("speaker", ctypes.c_int)]


class Segment(ctypes.Structure):
    _fields_ = [("text", ctypes.c_char_p), ("start_ms", ctypes.c_int64), ("end_ms", ctypes.c_int64),
                ("speaker", ctypes.c_int)]


class Turn(ctypes.Structure):
    _fields_ = [("speaker", ctypes.c_int), ("start_ms", ctypes.c_int64), ("end_ms", ctypes.c_int64)]


class Timings(ctypes.Structure):
    _fields_ = [("features_ms", ctypes.c_double), ("encoder_ms", ctypes.c_double),
                ("decoder_ms", ctypes.c_double)]


class ModelParams(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int), ("device_name", ctypes.c_char_p), ("fast", ctypes.c_int),
                ("cache_dir", ctypes.c_char_p), ("no_cache", ctypes.c_int), ("threads", ctypes.c_int),
                ("reserved", ctypes.c_ssize_t * 8)]


PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_float, ctypes.c_void_p)
ABORT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class TranscribeParams(ctypes.Structure):
    _fields_ = [("language", ctypes.c_char_p), ("translate", ctypes.c_int), ("prompt", ctypes.c_char_p),
                ("progress", PROGRESS), ("progress_user", ctypes.c_void_p), ("abort", ABORT),
                ("abort_user", ctypes.c_void_p), ("piece_seconds", ctypes.c_double),
                ("segment", ctypes.c_void_p), ("segment_user", ctypes.c_void_p),  # unused: NULL
                ("diarizer", ctypes.c_void_p)]  # unused: NULL


P = ctypes.c_void_p  # the opaque steno_model *, steno_result *, steno_audio *
_PROTOTYPES = {
    "steno_last_error": (ctypes.c_char_p, []),
    "steno_model_default_params": (ModelParams, []),
    "steno_model_load": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ModelParams), ctypes.POINTER(P)]),
    "steno_model_free": (None, [P]),
    "steno_model_architecture": (ctypes.c_char_p, [P]),
    "steno_model_device": (ctypes.c_char_p, [P, ctypes.POINTER(ctypes.c_int)]),
    "steno_transcribe_default_params": (TranscribeParams, []),
    "steno_transcribe": (ctypes.c_int, [P, c_float_p, ctypes.c_size_t, ctypes.POINTER(TranscribeParams),
                                        ctypes.POINTER(P)]),
    "steno_transcribe_audio": (ctypes.c_int, [P, P, ctypes.POINTER(TranscribeParams), ctypes.POINTER(P)]),
    "steno_audio_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(P)]),
    "steno_audio_close": (None, [P]),
    "steno_result_text": (ctypes.c_char_p, [P]),
    "steno_result_token_count": (ctypes.c_size_t, [P]),
    "steno_result_token": (Token, [P, ctypes.c_size_t]),
    "steno_result_word_count": (ctypes.c_size_t, [P]),
    "steno_result_word": (Word, [P, ctypes.c_size_t]),
    "steno_result_segment_count": (ctypes.c_size_t, [P]),
    "steno_result_segment": (Segment, [P, ctypes.c_size_t]),
    "steno_result_turn_count": (ctypes.c_size_t, [P]),
    "steno_result_turn": (Turn, [P, ctypes.c_size_t]),
    "steno_result_duration": (ctypes.c_double, [P]),
    "steno_result_timings": (Timings, [P]),
    "steno_result_free": (None, [P]),
}


def _candidates():
    """Where libsteno.so may be, in order: $STENO_LIBRARY, beside this
    package (a wheel that bundles it), then the system's search path."""
    env = os.environ.get("STENO_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "libsteno.so*")))
    name = ctypes.util.find_library("steno")
    return found + ([name] if name else [])


_lib = None
_lock = threading.Lock()


def library():
    """The loaded libsteno, its prototypes set (loaded at the first call).
    Raises OSError saying where it looked when there is none."""
    global _lib
    with _lock:
        if _lib is None:
            tried = _candidates()
            if not tried:
                raise OSError("libsteno.so not found: set STENO_LIBRARY to its path, install steno "
                              "(cmake --install), or use a wheel that bundles it")
            lib = ctypes.CDLL(tried[0])
            for name, (restype, argtypes) in _PROTOTYPES.items():
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = restype, argtypes
            _lib = lib
        return _lib
