"""python3 -m unittest discover contrib/python"""
import os
import tempfile
import unittest

from rota_progress import Progress, format_line


class ProgressTest(unittest.TestCase):
    def test_line(self):
        self.assertEqual(format_line(5, 4, 100, now=12.5), "step=5 ckpt=4 total=100 time=12.500\n")
        self.assertEqual(format_line(5, now=1), "step=5 time=1.000\n")

    def test_writes_atomically_and_throttles(self):
        d = tempfile.mkdtemp()
        p = os.path.join(d, "progress")
        prog = Progress(path=p, total=10, min_interval=3600)
        prog.step(1)
        prog.step(2)  # throttled
        with open(p) as f:
            self.assertTrue(f.read().startswith("step=1 total=10 "))
        prog.checkpointed()
        with open(p) as f:
            self.assertTrue(f.read().startswith("step=2 ckpt=2 total=10 "))
        self.assertEqual(os.listdir(d), ["progress"])

    def test_no_file_outside_rota(self):
        os.environ.pop("ROTA_PROGRESS_FILE", None)
        Progress().step(1)  # no error, nothing written


if __name__ == "__main__":
    unittest.main()
