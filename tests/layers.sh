#!/usr/bin/env bash
# Dependencies point down DESIGN.md's layer table, never up: every #include "x/..."
# in src/LAYER/ must name a header of LAYER itself, of a layer LAYER may use, or
# steno.h. Prints each include that breaks the rule and fails if there is one.
# Usage: layers.sh [SOURCE_DIR] (default: the checkout holding this script).
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}

# What each layer may use (besides itself and steno.h). text turns the decoders'
# tokens into words (it reads decode's token lists); nn loads its blocks' weights
# from the GGUF reader, and the GPU transducer search takes decode's weights and
# gives its token lists; models use everything below them, api the models and audio.
declare -A uses=(
  [base]=""
  [io]="base"
  [audio]="base"
  [frontend]="base"
  [gpu]="base"
  [decode]="base"
  [text]="base decode"
  [nn]="base gpu io decode"
  [models]="base io frontend gpu decode text nn"
  [api]="base io audio frontend gpu decode text nn models"
)

bad=0
for dir in "$root"/src/*/; do
  layer=$(basename "$dir")
  if [[ -z ${uses[$layer]+set} ]]; then
    echo "layers.sh: src/$layer is not in the layer table (add it here and to DESIGN.md)"
    bad=1
    continue
  fi
  while IFS=: read -r file line text; do
    dep=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"/]+)\/.*/\1/' <<<"$text")
    [[ $dep == "$text" || $dep == "$layer" ]] && continue # steno.h, or a header of its own
    if [[ " ${uses[$layer]} " != *" $dep "* ]]; then
      echo "${file#"$root"/}:$line: $layer may not include $dep (${text#*#})"
      bad=1
    fi
  done < <(grep -rnE --include='*.c' --include='*.h' '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$dir")
done
[[ $bad == 0 ]] && echo "layers: every include points down the table"
exit $bad
