"""Compiler options every ontrain C++ target carries, so that it builds the same from another workspace.

Bazel's default C++ toolchain compiles with -std=c++0x unless told otherwise; ontrain is C++17.

-ffp-contract=off: GCC contracts a * b + c into one FMA by default in C++ (only its ISO C modes turn that
off), wherever the target has FMA: in the AVX-512/AVX2 clones of a loop but not its baseline one, and in a
vectorized loop body differently from its scalar remainder. Results would then depend on the CPU and on
where a thread's range starts (the thread count). Without contraction every path computes the same IEEE
operations.
"""

COPTS = [
    "-std=c++17",
    "-ffp-contract=off",
]
