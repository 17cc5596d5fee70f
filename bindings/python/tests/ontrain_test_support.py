"""What the Python tests share: running under AddressSanitizer.

Built with `--config=asan` (tools/test.sh --config=asan), the extension ontrain/_ontrain.so is instrumented
and needs ASan's runtime to be the first library of the process, which Debian's python3 is not built with.
`reexec_with_asan_runtime()` (called before `ontrain` is imported) runs the test script again with the
runtime preloaded, so that only this interpreter and its children carry it (preloading it through
`--test_env` would also instrument Bazel's own test scripts). In an ordinary build it does nothing.
"""
import importlib.util
import os
import subprocess
import sys


def reexec_with_asan_runtime():
    if os.environ.get("ONTRAIN_ASAN_REEXEC"):
        return
    spec = importlib.util.find_spec("ontrain")  # finds the package without importing the extension
    if spec is None or not spec.submodule_search_locations:
        return
    extension = os.path.join(list(spec.submodule_search_locations)[0], "_ontrain.so")
    if not os.path.exists(extension):
        return
    libraries = {}
    for line in subprocess.run(["ldd", extension], capture_output=True, text=True).stdout.splitlines():
        if "=>" in line:
            name, path = line.split("=>")
            libraries[name.strip()] = path.split("(")[0].strip()
    runtime = [path for name, path in libraries.items() if name.startswith("libasan.so")]
    if not runtime:
        return
    # libstdc++ too: ASan intercepts __cxa_throw only if libstdc++ is loaded when ASan starts (python does
    # not link it), and a C++ exception thrown through an unresolved interceptor aborts the process.
    preload = runtime + [path for name, path in libraries.items() if name.startswith("libstdc++.so")]
    env = dict(os.environ, LD_PRELOAD=" ".join(preload), ONTRAIN_ASAN_REEXEC="1")
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)
