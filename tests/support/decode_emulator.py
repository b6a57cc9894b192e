"""The decode step's launcher on the CUDA emulator (tests only): each launch runs the kernel's CUDA C on the CPU.

    step.enqueue(EmulatorLauncher())      # the same body CupyLauncher runs on a GPU and TwinLauncher in NumPy

Each kernel is built once per process (cuda_emulator caches the library on disk by its text).
"""
from __future__ import annotations

import cuda_emulator
from transformer.models.decode_plan import KERNEL_DIR, KERNELS


class EmulatorLauncher:
    def __init__(self, sanitizer: str | None = None):
        self.kernels, self.sanitizer = {}, sanitizer

    def kernel(self, name: str):
        if name not in self.kernels:
            self.kernels[name] = cuda_emulator.load(KERNEL_DIR / KERNELS[name][0], f"decode_{name}",
                                                    sanitizer=self.sanitizer)
        return self.kernels[name]

    def __call__(self, spec, *args):
        self.kernel(spec.name)(grid=spec.grid, block=spec.block, args=args, shared_bytes=spec.shared_bytes)
