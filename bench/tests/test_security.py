"""Unit tests of the security table's driver (no misuse program runs): how a
run is classified from its signal, stderr and protocol lines, the totals,
the report section, the completeness check and the discovery of scudo."""
import os
import signal
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tenonbench import allocators, security  # noqa: E402

CALL = "MISUSE x\nCALL free 0x1000\n"
ACCESS = "MISUSE x\nACCESS write past the end of 0x1000\n"
DONE_ = "MISUSE x\nCALL free 0x1000\nDONE\n"
END = DONE_ + "END\n"


class ClassifyTest(unittest.TestCase):
    def c(self, rc, out, err="", timed_out=False):
        return security.classify(rc, timed_out, out, err, 10)

    def test_abort_with_message_is_caught(self):
        self.assertEqual(self.c(-signal.SIGABRT, CALL, "free(): double free detected\n"),
                         ("caught", "SIGABRT: free(): double free detected"))

    def test_abort_without_message_is_caught(self):
        self.assertEqual(self.c(-signal.SIGABRT, CALL), ("caught", "SIGABRT, no message"))
        self.assertEqual(self.c(-signal.SIGILL, DONE_)[0], "caught")

    def test_segv_with_message_is_caught(self):
        self.assertEqual(self.c(-signal.SIGSEGV, DONE_, "Scudo ERROR: x\n")[0], "caught")

    def test_fault_at_the_access_is_trapped(self):
        self.assertEqual(self.c(-signal.SIGSEGV, ACCESS), ("trapped", "SIGSEGV at the bad access"))
        self.assertEqual(self.c(-signal.SIGBUS, ACCESS)[0], "trapped")

    def test_fault_elsewhere_is_a_crash(self):
        self.assertEqual(self.c(-signal.SIGSEGV, CALL), ("crashed", "SIGSEGV in the bad call, no message"))
        self.assertEqual(self.c(-signal.SIGSEGV, DONE_), ("crashed", "SIGSEGV after the misuse, no message"))
        self.assertEqual(self.c(-signal.SIGSEGV, "MISUSE x\n")[0], "crashed")

    def test_hang_is_a_crash(self):
        outcome, detail = self.c(-signal.SIGKILL, CALL, timed_out=True)
        self.assertEqual(outcome, "crashed")
        self.assertIn("hung", detail)

    def test_corruption_then_hang_is_missed(self):
        outcome, detail = self.c(-signal.SIGKILL, END.replace("END", "CORRUPT x twice\nEND"), timed_out=True)
        self.assertEqual((outcome, detail), ("missed", "x twice; then hung"))

    def test_corruption_is_missed_even_when_stopped_later(self):
        out = END.replace("END", "CORRUPT malloc(8) returned 0x10 twice\nEND")
        self.assertEqual(self.c(0, out), ("missed", "malloc(8) returned 0x10 twice"))
        out = DONE_ + "CORRUPT malloc(8) returned 0x10 twice\n"
        outcome, detail = self.c(-signal.SIGABRT, out, "double free\n")
        self.assertEqual(outcome, "missed")
        self.assertIn("then SIGABRT: double free", detail)

    def test_normal_end(self):
        self.assertEqual(self.c(0, END), ("missed", "no report"))
        self.assertEqual(self.c(0, END + "NOTE answered 64\n"), ("missed", "answered 64"))
        self.assertEqual(self.c(0, END.replace("END", "DEFENDED answered 0\nEND")), ("caught", "answered 0"))
        self.assertEqual(self.c(0, END, "mimalloc: error: double free\n"),
                         ("caught", "reported and went on: mimalloc: error: double free"))

    def test_skip_and_errors(self):
        self.assertEqual(self.c(77, "MISUSE x\nSKIP no free_sized\n"), ("n/a", "no free_sized"))
        self.assertEqual(self.c(2, "MISUSE x\nNOTE setup failed: malloc returned NULL\n")[0], "error")
        self.assertEqual(self.c(1, "MISUSE x\n", "allocator: bad free\n"), ("caught", "exit 1: allocator: bad free"))


def fake_result():
    run = lambda o: {"outcome": o, "detail": o, "message": "msg: " + o if o == "caught" else "", "rc": 0}
    return {"cases": [{"name": "a", "group": "g", "about": "A"}, {"name": "b", "group": "g", "about": "B"}],
            "results": {"a": {"x": run("caught"), "y": run("missed")},
                        "b": {"x": run("trapped"), "y": run("n/a")}},
            "smoke": False}


class TableTest(unittest.TestCase):
    def test_totals(self):
        t = security.totals(fake_result(), ["x", "y"])
        self.assertEqual(t["x"]["caught"], 1)
        self.assertEqual(t["x"]["trapped"], 1)
        self.assertEqual(t["y"]["missed"], 1)
        self.assertEqual(t["y"]["n/a"], 1)

    def test_markdown(self):
        md = security.markdown(fake_result(), ["x", "y"])
        self.assertIn("| stopped (caught + trapped) | 2 | 0 |", md)
        self.assertIn("| `a` | g | caught | **missed** |", md)
        self.assertIn("- x: `msg: caught`", md)
        self.assertNotIn("| error |", md)  # no error row when nothing errored
        self.assertIn("| g | 2 | 2 | 0 |", md)  # by kind: x stopped both, y neither

    def test_check(self):
        self.assertEqual(security.check(fake_result(), ["x", "y"]), [])
        self.assertTrue(security.check(fake_result(), ["x", "z"]))
        r = fake_result()
        r["results"]["a"]["x"] = {"outcome": "error", "detail": "exit 2"}
        self.assertEqual(len(security.check(r, ["x", "y"])), 1)
        self.assertTrue(security.check(None, ["x"]))

    def test_csv(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.csv")
            security.write_csv(fake_result(), path)
            with open(path) as f:
                lines = f.read().splitlines()
        self.assertEqual(lines[0], "case,group,alloc,outcome,detail,rc")
        self.assertEqual(len(lines), 5)


class ScudoTest(unittest.TestCase):
    def test_newest_llvm_wins(self):
        with tempfile.TemporaryDirectory() as d:
            for v in ("9", "14", "16"):
                lib = os.path.join(d, f"llvm-{v}", "lib")
                os.makedirs(lib)
                open(os.path.join(lib, "libclang_rt.scudo_standalone-{arch}.so".format(arch="x")), "w").close()
            pattern = os.path.join(d, "llvm-*", "lib", "libclang_rt.scudo_standalone-{arch}.so")
            found = allocators.scudo([pattern.replace("{arch}", "x")])
            self.assertEqual(found, os.path.join(d, "llvm-16", "lib", "libclang_rt.scudo_standalone-x.so"))
            self.assertIsNone(allocators.scudo([os.path.join(d, "nothing-*.so")]))


if __name__ == "__main__":
    unittest.main()
