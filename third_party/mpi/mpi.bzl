"""if_mpi: build-time selection on whether this machine has MPI (see mpi_configure.bzl)."""

load("@local_mpi//:defs.bzl", "MPI_AVAILABLE")

def if_mpi(with_mpi, without_mpi = []):
    """`with_mpi` when this build has MPI, else `without_mpi`."""
    return with_mpi if MPI_AVAILABLE else without_mpi
