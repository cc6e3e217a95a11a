"""A training-like GPU workload for the agent's real-GPU check
(agent/realgpu_test.go, run by test/realgpu/run on a GPU machine).

It multiplies bf16 matrices in a loop (a "step" is 8 products), reports
its steps through ROTA_PROGRESS_FILE with contrib/python/rota_progress.py,
and on SIGUSR1 saves a checkpoint (a tensor to /tmp) and records it, as a
job Rota asks to checkpoint would.
"""

import os
import signal
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "contrib", "python"))
from rota_progress import Progress  # noqa: E402

wanted = False


def on_usr1(signum, frame):
    global wanted
    wanted = True


signal.signal(signal.SIGUSR1, on_usr1)
prog = Progress()
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
step, end = 0, time.time() + float(os.environ.get("WORKLOAD_SECONDS", "90"))
while time.time() < end:
    for _ in range(8):
        c = a @ b
    torch.cuda.synchronize()
    step += 1
    prog.step(step)
    if wanted:
        torch.save(c[:16, :16].cpu(), "/tmp/workload-ckpt.pt")
        prog.checkpointed(step)
        print("checkpointed at step", step, flush=True)
        wanted = False
