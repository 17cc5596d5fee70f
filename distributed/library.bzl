"""communicator_library: a communicator built as a run-time library that exports only OntrainCommunicatorLibrary."""

load("//:copts.bzl", "COPTS")

def communicator_library(name, srcs, deps):
    native.cc_binary(
        name = name,
        srcs = srcs,
        copts = COPTS + ["-fvisibility=hidden"],
        linkshared = True,
        linkopts = ["-Wl,--version-script=$(location //distributed:exports.lds)"],
        additional_linker_inputs = ["//distributed:exports.lds"],
        deps = ["//distributed:communicator"] + deps,
    )
