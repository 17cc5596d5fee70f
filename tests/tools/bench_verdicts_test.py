"""tools/bench_verdicts.py: when a row's rounds count as measured on a busy machine, the ratios paired by
round (against the hand-computed figures of docs/benchmarks.md's run M), and the verdict lines."""

import unittest

from tools import bench_verdicts as bv


def row(workload, threads, sps, torch_sps, **extra):
    r = {"workload": workload, "provider": "cpu", "threads": threads, "steps_per_s": sps,
         "pytorch_steps_per_s": torch_sps, "peak_rss_mb": 50.0, "pytorch_peak_rss_mb": 300.0,
         "allocs_per_step": 0.0}
    r.update(extra)
    return r


class NoisyRoundsTest(unittest.TestCase):
    def test_quiet_rounds_are_not_noisy(self):
        ours = [{"steps_per_s": v} for v in (100.0, 105.0, 119.0)]  # 1.19 apart
        self.assertFalse(bv.noisy_rounds(ours, [(20.0, 0), (21.0, 0)], [5.0, 5.5]))

    def test_one_engine_apart_by_more_than_the_spread_is_noisy(self):
        ours = [{"steps_per_s": v} for v in (100.0, 101.0)]
        self.assertTrue(bv.noisy_rounds(ours, [(20.0, 0), (20.0, 0)], [4.7, 11.4]))  # ORT's rounds
        self.assertTrue(bv.noisy_rounds(ours, [(24.8, 0), (20.5, 0)], []))  # PyTorch's: 1.21
        self.assertTrue(bv.noisy_rounds([{"steps_per_s": 96.7}, {"steps_per_s": 58.7}], [], []))

    def test_no_rounds_or_zeros_are_not_noisy(self):
        self.assertFalse(bv.noisy_rounds([{"steps_per_s": 50.0}], [], []))
        self.assertFalse(bv.noisy_rounds([{"steps_per_s": 50.0}, {"steps_per_s": 0.0}], [], []))


class PairedMedianTest(unittest.TestCase):
    def test_run_m_mobilenet_two_threads(self):
        # Each round's step (1000 / steps/s, ms) over ORT's forward (ms): 2.0099, 2.1400, 1.4975, 1.4611,
        # 3.5769; the median is the third of them sorted, 2.0099, where the medians of each engine give
        # (1000 / 60.0) / 5.145 = 3.24.
        ours = [96.7, 98.9, 58.7, 60.0, 57.5]
        ort = [5.145, 4.725, 11.376, 11.407, 4.862]
        self.assertAlmostEqual(bv.paired_median(ours, ort, lambda a, b: 1e3 / a / b), 2.0099, places=3)

    def test_even_count_averages_the_middle_two(self):
        self.assertAlmostEqual(bv.paired_median([4.0, 6.0, 8.0, 10.0], [2.0, 2.0, 2.0, 2.0], lambda a, b: a / b), 3.5)

    def test_missing_measurements_are_left_out(self):
        self.assertAlmostEqual(bv.paired_median([4.0, 0.0, 9.0], [2.0, 5.0, 3.0], lambda a, b: a / b), 2.5)
        self.assertIsNone(bv.paired_median([], [], lambda a, b: a / b))


class VerdictsTest(unittest.TestCase):
    def test_targets_held_short_and_out_of_reach(self):
        lines = bv.verdicts([row("mlp_large", 1, 235.7, 136.8, ratio_at_floor=2.08),
                             row("transformer", 1, 64.3, 47.7, ratio_at_floor=1.88),
                             row("resnet", 1, 18.1, 12.1)], ("mlp_large", "transformer"))
        self.assertEqual(lines[0], "PyTorch target (2x on the issue's four workloads, ahead on the others): held for 1 "
                         "of 3; short: mlp_large at 1 thread (1.72x, target 2x; cap 2.08), transformer at 1 thread "
                         "(1.35x, target 2x; cap 1.88: out of reach on this CPU)")

    def test_paired_ratios_are_named_where_they_hold(self):
        lines = bv.verdicts([row("mobilenet", 2, 60.0, 24.4, ratio_paired=2.76, step_over_ort_forward=3.24,
                                 step_over_ort_forward_paired=2.01),
                             row("gpt", 2, 10.0, 12.0, ratio_paired=0.9, step_over_ort_forward=3.5,
                                 step_over_ort_forward_paired=3.1)], ())
        self.assertIn("gpt at 2 threads (0.83x, ahead of PyTorch: 1x)", lines[0])
        self.assertNotIn("paired", lines[0])  # 0.9 paired does not hold either
        self.assertEqual(lines[1], "step <= 3x ONNX Runtime's forward: above 3 for mobilenet at 2 (3.24; 2.01 paired by "
                         "round), gpt at 2 (3.50)")
        short = bv.verdicts([row("cnn", 1, 100.0, 55.0, ratio_paired=2.1)], ("cnn",))[0]
        self.assertIn("cnn at 1 thread (1.82x, target 2x; 2.10x paired by round)", short)

    def test_threads_allocations_and_memory(self):
        lines = bv.verdicts([row("cnn", 1, 100.0, 30.0), row("cnn", 2, 90.0, 40.0, pool_choice="pool (...)"),
                             dict(row("mlp_small", 1, 3000.0, 1000.0), allocs_per_step=2.0, peak_rss_mb=400.0)],
                            ("cnn", "mlp_small"))
        self.assertIn("2 threads faster than 1: not for cnn (90.0 against 100.0 steps/s; pool tuning: pool (...))", lines)
        self.assertIn("heap allocations per step: not 0 for mlp_small", lines)
        self.assertIn("peak RSS at most PyTorch's: not for mlp_small", lines)


if __name__ == "__main__":
    unittest.main()
