#!/usr/bin/env bash
# Runs every Fuzz target in the tree for a bounded time each.
set -euo pipefail
t=${1:-20s}
git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | while read -r f; do
  pkg=./$(dirname "$f")
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //' | while read -r fn; do
    echo "== $pkg $fn ($t)"
    go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$t" "$pkg"
  done
done
