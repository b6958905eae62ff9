#!/usr/bin/env python3
"""steno serve through OpenAI's own Python client (PyPI `openai`): every
response_format, timestamp granularities, the translations route, the model
list and a wrong API key, each checked against what `steno run` writes for the
same file (REF holds its text, --srt, --vtt and --json outputs).

Usage: serve_client.py URL KEY MODEL_NAME AUDIO REF_DIR
Without the client installed it says so and passes, unless CI is set (CI
installs it in build-venv: see .ci/run)."""
import json
import os
import sys
import warnings

warnings.simplefilter("ignore", DeprecationWarning)  # the client's notes on its own API

url, key, model_name, audio, ref = sys.argv[1:6]

try:
    import openai
except ImportError:
    if os.environ.get("CI"):
        sys.exit("serve_client: the openai package is missing, and CI must run this test "
                 "(.ci/run installs it in build-venv)")
    print("serve_client: SKIPPED: the openai package is not installed "
          "(python3 -m venv build-venv && build-venv/bin/pip install openai)")
    sys.exit(0)

from serve_checks import check, finish  # noqa: E402


def read(name):
    with open(os.path.join(ref, name), encoding="utf-8") as f:
        return f.read()


want = json.loads(read("run.json"))
text = want["text"]
client = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=300)


def transcribe(route="transcriptions", **kw):
    with open(audio, "rb") as f:
        api = client.audio.transcriptions if route == "transcriptions" else client.audio.translations
        return api.create(file=f, **{"model": "whisper-1", **kw})


# json (the default), text, srt, vtt: the same as steno run writes.
check(transcribe().text == text, "json: text")
check(transcribe(model=model_name, response_format="json").text == text, "json, the model by name")
check(transcribe(response_format="text") == read("run.txt"), "text: as steno run")
check(transcribe(response_format="srt") == read("run.srt"), "srt: as steno run --srt")
check(transcribe(response_format="vtt") == read("run.vtt"), "vtt: as steno run --vtt")

# verbose_json: words only when asked; segments by default.
v = transcribe(response_format="verbose_json", timestamp_granularities=["word", "segment"], language="en")
check(v.text == text and v.task == "transcribe" and v.language == "en", f"verbose_json: {v.text!r} {v.task} {v.language}")
check(abs(v.duration - want["duration"]) < 1e-3, f"verbose_json duration {v.duration}")
words = [(w.word, round(w.start * 1000), round(w.end * 1000)) for w in v.words or []]
check(words == [(w["text"], w["start_ms"], w["end_ms"]) for w in want["words"]], f"verbose_json words {words}")
segments = [(s.text, round(s.start * 1000), round(s.end * 1000)) for s in v.segments or []]
check(segments == [(s["text"], s["start_ms"], s["end_ms"]) for s in want["segments"]], f"segments {segments}")
check(v.segments and v.segments[0].tokens == [t["id"] for t in want["tokens"]], "verbose_json segment tokens")
check(v.segments and v.segments[0].id == 0 and v.segments[0].avg_logprob < 0 and v.segments[0].compression_ratio > 0,
      "verbose_json segment fields")
v = transcribe(response_format="verbose_json")
check(v.words is None and len(v.segments or []) == len(want["segments"]), "verbose_json: no words unless asked")
v = transcribe(response_format="verbose_json", timestamp_granularities=["word"])
check(v.segments is None and len(v.words or []) == len(want["words"]), "verbose_json: words only")

# The translations route (a model that cannot translate transcribes).
t = transcribe("translations", response_format="verbose_json")
check(t.text == text and t.task == "translate", f"translations: {t.text!r} {t.task}")

models = client.models.list()
check([m.id for m in models.data] == [model_name], f"models: {[m.id for m in models.data]}")

# Errors come back as OpenAI's errors.
try:
    transcribe(response_format="xml")
    check(False, "response_format xml accepted")
except openai.BadRequestError as e:
    check(e.status_code == 400 and e.body.get("param") == "response_format", f"bad format: {e.body}")
wrong = openai.OpenAI(base_url=url + "/v1", api_key=key + "-wrong", max_retries=0)
try:
    wrong.models.list()
    check(False, "a wrong API key was accepted")
except openai.AuthenticationError as e:
    check(e.status_code == 401 and e.body.get("code") == "invalid_api_key", f"wrong key: {e.body}")

finish("serve_client")
