"""Unit tests of the benchmark driver's arithmetic and parsing (no workloads
run): medians, spreads, normalisation, geometric means, metric lines, rows."""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tenonbench import report, runner, stats, workloads  # noqa: E402


def run(row, alloc, wall, rss=1000, ok=True, rep=0, metrics=None):
    return {"row": row, "alloc": alloc, "wall_s": wall, "user_s": wall / 2, "sys_s": wall / 4,
            "maxrss_kib": rss, "minflt": 10, "majflt": 0, "ok": ok, "rep": rep, "metrics": metrics or {}}


class StatsTest(unittest.TestCase):
    def setUp(self):
        w = workloads.WORKLOADS[0]
        self.rows = [(w, 2, "a"), (w, 16, "b")]
        self.runs = [run("a", "x", 1.0), run("a", "x", 3.0), run("a", "x", 2.0),
                     run("a", "y", 4.0, rss=2000), run("b", "x", 1.0), run("b", "y", 0.5),
                     run("b", "y", 9.0, ok=False)]

    def test_median_and_spread(self):
        s = stats.summarize(self.runs, self.rows, ["x", "y"])
        self.assertEqual(s["a"]["x"]["wall_s"], 2.0)
        self.assertAlmostEqual(s["a"]["x"]["spread_pct"], 100.0)  # (3 - 1) / 2
        self.assertEqual(s["a"]["x"]["cpu_s"], 1.5)
        self.assertEqual(s["b"]["y"]["n_ok"], 1)
        self.assertEqual(s["b"]["y"]["n_fail"], 1)
        self.assertEqual(s["b"]["y"]["wall_s"], 0.5)  # the failed run is not counted

    def test_normalise_and_geomean(self):
        s = stats.summarize(self.runs, self.rows, ["x", "y"])
        n = stats.normalise(s, "x", "wall_s")
        self.assertEqual(n["a"]["y"], 2.0)
        self.assertEqual(n["b"]["y"], 0.5)
        g = stats.geomeans(n, ["x", "y"])
        self.assertAlmostEqual(g["x"], 1.0)
        self.assertAlmostEqual(g["y"], math.sqrt(2.0 * 0.5))
        self.assertEqual(stats.normalise(s, "x", "rss_kib")["a"]["y"], 2.0)

    def test_missing_baseline_gives_none(self):
        s = stats.summarize(self.runs, self.rows, ["x", "y", "z"])
        n = stats.normalise(s, "z", "wall_s")
        self.assertIsNone(n["a"]["x"])

    def test_latency_table_takes_max_of_max(self):
        m1 = {"LAT": [{"op": "malloc", "unit": "cycles", "n": 5, "p50": 10, "max": 100,
                       **{p: 1 for p in stats.PERCENTILES[1:-1]}}]}
        m2 = {"LAT": [{"op": "malloc", "unit": "cycles", "n": 5, "p50": 30, "max": 50,
                       **{p: 1 for p in stats.PERCENTILES[1:-1]}}]}
        t = stats.latency_table([run("lat", "x", 1, metrics=m1), run("lat", "x", 1, metrics=m2)], "lat")
        self.assertEqual(t["x"]["malloc"]["p50"], 20)
        self.assertEqual(t["x"]["malloc"]["max"], 100)
        self.assertEqual(t["x"]["malloc"]["n"], 10)


class ParseTest(unittest.TestCase):
    def test_metric_lines(self):
        m = runner.parse_metrics("noise\nSIZE op=malloc bytes=2097152 ns_per_call=12.5\nOK x checksum=3\n")
        self.assertEqual(m["SIZE"], [{"op": "malloc", "bytes": 2097152, "ns_per_call": 12.5}])
        self.assertIn("OK", m)
        self.assertNotIn("noise", m)


class RowsTest(unittest.TestCase):
    def test_rows_and_select(self):
        ws = workloads.select(["larson,st-mixed", "latency"])
        labels = [label for _, _, label in workloads.rows(ws, [1, 64])]
        self.assertEqual(labels, ["larson/T1", "larson/T64", "st-mixed", "latency"])
        self.assertEqual(workloads.select(["fastpath-instr"]), [])
        with self.assertRaises(SystemExit):
            workloads.select(["no-such-workload"])

    def test_default_has_oversubscription(self):
        self.assertIn(16, workloads.DEFAULT_THREADS)
        self.assertIn(64, workloads.DEFAULT_THREADS)


class TableTest(unittest.TestCase):
    def test_alignment(self):
        t = report.md_table(["name", "value"], [["a", "1.00"], ["b", "-"]])
        self.assertIn("|---|---:|", t)
        t = report.md_table(["name", "path"], [["a", "/x/y"]])
        self.assertIn("|---|---|", t)


if __name__ == "__main__":
    unittest.main()
