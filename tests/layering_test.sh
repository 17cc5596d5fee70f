#!/usr/bin/env bash
# The layering rule: every folder includes only from folders below it (and from itself).
#   core  <  checkpoint  <  graph  <  providers  <  optimizer, scheduler  <  engine  <  tools, bindings
#   core  <  distributed  <  engine
# Fails naming each file and include that breaks it.
set -uo pipefail

declare -A allowed=(
  [core]="core"
  [checkpoint]="core checkpoint"
  [graph]="core checkpoint graph"
  [providers]="core graph providers"
  [optimizer]="core checkpoint graph optimizer"
  [scheduler]="core checkpoint scheduler"
  [distributed]="core distributed"
  [engine]="core checkpoint graph providers optimizer scheduler distributed engine"
  [tools]="core checkpoint graph providers optimizer scheduler distributed engine tools"
  [bindings]="core checkpoint graph providers optimizer scheduler distributed engine bindings"
)

bad=0
checked=0
while IFS= read -r -d '' f; do
  rel="${f#./}"
  top="${rel%%/*}"
  [[ -n "${allowed[$top]+x}" ]] || continue
  checked=$((checked + 1))
  while IFS= read -r inc; do
    dep="${inc%%/*}"
    [[ -n "${allowed[$dep]+x}" ]] || continue  # system and generated headers
    if [[ " ${allowed[$top]} " != *" $dep "* ]]; then
      echo "layering: $rel includes \"$inc\" ($top may use only: ${allowed[$top]})"
      bad=1
    fi
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
done < <(find -L . \( -name '*.h' -o -name '*.cc' \) -print0)

if [ "$checked" -lt 100 ]; then
  echo "layering: only $checked source files found; the test data is incomplete"
  exit 1
fi
[ $bad -eq 0 ] && echo "layering: $checked files, every include goes down"
exit $bad
