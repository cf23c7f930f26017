"""Run one mpi4py test module on this rank; write this rank's per-test outcomes as JSON.

Usage (under a launcher): python rank_runner.py TESTDIR MODULE OUTDIR
Writes OUTDIR/MODULE.rank<R>.json = {"rank", "size", "library", "tests": {id: status}}
with status one of pass, fail, error, skip, xfail, xpass; and the unittest -v text on
OUTDIR/MODULE.rank<R>.log. A rank that crashes or hangs writes no JSON (run.sh counts it).
"""
import json
import os
import sys
import time
import unittest


class Recorder(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcome = {}

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcome.setdefault(test.id(), "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcome[test.id()] = "fail"

    def addError(self, test, err):
        super().addError(test, err)
        # errors in setUpClass/setUpModule come as _ErrorHolder "tests"
        self.outcome[getattr(test, "id", lambda: str(test))()] = "error"

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcome[test.id()] = "skip"

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.outcome[test.id()] = "xfail"

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.outcome[test.id()] = "xpass"

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            bad = "fail" if issubclass(err[0], test.failureException) else "error"
            if self.outcome.get(test.id()) != "error":
                self.outcome[test.id()] = bad


def loaded_libmpi():
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "libmpi_abi" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return None


def main():
    testdir, module, outdir = sys.argv[1:4]
    outdir = os.path.abspath(outdir)
    sys.path.insert(0, testdir)
    os.chdir(testdir)
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    size = MPI.COMM_WORLD.Get_size()
    base = os.path.join(outdir, f"{module}.rank{rank}")
    with open(base + ".log", "w") as log:
        suite = unittest.defaultTestLoader.loadTestsFromName(module)
        runner = unittest.TextTestRunner(stream=log, verbosity=2, resultclass=Recorder)
        t0 = time.time()
        result = runner.run(suite)
        elapsed = time.time() - t0
    data = {
        "rank": rank,
        "size": size,
        "library": loaded_libmpi(),
        "version": MPI.Get_library_version().splitlines()[0] if rank == 0 else None,
        "elapsed": round(elapsed, 2),
        "tests": result.outcome,
    }
    with open(base + ".json.tmp", "w") as f:
        json.dump(data, f)
    os.replace(base + ".json.tmp", base + ".json")


if __name__ == "__main__":
    main()
