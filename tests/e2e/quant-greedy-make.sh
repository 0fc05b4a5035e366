#!/usr/bin/env bash
# Writes quant-greedy.txt (beside this script): for each stories260K fixture, its file name, a tab,
# and the reference engine's greedy text for "Once upon a time" -n 64 as listed in
# $LOOM_MODELS/quant/README.md (llama.cpp c392e509, `llama-simple -m FILE -n 64 "Once upon a time"`),
# without the leading "<s> " and with the README's " / " line breaks kept as they are.
# usage: quant-greedy-make.sh [MODELS_DIR]   (default ../shared/models from the repository root)
set -eu
models=${1:-$(dirname "$0")/../../../shared/models}
sed -n 's/^- `\(stories260K-[A-Za-z0-9_]*\.gguf\)`: `<s> \(.*\)`$/\1\t\2/p' "$models/quant/README.md" >"$(dirname "$0")/quant-greedy.txt"
