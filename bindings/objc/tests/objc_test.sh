#!/usr/bin/env bash
# The Objective-C binding's test (Bazel sh_test): compiles ontrain_training.m and tests/training_test.m with
# GCC's Objective-C and GNUstep Foundation, has the C++ engine (bindings/mlp_losses) generate the built-in
# MLP's artifacts and print its losses, then trains the same artifacts through Objective-C alone and compares
# (training_test.m says what else it checks). Where gobjc or GNUstep is not installed the test is reported
# as skipped, with the reason, in the JUnit file Bazel reads.
#
#   objc_test.sh MLP_LOSSES LIBONTRAIN_SO C_API_HEADER BINDING_M BINDING_H TEST_M README
#
# It also compiles the README's Objective-C training loop against the binding, so that the README cannot
# drift.
set -uo pipefail

mlp_losses="$1" lib="$2" c_api_header="$3" binding_m="$4" binding_h="$5" test_m="$6" readme="$7"

source bindings/binding_test_lib.sh
command -v gnustep-config >/dev/null || skip_test objc "GNUstep Foundation (Debian's libgnustep-base-dev) is not installed"
gcc_objc_ok=$(echo '@interface T @end' | gcc -x objective-c -fsyntax-only - 2>&1 >/dev/null | grep -c "not installed\|error: .*cc1obj") || true
command -v gcc >/dev/null && [ "$gcc_objc_ok" = 0 ] || skip_test objc "GCC's Objective-C compiler (Debian's gobjc) is not installed"

work="${TEST_TMPDIR:-$(mktemp -d)}"
export HOME="$work"  # GNUstep keeps per-user defaults under ~/GNUstep
mkdir -p "$work/bin" "$work/include/ontrain" "$work/artifacts" "$work/scratch"
cp "$lib" "$work/bin/libontrain.so"
cp "$c_api_header" "$work/include/ontrain/c_api.h"
cp "$binding_h" "$work/include/"
# -Werror on our files only: GNUstep's own headers warn under -Wall.
gcc -std=gnu11 $(gnustep-config --objc-flags) -Wno-unused-parameter -I"$work/include" "$binding_m" "$test_m" \
  -o "$work/bin/training_test" -L"$work/bin" -lontrain -Wl,-rpath,'$ORIGIN' $(gnustep-config --base-libs) \
  2>"$work/compile.log" || { cat "$work/compile.log"; exit 1; }
if grep -E "(ontrain_training|training_test)\.[mh]:[0-9]+:[0-9]+: (warning|error)" "$work/compile.log"; then
  echo "the binding or its test compiles with warnings (above)"
  exit 1
fi
# The README's snippet, inside a main that declares what it leaves to the reader.
{
  awk '/^```objc$/{on=1; next} on && /^```$/{exit} on && /^#import/{print; next}' "$readme"
  echo 'int main(void) { NSUInteger steps = 0; NSData* images[1] = {nil}; NSData* labels[1] = {nil}; NSArray* xShape = nil; NSArray* yShape = nil;'
  awk '/^```objc$/{on=1; next} on && /^```$/{exit} on && !/^#import/{print}' "$readme"
  echo 'return 0; }'
} >"$work/readme_snippet.m"
gcc -std=gnu11 $(gnustep-config --objc-flags) -Wno-unused-parameter -I"$work/include" -c "$work/readme_snippet.m" \
  -o "$work/readme_snippet.o" 2>"$work/readme.log" || { cat "$work/readme.log"; echo "the README's Objective-C snippet does not compile"; exit 1; }
if grep -E "readme_snippet\.m:[0-9]+:[0-9]+: (warning|error)" "$work/readme.log"; then
  echo "the README's Objective-C snippet compiles with warnings (above)"
  exit 1
fi
"$mlp_losses" --out "$work/artifacts" --steps 12 >"$work/reference.txt" || exit 1
# Under --config=asan the test program runs with ASan's runtime preloaded, leaks checked
# (tools/sanitizers/lsan.supp skips the Objective-C runtime's and GNUstep's own).
preload_asan_runtime "$lib"
"$work/bin/training_test" "$work/artifacts" "$work/reference.txt" "$work/scratch"
