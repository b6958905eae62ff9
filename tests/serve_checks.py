"""The checks the steno serve test scripts count: check() records a failure
with its message on stderr; finish() prints the script's verdict and exits."""
import sys

failed = 0


def check(ok, what):
    global failed
    if not ok:
        failed += 1
        print(f"FAIL: {what}", file=sys.stderr)


def finish(name):
    print(f"{name}: {'FAILED' if failed else 'passed'} ({failed} failures)")
    sys.exit(1 if failed else 0)
