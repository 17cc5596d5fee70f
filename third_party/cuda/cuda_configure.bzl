"""cuda_configure: a repository rule that finds the CUDA toolkit on this machine, offline.

It looks for `$CUDA_PATH/bin/nvcc` (default /usr/local/cuda). When it is there, the repository holds the
toolkit's headers (`:headers`), a `:libraries` target that links the CUDA runtime statically and cuBLAS
and cuDNN dynamically (never the driver: cudart finds libcuda.so.1 at run time), and `defs.bzl` with
CUDA_AVAILABLE = True, the nvcc path and the toolkit version. Without a toolkit, or with ONTRAIN_CUDA=0 in
the environment, it holds empty stand-ins and CUDA_AVAILABLE = False, so everything else still builds.
"""

_BUILD_WITH_CUDA = """
package(default_visibility = ["//visibility:public"])

# The toolkit's own headers (cuda_runtime_api.h, cublas_v2.h, cudnn.h and what they include).
cc_library(
    name = "headers",
    hdrs = glob(["cuda/include/*.h", "cuda/include/*.hpp", "cuda/include/crt/**", "cuda/include/nv/**"]),
    includes = ["cuda/include"],
)

# cudart statically (no libcudart.so needed at run time), cuBLAS, cuBLASLt and cuDNN as the shared libraries the
# toolkit or the machine provides, found through the run path or LD_LIBRARY_PATH.
cc_library(
    name = "libraries",
    linkopts = [
        "-L{lib}",
        "-Wl,-rpath,{lib}",
        "-l:libcudart_static.a",
        "-lcublas",
        "-lcublasLt",
        "-lcudnn",
        "-ldl",
        "-lrt",
        "-lpthread",
    ],
    deps = [":headers"],
)

# NCCL, when the toolkit ships it (include/nccl.h, lib/libnccl.so), for distributed/nccl.
cc_library(
    name = "nccl",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lnccl"],
    deps = [":libraries"],
)
"""

_BUILD_WITHOUT_CUDA = """
package(default_visibility = ["//visibility:public"])

# No CUDA toolkit was found ({why}): empty stand-ins.
cc_library(name = "headers")
cc_library(name = "libraries")
cc_library(name = "nccl")
"""

def _cuda_configure_impl(ctx):
    root = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    nvcc = ctx.path(root + "/bin/nvcc")
    why = ""
    if ctx.os.environ.get("ONTRAIN_CUDA", "") == "0":
        why = "ONTRAIN_CUDA=0"
    elif not nvcc.exists:
        why = "no " + str(nvcc)
    if why:
        ctx.file("BUILD.bazel", _BUILD_WITHOUT_CUDA.format(why = why))
        ctx.file("defs.bzl", "CUDA_AVAILABLE = False\nNCCL_AVAILABLE = False\nNVCC = \"\"\nCUDA_VERSION = \"\"\n" +
                             "CUDA_MISSING = \"%s\"\n" % why)
        return
    version = ""
    result = ctx.execute([str(nvcc), "--version"])
    for line in result.stdout.splitlines():
        if "release" in line:
            version = line.split("release")[1].split(",")[0].strip()
    lib = root + "/lib64"
    if not ctx.path(lib).exists:
        lib = root + "/lib"
    ctx.symlink(root + "/include", "cuda/include")
    ctx.file("BUILD.bazel", _BUILD_WITH_CUDA.format(lib = lib))
    nccl = ctx.path(root + "/include/nccl.h").exists and (ctx.path(lib + "/libnccl.so").exists or
                                                          ctx.path(lib + "/libnccl.so.2").exists)
    ctx.file("defs.bzl", "CUDA_AVAILABLE = True\nNCCL_AVAILABLE = %s\nNVCC = \"%s\"\nCUDA_VERSION = \"%s\"\n" %
                         (nccl, str(nvcc), version) + "CUDA_MISSING = \"\"\n")

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "ONTRAIN_CUDA"],
    local = True,
)
