#!/usr/bin/env bash
# Seeds the fuzz corpora from the reference histories in history/: every JSONL history for
# jsonl_reader, every EDN history for edn_importer, plus each one's lines on their own (small
# inputs the fuzzer mutates faster). Run from anywhere; the corpora are not committed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
histories="$here/../history"
seed() { # seed TARGET EXTENSION
  local corpus="$here/corpus/$1"
  mkdir -p "$corpus"
  for file in "$histories"/*."$2"; do
    name="$(basename "$file" ."$2")"
    cp "$file" "$corpus/$name"
    local n=0
    while IFS= read -r line || [ -n "$line" ]; do
      n=$((n + 1))
      printf '%s\n' "$line" > "$corpus/$name-line$n"
    done < "$file"
  done
  echo "$1: $(ls "$corpus" | wc -l) seeds in $corpus"
}
seed jsonl_reader jsonl
seed edn_importer edn
