"""ontrain_fuzz_target: one libFuzzer target and the test that runs it.

Under --config=fuzz (clang, ASan, UBSan; tools/fuzz.sh) the binary is a libFuzzer fuzzer and its test fuzzes
for `seconds` from the seed corpus and the crashes found so far. In every other build the binary replays
those files through replay_main.cc, so the ordinary test suite (and --config=asan / ubsan) runs each seed
and each past crash as a regression test.
"""

load("//:copts.bzl", "COPTS")

def ontrain_fuzz_target(name, srcs, deps, seconds = 20):
    native.cc_binary(
        name = name,
        srcs = srcs,
        copts = COPTS,
        linkopts = select({
            "//tests/fuzz:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = deps + ["//tests/fuzz:fuzz_util"] + select({
            "//tests/fuzz:fuzzing": [],
            "//conditions:default": ["//tests/fuzz:replay_main"],
        }),
    )
    native.sh_test(
        name = name + "_test",
        size = "medium",
        srcs = ["//tests/fuzz:run_fuzz_target.sh"],
        args = ["$(location :%s)" % name] + select({
            "//tests/fuzz:fuzzing": ["fuzz"],
            "//conditions:default": ["replay"],
        }) + [
            str(seconds),
            "tests/fuzz/corpus/" + name,
            "tests/fuzz/regressions/" + name,
        ],
        data = [":" + name] + native.glob(["corpus/%s/**" % name, "regressions/%s/**" % name]),
    )
