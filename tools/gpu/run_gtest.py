#!/usr/bin/env python3
"""Runs a GoogleTest binary on the GPU machine so that one faulting case cannot hide the others.

A CUDA fault inside a kernel (an illegal address, a launch failure) is sticky: every later CUDA call in that
process fails too, and a crash loses every case after it. This driver runs the binary's cases in batches
(one process each) and reads the plain gtest output. When a case ends in a sticky CUDA error, or the process
dies inside a case, that case is recorded as the fault and the cases after it in the batch run again in a
fresh process. Each batch has a time limit; a batch that overruns marks its running case as a hang.

  run_gtest.py BINARY [--filter F] [--batch N] [--timeout S] [--json FILE] [--log FILE] [--sanitize N]
               [--blocking N]

--blocking N (default 3) reruns the first N faulting cases alone with CUDA_LAUNCH_BLOCKING=1, under which
the CUDA provider waits for each kernel, so the error names the node whose kernel faulted (without it a
later copy reports the fault); prints that line. --sanitize N reruns the first N faulting cases alone under
compute-sanitizer (memcheck), when it exists, and appends its report to the log.

Prints one line per failing case and a closing count; --json writes {"cases": {name: {"result", "message"}}}.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

STICKY = re.compile(r"cudaErrorIllegalAddress|cudaErrorLaunchFailure|cudaErrorMisalignedAddress|"
                    r"cudaErrorIllegalInstruction|cudaErrorHardwareStackError|cudaErrorInvalidPc|"
                    r"cudaErrorAssert|cudaErrorLaunchTimeout|illegal memory access|unspecified launch failure")
RUN = re.compile(r"^\[ RUN      \] (\S+)")
# A parameterized case's FAILED line names its parameter: "[  FAILED  ] Suite/Test.Case/name, where
# GetParam() = 74 (11 ms)".
END = re.compile(r"^\[ +(OK|FAILED|SKIPPED) +\] ([^\s,]+)(?:, where .*?)?(?: \(\d+ ms\))?$")


def list_cases(binary, flt):
    out = subprocess.run([binary, "--gtest_list_tests", "--gtest_filter=" + flt], capture_output=True, text=True,
                         timeout=120).stdout
    cases, suite = [], ""
    for line in out.splitlines():
        if not line.strip() or line.startswith("Running main"):
            continue
        if not line.startswith(" "):
            suite = line.split()[0]
        else:
            cases.append(suite + line.split()[0])
    return cases


def run_batch(binary, names, timeout, log):
    """Runs `names` in one process; returns ({name: (result, message)}, name running when it died or None)."""
    cmd = [binary, "--gtest_filter=" + ":".join(names)]
    start = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, errors="replace")
        text, died = p.stdout + p.stderr, p.returncode not in (0, 1)
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        died = "hang"
    log.write(f"---- batch of {len(names)} ({time.time() - start:.1f} s){' died: ' + str(died) if died else ''}\n")
    log.write(text)
    results, current, body = {}, None, []
    for line in text.splitlines():
        m = RUN.match(line)
        if m:
            current, body = m.group(1), []
            continue
        m = END.match(line)
        if m and current == m.group(2):
            results[current] = (m.group(1), "\n".join(body))
            current = None
            continue
        if current:
            body.append(line)
    running = current if (died and current) else None
    if running:
        results[running] = ("HANG" if died == "hang" else "CRASH", "\n".join(body[-40:]))
    return results, running


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--filter", default="*")
    ap.add_argument("--batch", type=int, default=400)
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--json")
    ap.add_argument("--log")
    ap.add_argument("--sanitize", type=int, default=0)
    ap.add_argument("--blocking", type=int, default=3)
    a = ap.parse_args()
    log = open(a.log, "a") if a.log else sys.stdout
    cases = list_cases(a.binary, a.filter)
    results, faults = {}, []
    pending = [cases[i:i + a.batch] for i in range(0, len(cases), a.batch)]
    while pending:
        names = pending.pop(0)
        got, running = run_batch(a.binary, names, a.timeout, log)
        # The first case that ended in a sticky error (or the one the process died in) taints the rest.
        fault = running
        for n in names:
            if n in got and got[n][0] == "FAILED" and STICKY.search(got[n][1]):
                fault = n
                break
        after = []
        if fault is not None:
            faults.append(fault)
            got.setdefault(fault, ("FAILED", "fault"))
            idx = names.index(fault)
            after = [n for n in names[idx + 1:]]
        for n in names:
            if n in got and n not in after:
                results[n] = got[n]
        missing = [n for n in names if n not in got and n not in after]
        rerun = after + missing
        if rerun and (fault is not None or missing):
            if fault is None and missing == names:  # nothing ran at all: do not loop
                for n in names:
                    results[n] = ("CRASH", "the batch produced no output")
            else:
                pending.insert(0, rerun)
    counts = {}
    for r, _ in results.values():
        counts[r] = counts.get(r, 0) + 1
    for n in cases:
        r, msg = results.get(n, ("MISSING", ""))
        if r not in ("OK", "SKIPPED"):
            first = next((l.strip() for l in msg.splitlines() if l.strip() and "Failure" not in l), "")
            print(f"{r:7s} {n}: {first[:300]}")
    for n in faults[:a.blocking]:
        log.write(f"---- CUDA_LAUNCH_BLOCKING=1 {n}\n")
        try:
            p = subprocess.run([a.binary, "--gtest_filter=" + n], capture_output=True, text=True, timeout=180,
                               errors="replace", env=dict(os.environ, CUDA_LAUNCH_BLOCKING="1"))
            out = p.stdout + p.stderr
        except subprocess.TimeoutExpired:
            out = "timed out"
        log.write(out[-20000:])
        named = [l.strip() for l in out.splitlines() if 'node "' in l and STICKY.search(l)]
        if named:
            print(f"blocking {n}: {named[0][:400]}")
        elif "[  PASSED  ] 1 test" in out:
            print(f"blocking {n}: passed when run alone (the fault did not recur)")
        else:
            print(f"blocking {n}: no node named; see the log")
    if a.sanitize and faults and shutil.which("compute-sanitizer"):
        for n in faults[:a.sanitize]:
            log.write(f"---- compute-sanitizer {n}\n")
            p = subprocess.run(["compute-sanitizer", "--tool", "memcheck", "--show-backtrace", "device",
                                a.binary, "--gtest_filter=" + n], capture_output=True, text=True, timeout=180,
                               errors="replace")
            log.write(p.stdout[-20000:] + p.stderr[-5000:])
            summary = [l for l in p.stdout.splitlines() if "Invalid" in l or "ERROR SUMMARY" in l][:6]
            print(f"sanitizer {n}: " + " | ".join(summary))
    print(f"{a.binary.split('/')[-1]}: " + ", ".join(f"{v} {k.lower()}" for k, v in sorted(counts.items())) +
          (f"; faults: {', '.join(faults)}" if faults else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cases": {n: {"result": r, "message": m[-2000:]} for n, (r, m) in results.items()},
                       "faults": faults}, f, indent=0)
    return 0 if all(r in ("OK", "SKIPPED") for r, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
