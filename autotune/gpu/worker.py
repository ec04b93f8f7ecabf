"""The GPU worker process: it owns the CUDA context, so a candidate that faults kills only it.

The worker is then replaced and the search goes on. The parent side (`Worker`) imports no CuPy;
the child imports `autotune.gpu.runner` when it starts, and answers calls ({"op": a Runner
method, "args": ...}) over a pipe.
"""

from __future__ import annotations

import multiprocessing as mp

from ..core.types import Status


def serve(conn, device_id: int) -> None:  # pragma: no cover - runs on a GPU machine
    """Run the child's main loop: one Runner on `device_id`, one call per message until "stop"."""
    try:
        from .runner import _CUDA_ERRORS, FatalGPUError, Runner

        runner = Runner(device_id)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
        conn.send({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    conn.send({"ok": True, "result": runner.info})
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg["op"] == "stop":
            return
        try:
            conn.send({"ok": True, "result": getattr(runner, msg["op"])(**msg["args"])})
        except (FatalGPUError, *_CUDA_ERRORS) as exc:
            conn.send({"ok": False, "fatal": True, "error": str(exc)})
            return  # the context is gone; the parent starts a new worker
        except Exception as exc:  # noqa: BLE001 - a failed call is the candidate's, told to the parent
            conn.send({"ok": False, "error": f"{type(exc).__name__}: {exc}"})


class WorkerLost(Exception):
    """The worker faulted, died or timed out; `status` says which."""

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status


class Worker:
    """A GPU worker process with a per-call timeout; replaced after a fault or hang."""

    def __init__(self, device_id: int = 0, start_timeout_s: float = 180.0):
        self.device_id = device_id
        self.start_timeout_s = start_timeout_s
        self._ctx = mp.get_context("spawn")
        self._setup: dict | None = None
        self.restarts = 0
        self.info = self._start()

    def _start(self) -> dict:
        parent, child = self._ctx.Pipe()
        self.proc = self._ctx.Process(target=serve, args=(child, self.device_id), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        if not parent.poll(self.start_timeout_s):
            self._kill()
            raise RuntimeError("GPU worker did not start")
        msg = parent.recv()
        if not msg["ok"]:
            self._kill()
            raise RuntimeError(f"GPU worker failed to start: {msg['error']}")
        if self._setup is not None:
            self._call("setup", self._setup, self.start_timeout_s)
        return msg["result"]

    def _kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)
        self.conn.close()

    def _replace(self) -> None:
        self._kill()
        self.restarts += 1
        self.info = self._start()

    def _call(self, op: str, args: dict, timeout_s: float) -> dict:
        try:
            self.conn.send({"op": op, "args": args})
            ready = self.conn.poll(timeout_s)
        except (BrokenPipeError, EOFError, OSError):
            ready = None
        if ready is None or ready is False:
            status, why = (
                (Status.TIMEOUT, f"no answer in {timeout_s:.0f} s")
                if ready is False
                else (Status.LAUNCH_FAILED, "worker died")
            )
            self._replace()
            raise WorkerLost(status, why)
        try:
            msg = self.conn.recv()
        except (EOFError, OSError):
            self._replace()
            raise WorkerLost(Status.LAUNCH_FAILED, f"worker died (exit code {self.proc.exitcode})") from None
        if msg["ok"]:
            return msg["result"]
        if msg.get("fatal"):
            self._replace()
            raise WorkerLost(Status.LAUNCH_FAILED, msg["error"])
        raise RuntimeError(msg["error"])

    def setup(self, args: dict, timeout_s: float) -> dict:
        """Send the Runner its setup (kept, and sent again to a replacement worker)."""
        self._setup = args
        return self._call("setup", args, timeout_s)

    def call(self, op: str, timeout_s: float, **args) -> dict:
        """Call Runner method `op` with `args` in the worker and return its result.

        Raises:
            WorkerLost: The worker faulted, died or gave no answer in `timeout_s`; it was replaced.
            RuntimeError: The call raised an error in the worker, which lives on.
        """
        return self._call(op, args, timeout_s)

    def close(self) -> None:
        """Stop the worker process."""
        try:
            self.conn.send({"op": "stop", "args": {}})
            self.proc.join(5)
        except (BrokenPipeError, OSError):
            pass
        self._kill()
