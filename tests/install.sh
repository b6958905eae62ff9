#!/usr/bin/env bash
# cmake --install into a temporary prefix, then examples/transcribe.c built
# against what was installed, twice: with `cc $(pkg-config --cflags --libs
# steno)` and through find_package(steno) in examples/CMakeLists.txt. Both
# transcribe models/hello.wav with the bundled model (the installed copy)
# through the installed libsteno.so, and print its words with times. The
# installed CLI, header, static library, steno.pc (static flags too) and man
# page are checked to be there and to work.
# Usage: tests/install.sh BUILD_DIR   (run from the source folder)
set -u
build=${1:?usage: install.sh BUILD_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
passed=0 failed=0
want="hello world this is speech recognition on your own computer"
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
# check_transcript WHAT FILE: segments "[  s -> s] text" whose texts join to the clip's words.
check_transcript() {
  local text
  text=$(sed -n 's/^\[ *[0-9.]* -> *[0-9.]*\] //p' "$2" | tr '\n' ' ' | sed 's/ *$//')
  if [ "$text" = "$want" ] && ! grep -qv '^\[ *[0-9.]* -> *[0-9.]*\] ' "$2"; then ok
  else bad "$1: '$(cat "$2")'"; fi
}

if ! cmake --install "$build" --prefix "$prefix" >"$tmp/log" 2>&1; then
  cat "$tmp/log" >&2
  echo "FAIL: cmake --install" >&2
  exit 1
fi
libdir=$(dirname "$(find "$prefix" -name steno.pc)")/..
for f in include/steno.h bin/steno share/man/man1/steno.1 share/steno/models/steno-en-tiny-ctc.gguf; do
  if [ -f "$prefix/$f" ]; then ok; else bad "$f not installed"; fi
done
for f in libsteno.a libsteno.so cmake/steno/stenoConfig.cmake cmake/steno/stenoConfigVersion.cmake; do
  if [ -e "$libdir/$f" ]; then ok; else bad "lib/$f not installed"; fi
done
soname=$(objdump -p "$libdir/libsteno.so" | awk '$1 == "SONAME" {print $2}')
if [ -n "$soname" ] && [ -e "$libdir/$soname" ]; then ok; else bad "the SONAME's link ($soname) is missing"; fi
# The man page renders (where man is installed; else it is at least a roff page).
if command -v man >/dev/null; then
  if man -l "$prefix/share/man/man1/steno.1" 2>/dev/null | grep -q "STENO_DEVICE"; then ok; else bad "man page"; fi
elif grep -q '^\.TH STENO 1' "$prefix/share/man/man1/steno.1"; then ok; else bad "man page: no .TH"; fi

export PKG_CONFIG_PATH=$libdir/pkgconfig
export LD_LIBRARY_PATH=$libdir
# pkg-config: dynamic, against the installed libsteno.so.
if cc -Wall -Wextra -Werror examples/transcribe.c $(pkg-config --cflags --libs steno) -o "$tmp/transcribe_pc" 2>"$tmp/err"; then
  ok
  ldd "$tmp/transcribe_pc" | grep -q "libsteno.so.* => $libdir" && ok || bad "not linked to the installed libsteno.so: $(ldd "$tmp/transcribe_pc")"
  "$tmp/transcribe_pc" "$prefix/share/steno/models/steno-en-tiny-ctc.gguf" models/hello.wav >"$tmp/out" 2>"$tmp/err"
  check_transcript "pkg-config build" "$tmp/out"
else
  bad "cc with pkg-config: $(cat "$tmp/err")"
fi
# libsteno.a with the modules steno.pc names in Requires.private (their shared
# libraries: a distribution's FFmpeg is rarely there to link statically) and its
# Libs.private.
requires=$(pkg-config --print-requires-private steno | tr '\n' ' ')
private=$(pkg-config --static --libs-only-l steno | tr ' ' '\n' | grep -x -e -lpthread -e -lm | tr '\n' ' ')
if cc examples/transcribe.c $(pkg-config --cflags steno) -o "$tmp/transcribe_static" \
    "$libdir/libsteno.a" $(pkg-config --libs $requires) $private 2>"$tmp/err"; then
  ok
  ldd "$tmp/transcribe_static" | grep -q libsteno && bad "the static build needs libsteno.so" || ok
  "$tmp/transcribe_static" models/steno-en-tiny-ctc.gguf models/hello.wav >"$tmp/out" 2>"$tmp/err"
  check_transcript "static build" "$tmp/out"
else
  bad "static link with pkg-config --static: $(cat "$tmp/err")"
fi
# find_package(steno) in examples/CMakeLists.txt.
if cmake -S examples -B "$tmp/example" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/log" 2>&1 &&
   cmake --build "$tmp/example" >>"$tmp/log" 2>&1; then
  ok
  "$tmp/example/transcribe" models/steno-en-tiny-ctc.gguf models/hello.wav >"$tmp/out" 2>"$tmp/err"
  check_transcript "find_package build" "$tmp/out"
else
  bad "find_package(steno): $(cat "$tmp/log")"
fi
# An error comes back as the library's message.
"$tmp/example/transcribe" models/steno-en-tiny-ctc.gguf "$tmp/missing.wav" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "missing.wav" "$tmp/err"; then ok; else bad "missing audio: exit $rc, $(cat "$tmp/err")"; fi
# The installed CLI, with its default model from share/steno/models.
(cd "$tmp" && STENO_MODEL= "$prefix/bin/steno" run "$OLDPWD/models/hello.wav" --quiet) >"$tmp/out" 2>"$tmp/err"
if [ "$(cat "$tmp/out")" = "$want" ]; then ok; else bad "installed steno run: $(cat "$tmp/out" "$tmp/err")"; fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
