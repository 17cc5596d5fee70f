"""The CUDA provider's targets, defined only when the build has a CUDA toolkit (BUILD files cannot branch)."""

load("//:copts.bzl", "COPTS")
load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE")
load("//third_party/cuda:cuda.bzl", "cuda_objects")

# The provider's host sources and headers, for both builds: with the toolkit (below) and over the emulated
# device (BUILD.bazel's cuda_provider_emu).
PROVIDER_SRCS = [
    "cuda_allocator.cc",
    "cuda_check.cc",
    "cuda_kernel.cc",
    "cuda_kernel_list.cc",
    "cuda_provider.cc",
]

# What the provider's code links against besides the CUDA libraries (or the emulated ones).
PROVIDER_DEPS = [
    ":device_plans",
    "//core:random",
    "//core:tensor",
    "//providers:provider",
    "//providers:provider_library",
    "//providers/cpu:kernels",
]

PROVIDER_HDRS = [
    "cuda_allocator.h",
    "cuda_check.h",
    "cuda_kernel.h",
    "cuda_provider.h",
    "kernels/cuda_kernels.h",
    "kernels/launch.h",
]

def provider_kernel_srcs():
    return native.glob(["kernels/*.cc"], exclude = ["kernels/device_plans.cc"])

def cuda_provider_targets():
    if not CUDA_AVAILABLE:
        return
    cuda_objects(
        name = "device_code",
        srcs = native.glob(["kernels/*.cu"]),
        hdrs = native.glob(["kernels/*.cuh", "kernels/launch.h", "kernels/device_math.h", "kernels/recurrent_*.h"]),
    )
    native.cc_library(
        name = "cuda_provider",
        srcs = PROVIDER_SRCS + [":device_code"] + provider_kernel_srcs(),
        hdrs = PROVIDER_HDRS,
        copts = COPTS,
        deps = PROVIDER_DEPS + [
            "@local_cuda//:headers",
            "@local_cuda//:libraries",
        ],
        alwayslink = True,
    )
    # The library the engine loads: only OntrainProviderLibrary is exported.
    native.cc_binary(
        name = "libontrain_cuda.so",
        srcs = ["library.cc"],
        copts = COPTS + ["-fvisibility=hidden"],
        linkshared = True,
        linkopts = ["-Wl,--version-script=$(location :exports.lds)", "-Wl,-rpath,$$ORIGIN"],
        additional_linker_inputs = [":exports.lds"],
        deps = [":cuda_provider"],
    )
