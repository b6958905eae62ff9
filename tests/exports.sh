#!/usr/bin/env bash
# libsteno.so exports exactly the functions steno.h declares: nothing that is
# not steno_* (the library is built with hidden visibility), and every
# steno_* function of the header (each marked STENO_API). Its SONAME carries
# the version.
# Usage: tests/exports.sh path/to/libsteno.so include/steno.h
set -u
lib=${1:?usage: exports.sh libsteno.so steno.h}
header=${2:?usage: exports.sh libsteno.so steno.h}
failed=0
bad() { failed=1; echo "FAIL: $*" >&2; }

others=$(nm -D --defined-only "$lib" | grep -v ' steno_')
[ -z "$others" ] || bad "exported besides steno_*: $others"
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sort)
declared=$(grep -o 'steno_[a-z_0-9]*(' "$header" | tr -d '(' | sort -u)
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
[ -z "$missing" ] || bad "declared in steno.h, not exported (STENO_API?): $missing"
extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
[ -z "$extra" ] || bad "exported, not declared in steno.h: $extra"
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
case "$soname" in libsteno.so.[0-9]*) ;; *) bad "SONAME '$soname'" ;; esac
echo "$(echo "$exported" | wc -l) functions exported, SONAME $soname"
exit $failed
