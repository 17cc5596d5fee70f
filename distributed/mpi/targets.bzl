"""The MPI communicator's targets, defined only when the build has MPI (BUILD files cannot branch)."""

load("//:copts.bzl", "COPTS")
load("@local_mpi//:defs.bzl", "MPI_AVAILABLE")

def mpi_targets():
    if not MPI_AVAILABLE:
        return
    native.cc_binary(
        name = "libontrain_mpi.so",
        srcs = ["mpi_communicator.cc"],
        copts = COPTS + ["-fvisibility=hidden"],
        linkshared = True,
        linkopts = ["-Wl,--version-script=$(location //distributed:exports.lds)"],
        additional_linker_inputs = ["//distributed:exports.lds"],
        deps = [
            "//distributed:communicator",
            "@local_mpi//:mpi",
        ],
    )
