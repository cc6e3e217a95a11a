"""Report training progress to Rota's node agent. No dependencies.

The SPANK plugin sets ROTA_PROGRESS_FILE for every job. Call step() once
per training step (it writes at most once a second); after saving a
checkpoint call checkpointed(step) so the agent can acknowledge a
checkpoint command. Outside a Rota job (no ROTA_PROGRESS_FILE) both do
nothing.

    from rota_progress import Progress
    prog = Progress(total=50_000)
    for step in range(start, 50_000):
        train_step()
        prog.step(step + 1)

File format (one line, key=value pairs, see docs/agent.md):

    step=<n> [ckpt=<n>] [total=<n>] [time=<unix seconds>]

The file is replaced atomically (write a temporary file, then rename), so
the agent never sees half a line.

With PyTorch Lightning: trainer = Trainer(callbacks=[RotaProgressCallback()]).
The agent's checkpoint signal (SIGUSR1 by default) is handled by Lightning's
own SLURM plugin or by your code; RotaProgressCallback records every saved
checkpoint so the agent sees it acknowledged.
"""

import os
import time

__all__ = ["Progress", "RotaProgressCallback", "format_line"]


def format_line(step, ckpt=None, total=None, now=None):
    """The progress line for these values."""
    parts = ["step=%d" % int(step)]
    if ckpt is not None:
        parts.append("ckpt=%d" % int(ckpt))
    if total:
        parts.append("total=%d" % int(total))
    parts.append("time=%.3f" % (time.time() if now is None else now))
    return " ".join(parts) + "\n"


class Progress:
    """Writes ROTA_PROGRESS_FILE (or path) at most every min_interval s."""

    def __init__(self, path=None, total=None, min_interval=1.0):
        self.path = path if path is not None else os.environ.get("ROTA_PROGRESS_FILE")
        self.total = total
        self.min_interval = min_interval
        self.ckpt = None
        self._last_write = 0.0
        self._step = 0

    def step(self, n, force=False):
        """Record that n steps are done."""
        self._step = int(n)
        now = time.time()
        if force or now - self._last_write >= self.min_interval:
            self._write(now)

    def checkpointed(self, step=None):
        """Record a completed checkpoint at step (default: the last step)."""
        self.ckpt = self._step if step is None else int(step)
        self._write(time.time())

    def _write(self, now):
        if not self.path:
            return
        tmp = "%s.tmp.%d" % (self.path, os.getpid())
        try:
            with open(tmp, "w") as f:
                f.write(format_line(self._step, self.ckpt, self.total, now))
            os.replace(tmp, self.path)
            self._last_write = now
        except OSError:
            # Progress is advisory: never break training over it.
            try:
                os.unlink(tmp)
            except OSError:
                pass


try:  # PyTorch Lightning is optional.
    try:
        from lightning.pytorch.callbacks import Callback as _Callback
    except ImportError:
        from pytorch_lightning.callbacks import Callback as _Callback
except ImportError:
    _Callback = object


class RotaProgressCallback(_Callback):
    """Lightning callback: reports global_step and saved checkpoints."""

    def __init__(self, path=None, min_interval=1.0):
        super().__init__()
        self.progress = Progress(path=path, min_interval=min_interval)

    def on_train_start(self, trainer, pl_module):
        max_steps = getattr(trainer, "max_steps", -1) or -1
        self.progress.total = max_steps if max_steps > 0 else None
        self.progress.step(trainer.global_step, force=True)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.progress.step(trainer.global_step)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        self.progress.checkpointed(trainer.global_step)
