"""The MPI communicator's targets, defined only when the build has MPI (BUILD files cannot branch)."""

load("@local_mpi//:defs.bzl", "MPI_AVAILABLE")
load("//distributed:library.bzl", "communicator_library")

def mpi_targets():
    if MPI_AVAILABLE:
        communicator_library("libontrain_mpi.so", ["mpi_communicator.cc"], ["@local_mpi//:mpi"])
