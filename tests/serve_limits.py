#!/usr/bin/env python3
"""steno serve's limits, on a server started with --queue 0 --timeout 2: a long
recording (AUDIO repeated to 20 minutes) runs past the time limit (504); a
request sent while it runs finds no room in the queue (503); SIGTERM while
another long one runs answers it with 503 and the server then exits (the
caller checks its exit status).

Usage: serve_limits.py URL PID AUDIO TMPDIR"""
import http.client
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
import wave

url, pid, audio, tmp = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
host, port = urllib.parse.urlsplit(url).hostname, urllib.parse.urlsplit(url).port
BOUNDARY = "steno-limits-boundary"
from serve_checks import check, finish  # noqa: E402


def form(data):
    return (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'.encode()
            + data + f"\r\n--{BOUNDARY}--\r\n".encode())


def post(body, sent=None):
    """(status, error code) of a transcription request; sets `sent` once the body is out."""
    c = http.client.HTTPConnection(host, port, timeout=600)
    try:
        c.putrequest("POST", "/v1/audio/transcriptions")
        c.putheader("Content-Type", f"multipart/form-data; boundary={BOUNDARY}")
        c.putheader("Content-Length", str(len(body)))
        c.endheaders()
        c.send(body)
        if sent:
            sent.set()
        r = c.getresponse()
        answer = json.loads(r.read())
        return r.status, answer.get("error", {}).get("code")
    finally:
        c.close()


def in_background(body):
    """Starts post(body) on a thread; returns (thread, result list, the event set once it is sent)."""
    sent, result = threading.Event(), []
    t = threading.Thread(target=lambda: result.append(post(body, sent)))
    t.start()
    sent.wait(60)
    time.sleep(0.5)  # the server has it, and its worker is on it
    return t, result


with open(audio, "rb") as f:
    small = f.read()
with wave.open(audio) as w:
    params, frames = w.getparams(), w.readframes(w.getnframes())
long_path = os.path.join(tmp, "long.wav")
with wave.open(long_path, "wb") as w:
    w.setparams(params)
    w.writeframes(frames * (10 * 60 * params.framerate // params.nframes))
with open(long_path, "rb") as f:
    long = form(f.read())

# Past the time limit: 504, while another request finds the queue full: 503.
t, result = in_background(long)
check(post(form(small)) == (503, "overloaded"), "a request while the worker is busy and the queue full: 503")
t.join()
check(result == [(504, "timeout")], f"a long recording past --timeout: {result}")

# SIGTERM while one runs: it is answered 503, and the server stops.
t, result = in_background(long)
os.kill(pid, signal.SIGTERM)
t.join()
check(result == [(503, "shutting_down")], f"the request running at SIGTERM: {result}")

finish("serve_limits")
