"""cuda_cc_test: a test of the CUDA provider, built twice.

`name` runs as written: against libontrain_cuda.so where the CUDA toolkit was found (its CUDA cases skip,
saying why, without a GPU). `emu_name` runs the same source against libontrain_cuda_emu.so, the provider
built over the emulated device of providers/cuda/host_emu, so that its CUDA cases run on every machine;
`emu_args` can leave out the cases that do not touch the CUDA provider (they already run in `name`).
"""

load("//:copts.bzl", "COPTS")
load("//third_party/cuda:cuda.bzl", "if_cuda")

EMU_PROVIDER = "//providers/cuda:libontrain_cuda_emu.so"

def cuda_cc_test(name, emu_name, srcs, deps, size = "small", emu_size = None, data = [], emu_args = []):
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs,
        copts = COPTS,
        data = if_cuda(["//providers/cuda:libontrain_cuda.so"]) + data,
        deps = deps,
    )
    native.cc_test(
        name = emu_name,
        size = emu_size or size,
        srcs = srcs,
        args = emu_args,
        copts = COPTS,
        data = [EMU_PROVIDER] + data,
        env = {"ONTRAIN_CUDA_PROVIDER": "$(rootpath %s)" % EMU_PROVIDER},
        deps = deps,
    )
