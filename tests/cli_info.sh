#!/usr/bin/env bash
# `steno info` end to end: a small valid GGUF (written here with python3's
# struct module) lists its keys and tensors; truncated and corrupted copies
# exit 1 with a message on stderr, never by a signal.
# Usage: tests/cli_info.sh path/to/steno
set -u
steno=${1:?usage: cli_info.sh path/to/steno}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

python3 - "$tmp/toy.gguf" <<'EOF'
import struct, sys

def s(x):
    b = x.encode()
    return struct.pack('<Q', len(b)) + b

kv = [
    s('general.architecture') + struct.pack('<I', 8) + s('toy'),
    s('toy.width') + struct.pack('<II', 4, 8),
    s('toy.scale') + struct.pack('<If', 6, 0.5),
    s('tokenizer.ggml.tokens') + struct.pack('<IIQ', 9, 8, 10) + b''.join(s('t%d' % i) for i in range(10)),
]
ne = (8, 2)
info = s('enc.weight') + struct.pack('<I', len(ne)) + struct.pack('<%dQ' % len(ne), *ne) + struct.pack('<IQ', 0, 0)
head = b'GGUF' + struct.pack('<IQQ', 3, 1, len(kv)) + b''.join(kv) + info
head += b'\0' * (-len(head) % 32)
data = struct.pack('<16f', *[i * 0.25 for i in range(16)])
open(sys.argv[1], 'wb').write(head + data)
EOF
[ -s "$tmp/toy.gguf" ] || { echo "could not write the test file (python3?)" >&2; exit 1; }

# the valid file
"$steno" info "$tmp/toy.gguf" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ]; then ok; else bad "valid file: exit $rc: $(cat "$tmp/err")"; fi
for want in 'GGUF v3' 'general.architecture: STRING = "toy"' 'toy.width: UINT32 = 8' \
            'toy.scale: FLOAT32 = 0.5' 'tokenizer.ggml.tokens: [10] STRING = "t0"' '(+2 more)' \
            'enc.weight' '[8, 2]' 'F32'; do
  if grep -qF -- "$want" "$tmp/out"; then ok; else bad "listing lacks '$want'"; fi
done

# a broken file must exit 1 with "steno info: ..." naming the problem on stderr
expect_error() { # file word what
  "$steno" info "$1" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -ne 1 ]; then bad "$3: exit $rc (want 1)"; return; fi
  if grep -q "steno info: .*$2" "$tmp/err"; then ok; else bad "$3: stderr lacks '$2': $(cat "$tmp/err")"; fi
}

size=$(wc -c <"$tmp/toy.gguf")
for n in 0 3 4 23 24 40 100 $((size - 64)) $((size - 1)); do
  head -c "$n" "$tmp/toy.gguf" >"$tmp/cut.gguf"
  case $n in
    0) word='empty file' ;;
    3) word='not a GGUF file' ;;
    $((size - 64)) | $((size - 1))) word='past end of file' ;;
    *) word='truncated' ;;
  esac
  expect_error "$tmp/cut.gguf" "$word" "truncated to $n bytes"
done

cp "$tmp/toy.gguf" "$tmp/magic.gguf"
printf 'GGML' | dd of="$tmp/magic.gguf" bs=1 conv=notrunc status=none
expect_error "$tmp/magic.gguf" 'not a GGUF file' 'bad magic'

cp "$tmp/toy.gguf" "$tmp/version.gguf"
printf '\007' | dd of="$tmp/version.gguf" bs=1 seek=4 conv=notrunc status=none
expect_error "$tmp/version.gguf" 'version 7' 'bad version'

expect_error "$tmp/missing.gguf" 'cannot open' 'missing file'
expect_error "$tmp" 'not a regular file' 'a directory'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
