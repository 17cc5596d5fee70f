#!/usr/bin/env bash
# The C# binding's test (Bazel sh_test): compiles the binding and tests/TrainingTest.cs with Mono's mcs,
# has the C++ engine (bindings/mlp_losses) generate the built-in MLP's artifacts and print its losses, then
# trains the same artifacts through C# alone and compares (TrainingTest.cs says what else it checks). Where
# Mono is not installed the test is reported as skipped, with the reason, in the JUnit file Bazel reads.
#
#   csharp_test.sh MLP_LOSSES LIBONTRAIN_SO README CS_FILE... -- TEST_CS_FILE
#
# It also compiles the README's C# training loop against the binding, so that the README cannot drift.
set -uo pipefail

mlp_losses="$1"
lib="$2"
readme="$3"
shift 3
sources=()
while [ "$1" != "--" ]; do sources+=("$1"); shift; done
test_source="$2"

source bindings/binding_test_lib.sh
command -v mcs >/dev/null || skip_test csharp "Mono's C# compiler (mcs, Debian's mono-mcs) is not installed"
command -v mono >/dev/null || skip_test csharp "the Mono runtime (Debian's mono-runtime) is not installed"

work="${TEST_TMPDIR:-$(mktemp -d)}"
export HOME="$work"  # Mono keeps per-user state under ~/.mono
mkdir -p "$work/bin" "$work/artifacts" "$work/scratch"
cp "$lib" "$work/bin/libontrain.so"
mcs -nologo -warnaserror -target:library -out:"$work/bin/Ontrain.dll" "${sources[@]}" || exit 1
mcs -nologo -warnaserror -out:"$work/bin/TrainingTest.exe" -r:"$work/bin/Ontrain.dll" "$test_source" || exit 1
# The README's snippet, inside a Main that declares what it leaves to the reader.
{
  echo 'using System;'
  awk '/^```csharp$/{on=1; next} on && /^```$/{exit} on && /^using Ontrain;/{print; next}' "$readme"
  echo 'static class ReadmeSnippet { static void Main() { int steps = 0; float[][] imageBatches = null; long[][] labelBatches = null;'
  awk '/^```csharp$/{on=1; next} on && /^```$/{exit} on && !/^using Ontrain;/{print}' "$readme"
  echo '} }'
} >"$work/ReadmeSnippet.cs"
mcs -nologo -warnaserror -out:"$work/bin/ReadmeSnippet.exe" -r:"$work/bin/Ontrain.dll" "$work/ReadmeSnippet.cs" ||
  { echo "the README's C# snippet does not compile against the binding"; exit 1; }
"$mlp_losses" --out "$work/artifacts" --steps 12 >"$work/reference.txt" || exit 1
# Mono finds libontrain.so beside the assembly.
# Under --config=asan the test program runs with ASan's runtime preloaded. Memory errors are checked; leaks are
# not: mono unloads libontrain.so before LeakSanitizer runs, so every frame of ours is an unknown module, and
# mono itself keeps allocations to exit. The Objective-C test makes the same C API calls with leak checking on.
if preload_asan_runtime "$lib"; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
mono "$work/bin/TrainingTest.exe" "$work/artifacts" "$work/reference.txt" "$work/scratch"
