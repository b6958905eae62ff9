#!/usr/bin/env python3
"""steno serve under load: REQUESTS requests from CONCURRENCY threads (plain
http.client, no other packages), good uploads mixed with bad ones — random
bytes, a WAV cut inside its header, an empty file, no file field, two file
fields, a field over 64 KiB, a huge Content-Length, a wrong route or method, a wrong key, a body dropped halfway,
a slow client. Every good request must come back with the text `steno run`
gives, every bad one with a 4xx JSON error in OpenAI's shape, and the server
must stay up with its resident memory (VmRSS) after the run within 10 % of
what it was after a warm-up of 100 requests.

Usage: serve_load.py URL KEY PID AUDIO TEXT [--requests N] [--concurrency C] [--no-rss]"""
import argparse
import concurrent.futures
import http.client
import json
import random
import socket
import sys
import time
import urllib.parse

p = argparse.ArgumentParser()
p.add_argument("url")
p.add_argument("key")
p.add_argument("pid", type=int)
p.add_argument("audio")
p.add_argument("text")
p.add_argument("--requests", type=int, default=1000)
p.add_argument("--concurrency", type=int, default=32)
p.add_argument("--warmup", type=int, default=100)
p.add_argument("--no-rss", action="store_true", help="skip the memory check (sanitizer builds)")
args = p.parse_args()

host = urllib.parse.urlsplit(args.url).hostname
port = urllib.parse.urlsplit(args.url).port
with open(args.audio, "rb") as f:
    wav = f.read()
AUTH = {"Authorization": f"Bearer {args.key}"}
BOUNDARY = "steno-load-boundary-7d3a"


def form(fields, file=None):
    out = b""
    for k, v in fields:
        out += f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
    if file is not None:
        out += (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n").encode() + file + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


def request(method, path, body=b"", headers=None, slow=False):
    """(status, body) of one request on a fresh connection."""
    c = http.client.HTTPConnection(host, port, timeout=600)
    try:
        h = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}", **AUTH, **(headers or {})}
        if not slow:
            c.request(method, path, body, h)
        else:  # a slow client: the body in pieces with pauses
            c.putrequest(method, path)
            for k, v in {**h, "Content-Length": str(len(body))}.items():
                c.putheader(k, v)
            c.endheaders()
            step = len(body) // 4 + 1
            for i in range(0, len(body), step):
                c.send(body[i:i + step])
                time.sleep(0.05)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def raw(data, read=True):
    """Bytes sent on a socket as they are; the status of the answer, if any."""
    s = socket.create_connection((host, port), timeout=600)
    try:
        s.sendall(data)
        if not read:
            return None, b""
        out = b""
        while b"\r\n\r\n" not in out:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        head, _, body = out.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
        return int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else None, body
    finally:
        s.close()


ROUTE = "/v1/audio/transcriptions"


def good(rng):
    fmt = rng.choice(["json", "text", "verbose_json"])
    return request("POST", ROUTE, form([("model", "whisper-1"), ("response_format", fmt)], wav)), fmt


def huge_length(rng):
    head = (f"POST {ROUTE} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {args.key}\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: 1000000000000\r\n\r\n")
    return raw(head.encode() + b"x" * 100)


def dropped(rng):
    body = form([], wav)
    head = (f"POST {ROUTE} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {args.key}\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {len(body)}\r\n\r\n")
    return raw(head.encode() + body[:len(body) // 2], read=False)


# kind: (weight, function(rng) -> (status, body) or ((status, body), format)).
KINDS = {
    "good": (12, good),
    "slow": (1, lambda rng: (request("POST", ROUTE, form([], wav), slow=True), "json")),
    "random bytes": (2, lambda rng: request("POST", ROUTE, form([], rng.randbytes(rng.randint(1, 65536))))),
    "header cut": (2, lambda rng: request("POST", ROUTE, form([], wav[:rng.randint(1, 43)]))),
    "empty file": (1, lambda rng: request("POST", ROUTE, form([], b""))),
    "no file": (1, lambda rng: request("POST", ROUTE, form([("model", "whisper-1")]))),
    "two files": (1, lambda rng: request("POST", ROUTE, form([], wav)[:-len(BOUNDARY) - 6] + form([], wav))),
    "long field": (1, lambda rng: request("POST", ROUTE, form([("prompt", "x" * 70000)], wav))),
    "not multipart": (1, lambda rng: request("POST", ROUTE, wav, {"Content-Type": "audio/wav"})),
    "huge length": (1, huge_length),
    "wrong route": (1, lambda rng: request("GET", "/v1/nothing/here")),
    "wrong method": (1, lambda rng: request("DELETE", ROUTE)),
    "wrong key": (1, lambda rng: request("POST", ROUTE, form([], wav), {"Authorization": "Bearer nope"})),
    "dropped": (1, dropped),
}


# The field each bad request's error names (OpenAI's `param`; None: null).
PARAM = {"random bytes": "file", "header cut": "file", "empty file": "file", "no file": "file", "two files": "file",
         "long field": "prompt", "huge length": "file"}


def text_of(fmt, body):
    return body.decode().rstrip("\n") if fmt == "text" else json.loads(body)["text"]


def one(i):
    """Runs request i; returns None when it went as it should, else why not."""
    rng = random.Random(i)
    kind = rng.choices(list(KINDS), [w for w, _ in KINDS.values()])[0]
    try:
        out = KINDS[kind][1](rng)
        if kind in ("good", "slow"):
            (status, body), fmt = out
            if status != 200 or text_of(fmt, body) != args.text:
                return f"{kind} #{i}: {status} {body[:200]!r}"
            return None
        status, body = out
        if kind == "dropped":
            return None
        err = json.loads(body)["error"]
        if not (400 <= status < 500 and isinstance(err["message"], str) and err["type"] == "invalid_request_error"
                and err["param"] == PARAM.get(kind)):
            return f"{kind} #{i}: {status} {body[:200]!r}"
        return None
    except Exception as e:  # a dropped connection, a non-JSON answer, ...
        return f"{kind} #{i}: {type(e).__name__}: {e}"


def rss_kb():
    with open(f"/proc/{args.pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def run(first, count):
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        return [e for e in pool.map(one, range(first, first + count)) if e]


t0 = time.time()
errors = run(0, args.warmup)
warm = rss_kb()
t1 = time.time()
errors += run(args.warmup, args.requests)
t2 = time.time()
after = rss_kb()
status, body = request("GET", "/health")
if status != 200:
    errors.append(f"health after the run: {status}")
for e in errors[:20]:
    print("FAIL:", e, file=sys.stderr)
print(f"serve_load: {args.requests} requests at {args.concurrency} concurrent in {t2 - t1:.1f} s "
      f"({args.requests / (t2 - t1):.1f}/s; warm-up {args.warmup} in {t1 - t0:.1f} s); "
      f"{len(errors)} went wrong; VmRSS {warm} kB after the warm-up, {after} kB after the run")
if not args.no_rss and after > warm * 1.10:
    print(f"FAIL: VmRSS grew by {100 * (after - warm) / warm:.1f} % (more than 10 %)", file=sys.stderr)
    errors.append("rss")
sys.exit(1 if errors else 0)
