"""The decode step on the GPU: its kernels compiled by CuPy, captured once as a CUDA graph, replayed per token.

A CUDA graph is a recording of kernel launches that the GPU replays from one host call: one launch per
token instead of 5L + 4 (5L + 5 with top-k or top-p), and the host never waits for the device in between.
CuPy records a graph by stream capture:

    with stream:
        step.enqueue(launch)          warm-up, with state[DONE] = 1: every kernel compiled and loaded, none runs
        stream.begin_capture(); step.enqueue(launch); graph = stream.end_capture()
        per token: graph.launch(stream)             every 16 tokens: read state (the only wait)

What a capture cannot hold (CuPy refuses cuBLAS, cuRAND and host copies inside one, and a value
passed to a kernel is frozen into the graph) is why the step is written as it is (decode_step.py):
its own matrix–vector kernels, the token and the position in device memory, sampling on the device.
Nothing may be allocated inside the capture: the pool would hand that memory to someone else while the
graph still writes it, so `capture` checks that the pool's bytes in use did not change.

Runners, one interface (`run(first, n_prompt)` yields the new ids in chunks) for four ways to run a step:
    "graph"     CuPy: the CUDA graph                 "kernels"   CuPy: the same kernels launched one by one
    "recorded"  NumPy: the twins, replayed from a recording (a CUDA graph's model on the CPU)
    "twins"     NumPy: the twins, launched one by one
"""
from __future__ import annotations

import contextlib
import ctypes
import time

import numpy as np

from ..backend import import_cupy
from .decode_plan import DONE, KERNEL_DIR, KERNELS, STEP, TOK
from .decode_step import RecordingLauncher, TwinLauncher

__all__ = ["CupyLauncher", "StepRunner", "RUNNERS", "CHUNK", "graph_kernel_nodes"]

CHUNK = 16  # tokens between two looks at the device state: an end token is seen within 16 steps
RUNNERS = ("graph", "kernels", "recorded", "twins")
KERNEL_NODE = 0  # the driver's CU_GRAPH_NODE_TYPE_KERNEL


def cuda_driver():  # -> the CUDA driver's library, through ctypes
    return ctypes.CDLL("libcuda.so.1")


def graph_kernel_nodes(graph) -> int:
    """Kernel nodes in a captured CUDA graph, asked of the driver: cuGraphGetNodes (the count, then the
    nodes) and cuGraphNodeGetType of each. CuPy's Graph holds its cudaGraph_t, the driver's CUgraph, as `.graph`."""
    cuda, handle, n = cuda_driver(), ctypes.c_void_p(graph.graph), ctypes.c_size_t(0)
    _ok(cuda.cuGraphGetNodes(handle, None, ctypes.byref(n)), "cuGraphGetNodes")
    nodes = (ctypes.c_void_p * n.value)()
    _ok(cuda.cuGraphGetNodes(handle, nodes, ctypes.byref(n)), "cuGraphGetNodes")
    kind, count = ctypes.c_int(), 0
    for node in nodes[:n.value]:
        _ok(cuda.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind)), "cuGraphNodeGetType")
        count += kind.value == KERNEL_NODE
    return count


def _ok(result: int, call: str) -> None:
    if result != 0:
        raise RuntimeError(f"{call} failed with CUresult {result}")


class CupyLauncher:
    """Launches a step's kernels with CuPy, each .cu file compiled once (NVRTC) per process (`shared()`)."""
    _shared = None

    def __init__(self):
        self.cp, self.functions = import_cupy(), {}

    @classmethod
    def shared(cls) -> "CupyLauncher":  # one per process: its compiled kernels serve every step
        if cls._shared is None:
            cls._shared = cls()
        return cls._shared

    def function(self, name: str):
        if name not in self.functions:
            source = (KERNEL_DIR / KERNELS[name][0]).read_text()
            module = self.cp.RawModule(code=source, options=(f"-I{KERNEL_DIR}",))
            self.functions[name] = module.get_function(f"decode_{name}")
        return self.functions[name]

    def __call__(self, spec, *args):
        self.function(spec.name)(spec.grid, spec.block, args, shared_mem=spec.shared_bytes)


class StepRunner:
    """Runs a DecodeStep token after token in one of RUNNERS (see the module docstring).

    `run(first, n_prompt)` starts from the first new id (chosen from the prefill) and yields lists of
    the ids that follow, CHUNK steps at a time, until state[DONE]; `seconds` holds each chunk's time.
    """

    def __init__(self, step, kind: str = "graph"):
        if kind not in RUNNERS:
            raise ValueError(f"kind must be one of {RUNNERS}, got {kind!r}")
        self.step, self.kind, self.graph, self.seconds = step, kind, None, []
        on_gpu = kind in ("graph", "kernels")
        self.launch = CupyLauncher.shared() if on_gpu else TwinLauncher()
        self.stream = self.launch.cp.cuda.Stream(non_blocking=True) if on_gpu else None
        if kind == "graph":
            self.capture()
        elif kind == "recorded":
            recording = RecordingLauncher()
            step.enqueue(recording)
            self.graph = recording

    def capture(self):
        """Warm up (state[DONE] = 1: the kernels load, none does anything), then record the step as a CUDA graph."""
        cp, step, stream = self.launch.cp, self.step, self.stream
        with stream:
            step.state[DONE] = 1
            step.enqueue(self.launch)  # compiles and loads every kernel: nothing of that may happen in a capture
            stream.synchronize()
            pool = cp.get_default_memory_pool()
            used = pool.used_bytes()
            stream.begin_capture()
            step.enqueue(self.launch)
            self.graph = stream.end_capture()
            if pool.used_bytes() != used:
                raise RuntimeError(f"the decode step allocated {pool.used_bytes() - used} bytes while captured")
            self.graph.upload(stream)

    @property
    def kernels_per_step(self) -> int:
        """Kernel nodes in the captured graph (CuPy), or launches in the recording."""
        if self.kind == "graph":
            return graph_kernel_nodes(self.graph)
        recording = RecordingLauncher()
        self.step.enqueue(recording)
        return len(recording.calls)

    def _one_step(self):
        if self.kind == "graph":
            self.graph.launch(self.stream)
        elif self.kind == "recorded":
            self.graph.replay(self.launch)
        else:
            with self._on_stream():
                self.step.enqueue(self.launch)

    def _on_stream(self):  # every write of the state and every read goes on the step's stream, in order
        return self.stream if self.stream is not None else contextlib.nullcontext()

    def _host(self, a):  # -> a NumPy copy: waits for the step's stream on a GPU
        return a.get(stream=self.stream) if hasattr(a, "get") else np.array(a)

    def teacher_forced(self, ids, n_prompt: int):  # -> [len(ids) − 1, v] NumPy
        """Each step's logits when fed ids[k − 1] (not its own choice) at position n_prompt + k − 1: a path
        compared with another step by step, whatever either would have sampled."""
        out = []
        with self._on_stream():
            self.step.start(int(ids[0]), n_prompt)
            for k in range(1, len(ids)):
                self.step.state[TOK] = int(ids[k - 1])
                self._one_step()
                out.append(self._host(self.step.buf["logits"]))
        return np.array(out)

    def run(self, first: int, n_prompt: int):
        """Yields lists of new ids (after `first`), CHUNK steps at a time, until the step says it is done."""
        step, seen = self.step, 1  # out[0] = first
        with self._on_stream():
            done, self.seconds = step.start(first, n_prompt), []
        while not done:
            t0 = time.perf_counter()
            for _ in range(min(CHUNK, step.sizes.max_new - seen)):
                self._one_step()  # a step after the end does nothing: each kernel reads state[DONE] first
            state = self._host(step.state)  # [4]: the only wait
            new = [int(i) for i in self._host(step.out[seen:int(state[STEP])])]
            self.seconds.append(time.perf_counter() - t0)
            seen, done = int(state[STEP]), bool(state[DONE])
            yield new
