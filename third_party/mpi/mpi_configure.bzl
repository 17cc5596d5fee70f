"""mpi_configure: a repository rule that finds MPI (Debian's Open MPI, libopenmpi-dev) on this machine, offline.

It asks `mpicc --showme:incdirs` / `--showme:libdirs` (the wrapper Open MPI installs), else looks in Debian's
folder (/usr/lib/x86_64-linux-gnu/openmpi). When mpi.h is there, the repository holds `:mpi` (headers, and
libmpi linked dynamically) and `defs.bzl` with MPI_AVAILABLE = True; without it, or with ONTRAIN_MPI=0 in
the environment, an empty stand-in and MPI_AVAILABLE = False, so everything else still builds.
"""

_BUILD_WITH_MPI = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "mpi",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lmpi"],
)
"""

_BUILD_WITHOUT_MPI = """
package(default_visibility = ["//visibility:public"])

# No MPI was found ({why}): an empty stand-in.
cc_library(name = "mpi")
"""

def _first_dir(ctx, args):
    mpicc = ctx.which("mpicc")
    if mpicc == None:
        return ""
    result = ctx.execute([str(mpicc)] + args)
    if result.return_code != 0:
        return ""
    for word in result.stdout.replace("\n", " ").split(" "):
        if word and ctx.path(word).exists:
            return word
    return ""

def _mpi_configure_impl(ctx):
    why = ""
    inc = _first_dir(ctx, ["--showme:incdirs"]) or "/usr/lib/x86_64-linux-gnu/openmpi/include"
    lib = _first_dir(ctx, ["--showme:libdirs"]) or "/usr/lib/x86_64-linux-gnu/openmpi/lib"
    if ctx.os.environ.get("ONTRAIN_MPI", "") == "0":
        why = "ONTRAIN_MPI=0"
    elif not ctx.path(inc + "/mpi.h").exists:
        why = "no mpi.h in " + inc + " (install libopenmpi-dev)"
    if why:
        ctx.file("BUILD.bazel", _BUILD_WITHOUT_MPI.format(why = why))
        ctx.file("defs.bzl", "MPI_AVAILABLE = False\nMPI_MISSING = \"%s\"\n" % why)
        return
    ctx.symlink(inc, "include")
    ctx.file("BUILD.bazel", _BUILD_WITH_MPI.format(lib = lib))
    ctx.file("defs.bzl", "MPI_AVAILABLE = True\nMPI_MISSING = \"\"\n")

mpi_configure = repository_rule(
    implementation = _mpi_configure_impl,
    environ = ["ONTRAIN_MPI", "PATH"],
    local = True,
)
