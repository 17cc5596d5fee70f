"""Compiler options every ontrain C++ target carries, so that it builds the same from another workspace.

Bazel's default C++ toolchain compiles with -std=c++0x unless told otherwise; ontrain is C++17.
"""

COPTS = ["-std=c++17"]
