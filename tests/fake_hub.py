#!/usr/bin/env python3
"""A fake Hugging Face hub on 127.0.0.1 for tests/cli_hub.sh (stdlib only).

It answers as huggingface.co does for LFS files: HEAD or GET
/{repo}/resolve/main/{file} gives a 302 to /cdn/{repo}/{file} (the real hub sends
a CDN address) with X-Repo-Commit, X-Linked-Etag (sha256) and X-Linked-Size; /cdn/...
serves the bytes with Range support;
an unknown repository or file gives 404 with X-Error-Code RepoNotFound or
EntryNotFound. Each file can misbehave on purpose (MODE):
  ok        as above
  drop      the first GET of the bytes stops halfway and the connection is closed
  stubborn  every GET of the bytes stops partway until /control/heal is requested
  corrupt   one byte of the bytes is flipped (the advertised sha256 is the true one)
  norange   drop, and Range is ignored: always 200 with the whole file
  git       a small file kept in git, not LFS: no redirect, the bytes come from the
            resolve URL itself, and the ETag is git's blob sha1
  size=TEXT X-Linked-Size says TEXT (a lie: huge, negative, garbage, or smaller than
            the bytes, which are served whole)
--rename OLD=NEW answers OLD's URLs with a relative 307 to NEW's, as the hub does for a
renamed repository. GET /control/commit moves main to a new commit.
Every request is logged as one JSON line: method, path, range.

usage: fake_hub.py --port-file F --log F [--timeout S] [--rename OLD=NEW]
                   REPO/FILE=PATH[:MODE]...
"""
import argparse
import hashlib
import http.server
import json
import os
import socket
import sys
import threading


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--rename", action="append", default=[])
    p.add_argument("files", nargs="+")
    return p.parse_args()


class Hub:
    def __init__(self, args):
        self.files = {}  # "org/name/file" -> (bytes, mode)
        for spec in args.files:
            name, _, path = spec.partition("=")
            path, _, mode = path.partition(":")
            data = open(path, "rb").read()
            self.files[name] = (data, mode or "ok")
        self.renames = dict(r.split("=", 1) for r in args.rename)
        self.commit = 0
        self.dropped = set()  # files whose one "drop" happened
        self.healed = False
        self.lock = threading.Lock()
        self.log = open(args.log, "a", buffering=1)

    def commit_hash(self):
        return hashlib.sha1(b"commit %d" % self.commit).hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub = None

    def log_message(self, fmt, *args):
        pass

    def record(self):
        entry = {"method": self.command, "path": self.path, "range": self.headers.get("Range")}
        with self.hub.lock:
            self.hub.log.write(json.dumps(entry) + "\n")

    def reply(self, status, headers=(), body=b""):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.record()
        hub = self.hub
        if self.path == "/control/heal":
            hub.healed = True
            return self.reply(200, body=b"healed\n")
        if self.path == "/control/commit":
            hub.commit += 1
            return self.reply(200, body=hub.commit_hash().encode())
        if self.path.startswith("/cdn/"):
            return self.blob(self.path[5:])
        parts = self.path.lstrip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            return self.reply(404, [("X-Error-Code", "RepoNotFound")])
        repo, rev, file = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
        if repo in hub.renames:
            new = "/%s/resolve/%s/%s" % (hub.renames[repo], rev, file)
            return self.reply(307, [("Location", new)])
        if not any(k.startswith(repo + "/") for k in hub.files):
            return self.reply(404, [("X-Error-Code", "RepoNotFound")])
        commit = [("X-Repo-Commit", hub.commit_hash())]
        if rev != "main":
            return self.reply(404, [("X-Error-Code", "RevisionNotFound")])
        if repo + "/" + file not in hub.files:
            return self.reply(404, [("X-Error-Code", "EntryNotFound")] + commit)
        data, mode = hub.files[repo + "/" + file]
        if mode == "git":
            git = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            return self.blob(repo + "/" + file, commit + [("ETag", '"%s"' % git)])
        sha = hashlib.sha256(data).hexdigest()
        host = "http://%s:%d" % self.server.server_address[:2]
        self.reply(302, commit + [
            ("X-Linked-Etag", '"%s"' % sha),
            ("X-Linked-Size", mode[5:] if mode.startswith("size=") else str(len(data))),
            ("ETag", 'W/"%s"' % hashlib.sha1(data).hexdigest()),
            ("Location", "%s/cdn/%s/%s" % (host, repo, file)),
        ])

    def blob(self, name, headers=()):
        if name not in self.hub.files:
            return self.reply(404)
        data, mode = self.hub.files[name]
        if mode == "corrupt":
            data = data[:100] + bytes([data[100] ^ 0xFF]) + data[101:]
        start, rng = 0, self.headers.get("Range")
        if rng and mode != "norange":
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                return self.reply(416, [("Content-Range", "bytes */%d" % len(data))])
        body = data[start:]
        self.send_response(206 if start else 200)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.end_headers()
        if self.command == "HEAD":
            return
        cut = None
        with self.hub.lock:
            if mode in ("drop", "norange") and name not in self.hub.dropped:
                self.hub.dropped.add(name)
                cut = len(body) // 2
            elif mode == "stubborn" and not self.hub.healed:
                cut = len(body) // 3
        if cut is None:
            self.wfile.write(body)
            return
        # Half a file, then a dead connection: what a dropped network looks like.
        self.wfile.write(body[:cut])
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client hanging up mid-answer is what some tests do on purpose.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def main():
    args = parse_args()
    Handler.hub = Hub(args)
    server = Server(("127.0.0.1", 0), Handler)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, args.port_file)
    # Never outlive the test: stop after --timeout seconds whatever happens.
    timer = threading.Timer(args.timeout, server.shutdown)
    timer.daemon = True
    timer.start()
    server.serve_forever()


if __name__ == "__main__":
    main()
