"""Unit tests of the benchmark driver's arithmetic and parsing (no workloads
run): medians, spreads, normalisation, geometric means, metric lines, rows."""
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tenonbench import allocators, load, report, runner, stats, traces, workloads  # noqa: E402


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


class PairedTest(unittest.TestCase):
    """tenon's time over a peer's in the same repeat, median over repeats."""

    def setUp(self):
        w = workloads.WORKLOADS[0]
        self.rows = [(w, 2, "a"), (w, 16, "b")]
        # Repeat 1 ran on a loaded machine: both slower, the paired ratio holds.
        self.runs = [run("a", "tenon", 1.0, rep=0), run("a", "x", 2.0, rep=0),
                     run("a", "tenon", 3.0, rep=1), run("a", "x", 6.0, rep=1),
                     run("a", "tenon", 1.2, rep=2), run("a", "x", 2.0, rep=2),
                     run("b", "tenon", 2.0, rep=0), run("b", "x", 1.0, rep=0),
                     run("b", "tenon", 9.0, rep=1, ok=False), run("b", "x", 1.0, rep=1),
                     run("b", "tenon", 4.0, rep=2), run("b", "x", 1.0, rep=2)]

    def test_per_repeat_ratio_and_median(self):
        p = stats.paired_ratios(self.runs, self.rows, "tenon", ["x"])
        self.assertEqual(p["a"]["x"]["ratios"], [0.5, 0.5, 0.6])
        self.assertAlmostEqual(p["a"]["x"]["median"], 0.5)
        self.assertAlmostEqual(p["a"]["x"]["spread_pct"], 20.0)  # (0.6 - 0.5) / 0.5
        # The failed repeat gives no ratio; the other two do.
        self.assertEqual(p["b"]["x"]["ratios"], [2.0, 4.0])
        self.assertAlmostEqual(p["b"]["x"]["median"], 3.0)

    def test_paired_is_steadier_than_ratio_of_medians(self):
        s = stats.summarize(self.runs, self.rows, ["tenon", "x"])
        unpaired = stats.ratio_of_medians(s, "tenon", ["x"])
        self.assertAlmostEqual(unpaired["a"]["x"], 1.2 / 2.0)  # medians from different repeats
        self.assertAlmostEqual(unpaired["b"]["x"], 3.0 / 1.0)

    def test_cpu_time_and_geomean(self):
        p = stats.paired_ratios(self.runs, self.rows, "tenon", ["x"], "cpu_s")
        self.assertEqual(p["a"]["x"]["ratios"], [0.5, 0.5, 0.6])  # user+sys is 3/4 of wall in run()
        g = stats.geomeans(stats.paired_medians(p), ["x"])
        self.assertAlmostEqual(g["x"], math.sqrt(0.5 * 3.0))

    def test_missing_peer_gives_none(self):
        p = stats.paired_ratios(self.runs, self.rows, "tenon", ["y"])
        self.assertEqual(p["a"]["y"]["ratios"], [])
        self.assertIsNone(p["a"]["y"]["median"])
        self.assertIsNone(stats.geomeans(stats.paired_medians(p), ["y"])["y"])

    def test_report_rows(self):
        paired_t = stats.paired_ratios(self.runs, self.rows, "tenon", ["x"])
        paired_c = stats.paired_ratios(self.runs, self.rows, "tenon", ["x"], "cpu_s")
        unpaired = stats.ratio_of_medians(stats.summarize(self.runs, self.rows, ["tenon", "x"]), "tenon", ["x"])
        header, rows, gm = report.paired_rows(paired_t, paired_c, unpaired, ["x"])
        self.assertEqual(header, ["workload", "x", "max spread"])
        self.assertEqual(rows[0], ["a", "0.50", "20%"])
        self.assertEqual(rows[1], ["b", "3.00", "67%"])
        self.assertEqual(rows[2][0], "geomean paired time")
        self.assertAlmostEqual(gm["time"]["x"], math.sqrt(1.5))
        self.assertAlmostEqual(gm["medians"]["x"], math.sqrt(0.6 * 3.0))


class LoadTest(unittest.TestCase):
    STAT = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\nintr 1\n"

    def test_parse_proc_stat(self):
        s = load.parse_proc_stat(self.STAT)
        self.assertEqual(s, {"busy": 150, "idle": 850, "steal": 0, "total": 1000})
        self.assertIsNone(load.parse_proc_stat("intr 1\n"))

    def test_busy_share_split_into_own_and_other(self):
        start = {"time": 0.0, "cpus": 2, "usable_cpus": 2, "loadavg": [1.0, 1.0, 1.0],
                 "stat": {"busy": 0, "idle": 0, "steal": 0, "total": 0}}
        end = {"time": 10.0, "cpus": 2, "usable_cpus": 2, "loadavg": [3.0, 2.0, 1.0],
               "stat": {"busy": 1500, "idle": 400, "steal": 100, "total": 2000}}
        s = load.summarize(start, end, workload_cpu_s=6.0)  # 6 of the 20 CPU-seconds
        self.assertAlmostEqual(s["busy_pct"], 75.0)
        self.assertAlmostEqual(s["steal_pct"], 5.0)
        self.assertAlmostEqual(s["own_pct"], 30.0)
        self.assertAlmostEqual(s["other_pct"], 45.0)
        lines, _ = load.describe(start, end, 6.0)
        self.assertIn("on 2 CPUs", lines["load at start"])
        self.assertTrue(lines["load at end"].startswith("3.00 / 2.00 / 1.00"))
        self.assertIn("75% busy", lines["CPU use over the timed runs"])

    def test_no_proc_stat(self):
        s = load.summarize({"time": 0.0, "stat": None}, {"time": 1.0, "stat": None}, 1.0)
        self.assertNotIn("busy_pct", s)


class SourcePeersTest(unittest.TestCase):
    def test_built_skipped_and_not_built(self):
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "peers"))
            for name, text in (("mimalloc3.so", ""), ("mimalloc3.version", "mimalloc 3.3.2\n"),
                               ("snmalloc.skipped", "CMake build failed\n")):
                with open(os.path.join(d, "peers", name), "w") as f:
                    f.write(text)
            found, skipped = allocators.source_peers(d)
            self.assertEqual([(a.name, a.version) for a in found], [("mimalloc3", "mimalloc 3.3.2")])
            why = dict(skipped)
            self.assertEqual(why["snmalloc"], "CMake build failed")
            self.assertIn("build-peers.sh", why["rpmalloc"])
            self.assertEqual(set(why), set(allocators.SOURCE_PEERS) - {"mimalloc3"})


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


class MeasureRowsTest(unittest.TestCase):
    """op-size, thread-scaling and the replay rows."""

    def test_op_size_and_scaling_tables(self):
        m1 = {"OPSIZE": [{"op": "malloc", "bytes": 1024, "ns_per_call": 10.0},
                         {"op": "free", "bytes": 1024, "ns_per_call": 4.0}],
              "SCALE": [{"threads": 1, "ns_per_op": 50.0}, {"threads": 2, "ns_per_op": 30.0}]}
        m2 = {"OPSIZE": [{"op": "malloc", "bytes": 1024, "ns_per_call": 30.0}],
              "SCALE": [{"threads": 1, "ns_per_op": 70.0}]}
        runs = [run("r", "x", 1, metrics=m1), run("r", "x", 1, metrics=m2), run("r", "y", 1, ok=False, metrics=m2)]
        t = stats.op_size_table(runs, "r")
        self.assertEqual(t["x"][("malloc", 1024)], 20.0)
        self.assertEqual(t["x"][("free", 1024)], 4.0)
        self.assertNotIn("y", t)  # failed runs do not count
        s = stats.scaling_table(runs, "r")
        self.assertEqual(s["x"], {1: 60.0, 2: 30.0})

    def test_replay_row_measures_the_replay_alone(self):
        r = {"wall_s": 2.0, "maxrss_kib": 90000}
        traces.replay_only(r, {"REPLAY": [{"wall_s": 0.5, "replay_rss_kib": 30000, "peak_reset": 1}]})
        self.assertEqual((r["wall_s"], r["maxrss_kib"]), (0.5, 30000))
        self.assertEqual((r["process_wall_s"], r["process_maxrss_kib"]), (2.0, 90000))
        r = {"wall_s": 2.0, "maxrss_kib": 90000}
        traces.replay_only(r, {"REPLAY": [{"wall_s": 0.5, "replay_rss_kib": 30000, "peak_reset": 0}]})
        self.assertEqual((r["wall_s"], r["maxrss_kib"]), (0.5, 90000))  # no peak reset: the process's RSS
        self.assertEqual(stats.trace_info([run("t", "x", 1, metrics={"TRACE": [{"calls": 7}]})], "t"), {"calls": 7})

    def test_replay_rows_run_tenon_replay_on_their_trace(self):
        ws = workloads.select(["replay-python,replay-g++,replay-sqlite"])
        self.assertEqual([w.trace for w in ws], ["python", "g++", "sqlite"])
        self.assertTrue(all(w.trace in traces.RECIPES for w in ws))
        cmd = workloads.command(ws[2], None, True, "/b", "/src")
        self.assertEqual(cmd, ["/b/src/measure/tenon-replay", "/b/bench/traces/smoke/sqlite.trace"])

    def test_traces_are_recorded_once_and_missing_tools_skipped(self):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "src", "measure"))
            lib = os.path.join(d, "src", "measure", "libtenon-trace.so")
            with open(lib, "w") as f:
                f.write("not really a library")
            saved = dict(traces.RECIPES)
            try:
                traces.RECIPES["none"] = traces.Recipe("none", "no-such-tool-here", "no-such-package", ["true"], [], [])
                traces.RECIPES["cached"] = traces.Recipe("cached", "sh", "dash", ["sh", "-c", "echo v1"],
                                                         ["sh", "-c", "exit 1"], ["sh", "-c", "exit 1"])
                os.makedirs(traces.trace_dir(d, True))
                with open(traces.trace_path(d, True, "cached"), "w") as f:
                    f.write("trace")
                with open(os.path.join(traces.trace_dir(d, True), "cached.recipe"), "w") as f:
                    f.write(traces._recipe_text(traces.RECIPES["cached"], True, lib))
                log = open(os.devnull, "w")
                got = traces.prepare(d, True, ["none", "cached"], log=log)
                self.assertIn("apt-get install no-such-package", got["none"])
                self.assertEqual(got["cached"], "")  # reused: recording it would have failed
                with open(lib, "a") as f:
                    f.write(" changed")  # another trace library: recorded again (and here it fails)
                self.assertIn("exited 1", traces.prepare(d, True, ["cached"], log=log)["cached"])
                log.close()
            finally:
                traces.RECIPES.clear()
                traces.RECIPES.update(saved)


class TableTest(unittest.TestCase):
    def test_alignment(self):
        t = report.md_table(["name", "value"], [["a", "1.00"], ["b", "-"]])
        self.assertIn("|---|---:|", t)
        t = report.md_table(["name", "path"], [["a", "/x/y"]])
        self.assertIn("|---|---|", t)


if __name__ == "__main__":
    unittest.main()
