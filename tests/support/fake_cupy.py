"""A stand-in for the parts of CuPy the decode graph uses, on NumPy arrays (tests only).

`StepRunner(step, "graph")` compiles kernels, opens a stream, warms up, captures a CUDA graph and replays
it: host code that otherwise first runs on a GPU. With `fake_cupy.install(monkeypatch)` it runs here:
a RawModule's function runs the kernel's NumPy twin, or, while its stream is capturing, records the
launch into the graph the capture returns; `Graph.launch` replays the recording; the driver lists a
graph's nodes; the memory pool counts what `pool_alloc` was told. Capturing refuses what CuPy refuses: a synchronize, a nested capture.
"""
from __future__ import annotations

import types

from transformer.models import decode_graph
from transformer.models.decode_twins import TWINS


GRAPHS = {}  # handle -> Graph: what the stand-in driver looks a graph up by


class Graph:
    def __init__(self, calls):
        self.calls, self.uploaded, self.launches = calls, False, 0
        self.graph = len(GRAPHS) + 1  # the handle, as CuPy's Graph.graph holds the cudaGraph_t
        GRAPHS[self.graph] = self

    def upload(self, stream):
        self.uploaded = True

    def launch(self, stream):
        self.launches += 1
        for run in self.calls:
            run()



class Driver:
    """The two calls of the CUDA driver that graph_kernel_nodes makes, with ctypes' pointers: each recorded
    launch is a kernel node (CU_GRAPH_NODE_TYPE_KERNEL = 0), plus one empty node (type 2) that must not count."""

    def cuGraphGetNodes(self, handle, nodes, count_ref):
        graph, count = GRAPHS[handle.value], count_ref._obj
        n = len(graph.calls) + 1
        if nodes is not None:
            for i in range(min(count.value, n)):
                nodes[i] = (handle.value << 20) + i + 1
        count.value = n
        return 0

    def cuGraphNodeGetType(self, node, kind_ref):
        graph, i = GRAPHS[node.value >> 20], (node.value & 0xFFFFF) - 1
        kind_ref._obj.value = 0 if i < len(graph.calls) else 2
        return 0


class Stream:
    current = None

    def __init__(self, non_blocking=False):
        if not non_blocking:
            raise AssertionError("a capture needs a stream of its own (non_blocking=True)")
        self.recording = None

    def __enter__(self):
        self.before, Stream.current = Stream.current, self
        return self

    def __exit__(self, *exc):
        Stream.current = self.before

    def begin_capture(self):
        if self.recording is not None:
            raise RuntimeError("already capturing")
        self.recording = []

    def end_capture(self):
        calls, self.recording = self.recording, None
        return Graph(calls)

    def synchronize(self):
        if self.recording is not None:
            raise RuntimeError("cudaErrorStreamCaptureUnsupported: synchronize while capturing")


class Function:
    def __init__(self, name):
        self.twin = TWINS[name.removeprefix("decode_")]
        self.compiled = 0

    def __call__(self, grid, block, args, shared_mem=0):
        stream = Stream.current
        run = (lambda: self.twin(*args, grid=grid))
        if stream is not None and stream.recording is not None:
            stream.recording.append(run)  # captured: runs at each replay
        else:
            run()


class RawModule:
    built = 0

    def __init__(self, code, options=()):
        RawModule.built += 1
        self.code, self.options = code, options

    def get_function(self, name):
        if f"void {name}(" not in self.code:
            raise AssertionError(f"no kernel {name} in this source")
        return Function(name)


class Pool:
    def __init__(self):
        self.used = 0

    def used_bytes(self):
        return self.used


def install(monkeypatch) -> types.SimpleNamespace:
    """Make decode_graph's import_cupy return the stand-in, with a fresh shared launcher."""
    pool = Pool()
    cp = types.SimpleNamespace(RawModule=RawModule, get_default_memory_pool=lambda: pool,
                               cuda=types.SimpleNamespace(Stream=Stream))
    monkeypatch.setattr(decode_graph, "import_cupy", lambda: cp)
    monkeypatch.setattr(decode_graph, "cuda_driver", Driver)
    monkeypatch.setattr(decode_graph.CupyLauncher, "_shared", None)
    return cp
