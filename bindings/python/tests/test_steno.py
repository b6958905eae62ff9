"""The Python binding against the build's libsteno.so (STENO_LIBRARY) on the
bundled clip and model: files, samples with and without numpy, and errors.
Run from the source folder: python3 -m unittest discover -s bindings/python/tests"""
import array
import os
import tempfile
import unittest
import wave

import steno

MODEL = "models/steno-en-tiny-ctc.gguf"
CLIP = "models/hello.wav"
# What the bundled model hears in the bundled clip (README.md's quick start).
WORDS = "hello world this is speech recognition on your own computer"

try:
    import numpy
except ImportError:
    numpy = None


def clip_samples():
    """The clip's 16-bit samples as floats in [-1, 1] (it is 16 kHz mono)."""
    with wave.open(CLIP) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        frames = array.array("h", w.readframes(w.getnframes()))
    return [x / 32768.0 for x in frames]


class Transcribe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = steno.Model(MODEL)

    @classmethod
    def tearDownClass(cls):
        cls.model.close()

    def check(self, r, duration):
        self.assertEqual(r.text, WORDS)
        self.assertAlmostEqual(r.duration, duration, places=2)
        self.assertEqual(" ".join(s.text for s in r.segments), r.text)
        self.assertEqual([w.text for w in r.words], WORDS.split())
        self.assertGreaterEqual(len(r.tokens), len(r.words))
        for item in r.segments + r.words + r.tokens:
            self.assertTrue(0 <= item.start <= item.end <= r.duration + 0.1, item)
        self.assertEqual([w.start for w in r.words], sorted(w.start for w in r.words))

    def test_file(self):
        samples = len(clip_samples())
        r = self.model.transcribe(CLIP)
        self.check(r, samples / 16000)
        self.assertEqual(self.model.architecture, "parakeet")
        self.assertTrue(self.model.device)

    def test_list_and_buffer_without_numpy(self):
        x = clip_samples()
        self.check(self.model.transcribe(x), len(x) / 16000)
        self.check(self.model.transcribe(array.array("f", x)), len(x) / 16000)

    @unittest.skipIf(numpy is None, "numpy is not installed")
    def test_numpy(self):
        x = numpy.array(clip_samples(), dtype=numpy.float32)
        self.check(self.model.transcribe(x), len(x) / 16000)
        self.check(self.model.transcribe(x.astype(numpy.float64)), len(x) / 16000)  # converted
        with self.assertRaises(steno.Error):
            self.model.transcribe(x.reshape(2, -1))

    def test_bad_samples(self):
        with self.assertRaises(steno.Error) as e:
            self.model.transcribe([0.0, float("nan"), 0.0] * 8000)
        self.assertIn("not a finite", str(e.exception))
        self.assertEqual(e.exception.status, 1)

    def test_missing_file(self):
        with self.assertRaises(steno.Error) as e:
            self.model.transcribe("no/such/clip.wav")
        self.assertIn("no/such/clip.wav", str(e.exception))
        self.assertNotEqual(e.exception.status, 0)


class Errors(unittest.TestCase):
    def test_missing_model(self):
        with self.assertRaises(steno.Error) as e:
            steno.Model("no/such/model.gguf")
        self.assertIn("no/such/model.gguf", str(e.exception))
        self.assertEqual(e.exception.status, 2)

    def test_corrupt_model(self):
        with open(MODEL, "rb") as f:
            head = f.read(4096)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "cut.gguf")
            with open(path, "wb") as f:
                f.write(head)  # a GGUF header whose tensors are missing
            with self.assertRaises(steno.Error) as e:
                steno.Model(path)
            self.assertIn("cut.gguf", str(e.exception))
            self.assertEqual(e.exception.status, 3)

    def test_devices(self):
        with self.assertRaises(steno.Error) as e:
            steno.Model(MODEL, device="no device is called this")
        self.assertIn("no device is called this", str(e.exception))
        with self.assertRaises(steno.Error) as e:
            steno.Model(MODEL, device=1000)
        self.assertIn("device 1000", str(e.exception))
        with self.assertRaises(steno.Error):
            steno.Model(MODEL, threads=-1)

    def test_context_manager_frees(self):
        with steno.Model(MODEL, fast=steno.FAST_OFF, threads=1) as m:
            self.assertEqual(m.transcribe(CLIP).text, WORDS)
        self.assertIsNone(m._model)
        with self.assertRaises(steno.Error) as e:
            m.transcribe(CLIP)
        self.assertIn("closed", str(e.exception))
        m.close()  # twice: nothing

    def test_default_model_from_environment(self):
        old = os.environ.get("STENO_MODEL")
        os.environ["STENO_MODEL"] = MODEL
        try:
            with steno.Model() as m:
                self.assertEqual(m.path, MODEL)
        finally:
            if old is None:
                del os.environ["STENO_MODEL"]
            else:
                os.environ["STENO_MODEL"] = old


if __name__ == "__main__":
    unittest.main()
