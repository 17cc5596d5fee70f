"""What the provider benchmark (tools/bench_workloads.py) concludes from its measurements, apart from the
measuring (and from PyTorch, so that tests/tools/bench_verdicts_test.py runs without it): whether a row's
rounds were measured on a busy machine, the ratios paired by round, and the verdict per target."""

import statistics


# Rounds of one engine that differ by more than this (fastest over slowest) mark a row as measured while the
# machine was busy: --max-rounds measures more of them.
NOISY_SPREAD = 1.2


def noisy_rounds(ours_rounds, torch_rounds, ort_rounds):
    """Whether some engine's rounds so far are further apart than NOISY_SPREAD."""
    def spread(values):
        values = [v for v in values if v > 0]
        return max(values) / min(values) if values else 1.0
    return max(spread([r["steps_per_s"] for r in ours_rounds]), spread([t[0] for t in torch_rounds]),
               spread(ort_rounds)) > NOISY_SPREAD


def paired_median(ours, reference, ratio):
    """The median over rounds of ratio(ours, reference) taken within each round: measurements next to each
    other in time, so a busy stretch of the machine that slows both engines' rounds cancels."""
    values = [ratio(a, b) for a, b in zip(ours, reference) if a > 0 and b > 0]
    return statistics.median(values) if values else None


def verdicts(records, issue_workloads):
    """Lines saying, for the CPU rows, which of the issue's targets held in this run and which did not,
    and where a ratio target is out of reach on this CPU (PyTorch's step over the matrix floor, the cap,
    is below it)."""
    cpu = [r for r in records if r["provider"] == "cpu"]
    lines = []
    if any("pytorch_steps_per_s" in r for r in cpu):
        held, short = [], []
        for r in cpu:
            if "pytorch_steps_per_s" not in r:
                continue
            want = 2.0 if r["workload"] in issue_workloads else 1.0
            ratio = r["steps_per_s"] / r["pytorch_steps_per_s"]
            what = "%s at %d thread%s" % (r["workload"], r["threads"], "" if r["threads"] == 1 else "s")
            if ratio >= want:
                held.append(what)
                continue
            why = "%.2fx, %s %.0fx" % (ratio, "target" if want > 1 else "ahead of PyTorch:", want)
            if r.get("ratio_paired") is not None and r["ratio_paired"] >= want:
                why += "; %.2fx paired by round" % r["ratio_paired"]
            if "ratio_at_floor" in r:
                cap = r["ratio_at_floor"]
                why += "; cap %.2f%s" % (cap, ": out of reach on this CPU" if cap < want else "")
            short.append("%s (%s)" % (what, why))
        lines.append("PyTorch target (2x on the issue's four workloads, ahead on the others): held for %d of %d%s" %
                     (len(held), len(held) + len(short), "; short: " + ", ".join(short) if short else ""))
    def paired_note(r):
        p = r.get("step_over_ort_forward_paired")
        return "" if p is None or p > 3.0 else "; %.2f paired by round" % p
    over = ["%s at %d (%.2f%s)" % (r["workload"], r["threads"], r["step_over_ort_forward"], paired_note(r)) for r in cpu
            if r.get("step_over_ort_forward", 0) > 3.0]
    if any("step_over_ort_forward" in r for r in cpu):
        lines.append("step <= 3x ONNX Runtime's forward: %s" % ("held everywhere" if not over else "above 3 for " + ", ".join(over)))
    by = {(r["workload"], r["threads"]): r["steps_per_s"] for r in cpu}
    pool = {r["workload"]: r["pool_choice"] for r in cpu if r["threads"] == 2 and "pool_choice" in r}
    slower = ["%s (%.1f against %.1f steps/s%s)" % (w, by[(w, 2)], by[(w, 1)], "; pool tuning: " + pool[w] if w in pool else "")
              for w, t in by if t == 1 and (w, 2) in by and by[(w, 2)] <= by[(w, 1)]]
    if any(t == 2 for _, t in by):
        lines.append("2 threads faster than 1: %s" % ("everywhere" if not slower else "not for " + ", ".join(slower)))
    allocs = [r["workload"] for r in cpu if r["allocs_per_step"] > 0]
    lines.append("heap allocations per step: %s" % ("0 everywhere" if not allocs else "not 0 for " + ", ".join(allocs)))
    rss = [r["workload"] for r in cpu if "pytorch_peak_rss_mb" in r and r["peak_rss_mb"] > r["pytorch_peak_rss_mb"]]
    if any("pytorch_peak_rss_mb" in r for r in cpu):
        lines.append("peak RSS at most PyTorch's: %s" % ("everywhere" if not rss else "not for " + ", ".join(rss)))
    return lines
