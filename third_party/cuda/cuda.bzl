"""cuda_objects: compiles .cu files with nvcc into position-independent objects for a cc_library.

nvcc is not a Bazel toolchain here, so this small rule runs it directly, one action per file: real device
code for sm_80 (A100) and sm_90 (H100/H200) plus PTX for compute_90, which newer GPUs compile at load time.
Quote includes are given as -I (nvcc has no -iquote): the workspace root, the generated-files root and the
toolkit's include folder. Floating point as on the host: no FMA contraction (--fmad=false), IEEE division
and square root, no flush to zero (nvcc's defaults for the last two).
"""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE", "NCCL_AVAILABLE", "NVCC")

CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

def _cuda_objects_impl(ctx):
    headers = depset(ctx.files.hdrs, transitive = [
        dep[CcInfo].compilation_context.headers
        for dep in ctx.attr.deps
        if CcInfo in dep
    ])
    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_cuda_objs/%s/%s.pic.o" % (ctx.label.name, src.basename[:-len(".cu")]))
        root = ctx.label.workspace_root or "."
        args = ctx.actions.args()
        # --fmad=false: a * b + c stays a multiply and an add, as in the host code (copts.bzl's
        # -ffp-contract=off), so a kernel that follows a CPU kernel's operations in its order computes its
        # bits; nvcc contracts them into FMAs by default.
        args.add_all(["-c", "-std=c++17", "-O3", "--fmad=false", "-Xcompiler", "-fPIC"])
        args.add_all(CUDA_ARCH_FLAGS)
        args.add_all(["-I" + root, "-I" + ctx.genfiles_dir.path + "/" + root if root != "." else "-I" + ctx.genfiles_dir.path])
        args.add_all(ctx.attr.copts)
        args.add_all(["-o", obj.path, src.path])
        ctx.actions.run(
            executable = NVCC,
            arguments = [args],
            inputs = depset([src], transitive = [headers]),
            outputs = [obj],
            mnemonic = "Nvcc",
            progress_message = "nvcc %s" % src.short_path,
            use_default_shell_env = True,
        )
        objects.append(obj)
    return [DefaultInfo(files = depset(objects))]

cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
    },
)

def if_cuda(with_cuda, without_cuda = []):
    """`with_cuda` when this build has the CUDA toolkit, else `without_cuda`."""
    return with_cuda if CUDA_AVAILABLE else without_cuda

def if_nccl(with_nccl, without_nccl = []):
    """`with_nccl` when this build's CUDA toolkit has NCCL, else `without_nccl`."""
    return with_nccl if NCCL_AVAILABLE else without_nccl
