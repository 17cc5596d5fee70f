# Shell functions the bindings' tests share (bindings/csharp/tests/csharp_test.sh,
# bindings/objc/tests/objc_test.sh); sourced from the runfiles root, where Bazel runs a test.

# Reports the whole test as one skipped case of suite $1, with the reason $2, in the JUnit file Bazel reads
# (so the closing count shows it), and ends the test successfully.
skip_test() {
  echo "SKIPPED: $2"
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    cat >"$XML_OUTPUT_FILE" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="$1" tests="1" skipped="1">
  <testcase name="TrainingTest" classname="$1.TrainingTest"><skipped message="$2"/></testcase>
</testsuite></testsuites>
XML
  fi
  exit 0
}

# Built with --config=asan, libontrain.so ($1) needs ASan's runtime loaded first: exports LD_PRELOAD with it
# (and libstdc++, which ASan must see at start to intercept C++ throws in a program that does not link it),
# for the test program only. Nothing happens in an ordinary build. Returns 0 when it preloaded.
preload_asan_runtime() {
  local runtime
  runtime=$(ldd "$1" | awk '/libasan\.so/ {print $3}')
  [ -n "$runtime" ] || return 1
  export LD_PRELOAD="$runtime $(ldd "$1" | awk '/libstdc\+\+\.so/ {print $3}')"
}
