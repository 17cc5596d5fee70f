"""The NCCL communicator's targets, defined only when the CUDA toolkit has NCCL (BUILD files cannot branch)."""

load("//:copts.bzl", "COPTS")
load("@local_cuda//:defs.bzl", "NCCL_AVAILABLE")

def nccl_targets():
    if not NCCL_AVAILABLE:
        return
    native.cc_binary(
        name = "libontrain_nccl.so",
        srcs = ["nccl_communicator.cc"],
        copts = COPTS + ["-fvisibility=hidden"],
        linkshared = True,
        linkopts = ["-Wl,--version-script=$(location //distributed:exports.lds)"],
        additional_linker_inputs = ["//distributed:exports.lds"],
        deps = [
            "//distributed:communicator",
            "@local_cuda//:headers",
            "@local_cuda//:nccl",
        ],
    )
