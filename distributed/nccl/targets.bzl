"""The NCCL communicator's targets, defined only when the CUDA toolkit has NCCL (BUILD files cannot branch)."""

load("@local_cuda//:defs.bzl", "NCCL_AVAILABLE")
load("//distributed:library.bzl", "communicator_library")

def nccl_targets():
    if NCCL_AVAILABLE:
        communicator_library("libontrain_nccl.so", ["nccl_communicator.cc"], ["@local_cuda//:headers", "@local_cuda//:nccl"])
