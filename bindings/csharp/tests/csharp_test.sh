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

skip() {
  echo "SKIPPED: $1"
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    cat >"$XML_OUTPUT_FILE" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="csharp" tests="1" skipped="1">
  <testcase name="TrainingTest" classname="csharp.TrainingTest"><skipped message="$1"/></testcase>
</testsuite></testsuites>
XML
  fi
  exit 0
}
command -v mcs >/dev/null || skip "Mono's C# compiler (mcs, Debian's mono-mcs) is not installed"
command -v mono >/dev/null || skip "the Mono runtime (Debian's mono-runtime) is not installed"

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
# Built with --config=asan, libontrain.so needs ASan's runtime loaded first: preload it (and libstdc++, which
# mono does not link and ASan must see at start to intercept C++ throws) for the test program only. Memory
# errors are checked; leaks are not: mono unloads libontrain.so before LeakSanitizer runs, so every frame of
# ours is an unknown module, and mono itself keeps allocations to exit. The Objective-C test makes the same
# C API calls with leak checking on.
asan_runtime=$(ldd "$lib" | awk '/libasan\.so/ {print $3}')
if [ -n "$asan_runtime" ]; then
  export LD_PRELOAD="$asan_runtime $(ldd "$lib" | awk '/libstdc\+\+\.so/ {print $3}')"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
mono "$work/bin/TrainingTest.exe" "$work/artifacts" "$work/reference.txt" "$work/scratch"
