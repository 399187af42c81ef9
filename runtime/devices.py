"""Device runtimes: where the executor's buffers live and how work and bytes reach them.

A `DeviceRuntime` serves one placement target (`cpu`, `cuda:N`): it hands out raw buffers and
typed views of them, keeps alloc/free accounting against a capacity, runs work on the device's
stream and returns `CompletionHandle`s, and moves bytes to and from host numpy arrays.

* `HostDevice` ("cpu"): numpy arrays; work runs inline, so every completion is `READY`.
* `TorchDevice` ("cuda:N"): torch tensors. With a real CUDA device it enqueues work on a
  dedicated CUDA stream and completions are CUDA events. On a machine without one (and with
  `TRITON_INTERPRET=1`, which makes Triton kernels run on CPU tensors) it is *emulated*: the
  tensors are CPU tensors and the "stream" is one worker thread that runs submitted work in
  order, so completions are genuinely pending until the worker reaches them. This is how a
  CPU-only machine exercises copies, waits and placement branches for real.

Capacity comes from the declared topology (`memory_bytes`); `reserve` simulates memory held by
someone else (another model, a growing cache), which the route picker's fingerprint sees.
"""

from __future__ import annotations

import math
import queue
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from runtime import knobs
from runtime.compiled import READY, CompletionHandle, Pending
from runtime.dtypes import from_numpy, torch_dtype


class OutOfDeviceMemory(MemoryError):
    """An allocation would exceed the device's declared capacity."""


class DeviceUnavailable(RuntimeError):
    """A device named by the module or topology cannot be served on this machine."""


class DeviceWorkError(RuntimeError):
    """Work submitted to a device stream failed; `label` names the op, `__cause__` the error."""

    def __init__(self, device: str, label: str, error: BaseException):
        self.device, self.label = device, label
        super().__init__(f"'{label}' on {device} failed: {type(error).__name__}: {error}")


class DeviceRuntime(ABC):
    """Accounting shared by every device runtime; subclasses provide buffers and streams."""

    name: str
    backend: str

    def __init__(self, name: str, capacity: int | None):
        self.name, self.capacity = name, capacity
        self.allocated = 0  # bytes of buffers handed out and not freed
        self.reserved = 0  # bytes held by others (simulated co-tenants)

    def free_bytes(self) -> int | None:
        """Capacity minus what is allocated or reserved; None when the capacity is unknown."""
        if self.capacity is None:
            return None
        return self.capacity - self.allocated - self.reserved

    def reserve(self, nbytes: int) -> None:
        """Pretend someone else holds `nbytes` (negative: give them back)."""
        self.reserved = max(0, self.reserved + nbytes)

    def _charge(self, nbytes: int) -> None:
        free = self.free_bytes()
        if free is not None and nbytes > free:
            raise OutOfDeviceMemory(
                f"{self.name}: cannot allocate {nbytes} bytes, {free} of {self.capacity} free"
            )
        self.allocated += nbytes

    def raw(self, nbytes: int) -> Any:
        """A fresh raw byte buffer of `nbytes`, charged against the capacity."""
        self._charge(nbytes)
        return self._raw(nbytes)

    def free(self, raw: Any) -> None:
        self.allocated -= self.nbytes(raw)

    def alloc(self, dtype: np.dtype, shape: Sequence[int]) -> tuple[Any, Any]:
        """(raw buffer, typed view of it) for one value."""
        raw = self.raw(max(1, math.prod(shape) * dtype.itemsize))
        return raw, self.view(raw, dtype, shape)

    def adopt(self, arr: np.ndarray) -> Any:
        """A resident copy of a host array (a weight or constant used here), charged."""
        raw, out = self.alloc(arr.dtype, arr.shape)
        self.from_host(arr, out)
        self.synchronize()
        return out

    # -- provided by each runtime -----------------------------------------------------------
    @abstractmethod
    def _raw(self, nbytes: int) -> Any:
        """A fresh uncharged byte buffer."""

    @abstractmethod
    def nbytes(self, raw: Any) -> int:
        """The size of a raw buffer."""

    @abstractmethod
    def view(self, raw: Any, dtype: np.dtype, shape: Sequence[int]) -> Any:
        """A typed, shaped view of the front of a raw buffer."""

    @abstractmethod
    def submit(self, fn: Callable[..., Any], args: Sequence[Any], label: str) -> None:
        """Run `fn(*args)` on this device's stream (`label` names it in errors)."""

    @abstractmethod
    def record(self) -> CompletionHandle:
        """A completion of everything submitted so far."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait for everything submitted; raises `DeviceWorkError` if any of it failed."""

    @abstractmethod
    def load(self) -> int:
        """Submitted work not finished yet."""

    @abstractmethod
    def from_host(self, src: np.ndarray, dst: Any) -> None:
        """Copy a host array into a buffer of this device (on its stream)."""

    @abstractmethod
    def to_host(self, src: Any, dst: np.ndarray) -> None:
        """Copy a buffer of this device into a host array, synchronously."""

    def from_peer(self, src: Any, dst: Any) -> None:
        """Copy another device's buffer into one of this device's (on its stream)."""
        raise DeviceUnavailable(f"{self.name} cannot read other devices' buffers")


class HostDevice(DeviceRuntime):
    """The host: numpy buffers, synchronous work, `READY` completions."""

    backend = "cpu"

    def __init__(self, capacity: int | None = None):
        super().__init__("cpu", capacity)

    def _raw(self, nbytes: int) -> np.ndarray:
        return np.empty(nbytes, np.uint8)

    def nbytes(self, raw: np.ndarray) -> int:
        return raw.nbytes

    def view(self, raw: np.ndarray, dtype: np.dtype, shape: Sequence[int]) -> np.ndarray:
        return raw[: math.prod(shape) * dtype.itemsize].view(dtype).reshape(shape)

    def submit(self, fn: Callable[..., Any], args: Sequence[Any], label: str) -> None:
        fn(*args)

    def record(self) -> CompletionHandle:
        return READY

    def synchronize(self) -> None:
        return None

    def load(self) -> int:
        return 0

    def adopt(self, arr: np.ndarray) -> np.ndarray:
        self._charge(arr.nbytes)  # the array itself: host data is already resident
        return arr

    def from_host(self, src: np.ndarray, dst: np.ndarray) -> None:
        np.copyto(dst, src)

    def to_host(self, src: np.ndarray, dst: np.ndarray) -> None:
        np.copyto(dst, src)


# -- the torch device ----------------------------------------------------------------------


def _torch() -> Any:
    import torch

    return torch


def host_bytes(a: np.ndarray) -> np.ndarray:
    """The bytes of `a` as a flat writable uint8 array (a copy only when `a` is strided or
    read-only: torch refuses to wrap read-only memory)."""
    if not a.flags.c_contiguous or not a.flags.writeable:
        a = np.array(a, order="C", copy=True)
    return a.reshape(-1).view(np.uint8)


_EVENT = "completion event"
_EMULATION_LOCK = threading.Lock()
"""Emulated devices run their work one at a time: the Triton interpreter patches module state
while a kernel runs, so two interpreted kernels must not overlap (host work still does)."""


class _Completion:
    """The emulated stream's event: set by the worker when it reaches it."""

    def __init__(self, stream: _WorkerStream):
        self._stream, self._done = stream, threading.Event()

    def set(self) -> None:
        self._done.set()

    def query(self) -> bool:
        return self._done.is_set()

    def wait(self) -> None:
        self._done.wait()
        self._stream.raise_error()


class _WorkerStream:
    """A CUDA-stream stand-in: work submitted here runs in submission order on one daemon
    thread (`_work`), started and ended by the owning `TorchDevice`. After a failure the rest
    of the queued work is skipped; the error surfaces at the next wait, named by the failing
    op's label."""

    def __init__(self, device: str):
        self.device = device
        self.queue: queue.SimpleQueue[tuple[Any, Sequence[Any], str] | None] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.pending = 0
        self.error: DeviceWorkError | None = None

    def submit(self, fn: Callable[..., Any], args: Sequence[Any], label: str) -> None:
        with self.lock:
            self.pending += 1
        self.queue.put((fn, args, label))

    def record(self) -> CompletionHandle:
        done = _Completion(self)
        self.submit(done.set, (), _EVENT)
        return Pending(done)

    def raise_error(self) -> None:
        err, self.error = self.error, None
        if err is not None:
            raise err


def _work(stream: _WorkerStream) -> None:
    """The worker thread's loop; a None item ends it."""
    while (item := stream.queue.get()) is not None:
        fn, args, label = item
        try:
            if label is _EVENT:
                fn(*args)  # completions fire even after a failure: their waiters raise
            elif stream.error is None:
                with _EMULATION_LOCK:
                    fn(*args)
        except Exception as e:  # kept for the waiter: the worker never dies
            stream.error = DeviceWorkError(stream.device, label, e)
            stream.error.__cause__ = e
        finally:
            with stream.lock:
                stream.pending -= 1
        del item, fn, args


class _CudaEvent:
    def __init__(self, event: Any):
        self._event = event

    def query(self) -> bool:
        return bool(self._event.query())

    def wait(self) -> None:
        self._event.synchronize()


class TorchDevice(DeviceRuntime):
    """`cuda:N` served by torch: a real CUDA device with its own stream when torch sees one,
    else emulated with CPU tensors and a worker-thread stream (Triton kernels then run under
    the interpreter). `emulate=None` decides from the machine; the emulation is refused unless
    `TRITON_INTERPRET=1`, since compiled Triton kernels cannot read CPU tensors."""

    backend = "cuda"

    def __init__(self, name: str, capacity: int | None = None, emulate: bool | None = None):
        super().__init__(name, capacity)
        torch = self.torch = _torch()
        ordinal = int(name.split(":")[1])
        real = torch.cuda.is_available() and ordinal < torch.cuda.device_count()
        self.emulated = not real if emulate is None else emulate
        if not self.emulated and not real:
            raise DeviceUnavailable(f"{name}: torch sees no such CUDA device")
        if self.emulated and not knobs.triton_interpret():
            raise DeviceUnavailable(
                f"{name} is not present on this machine; set TRITON_INTERPRET=1 to serve it "
                "with CPU tensors and the Triton interpreter"
            )
        if self.emulated:
            self.device = torch.device("cpu")
            self._worker = _WorkerStream(name)
            worker = threading.Thread(
                target=_work, args=(self._worker,), daemon=True, name=f"fuel-{name}"
            )
            worker.start()
            weakref.finalize(self, self._worker.queue.put, None)  # ends it with this device
        else:
            self.device = torch.device(name)
            self.stream = torch.cuda.Stream(device=self.device)
            self.copy_stream = torch.cuda.Stream(device=self.device)  # device->host reads
            if capacity is None:
                self.capacity = int(torch.cuda.mem_get_info(self.device)[1])

    def free_bytes(self) -> int | None:
        free = super().free_bytes()
        if not self.emulated:  # the driver's view also sees other processes
            driver_free = int(self.torch.cuda.mem_get_info(self.device)[0])
            free = driver_free if free is None else min(free, driver_free)
        return free

    def _raw(self, nbytes: int) -> Any:
        return self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)

    def nbytes(self, raw: Any) -> int:
        return int(raw.numel())

    def view(self, raw: Any, dtype: np.dtype, shape: Sequence[int]) -> Any:
        tdt = torch_dtype(from_numpy(dtype))
        return raw[: math.prod(shape) * dtype.itemsize].view(tdt).view(tuple(shape))

    def submit(self, fn: Callable[..., Any], args: Sequence[Any], label: str) -> None:
        if self.emulated:
            self._worker.submit(fn, args, label)
            return
        cuda = self.torch.cuda
        with cuda.device(self.device), cuda.stream(self.stream):  # Triton launches on these
            fn(*args)

    def record(self) -> CompletionHandle:
        if self.emulated:
            return self._worker.record()
        event = self.torch.cuda.Event()
        event.record(self.stream)
        return Pending(_CudaEvent(event))

    def synchronize(self) -> None:
        if self.emulated:
            self._worker.record().wait()
            return
        try:
            self.stream.synchronize()
        except RuntimeError as e:  # an asynchronous CUDA fault surfaces here
            raise DeviceWorkError(self.name, "work on the stream", e) from e

    def load(self) -> int:
        """Queued work not finished: exact when emulated; 0/1 (idle/busy) on CUDA."""
        if self.emulated:
            return self._worker.pending
        return 0 if self.stream.query() else 1

    def _bytes(self, t: Any) -> Any:
        return t.reshape(-1).view(self.torch.uint8)

    def from_host(self, src: np.ndarray, dst: Any) -> None:
        """Host -> device on the stream (the caller keeps `src` alive until it completes)."""
        self.submit(
            _copy_bytes,
            (self._bytes(dst), self.torch.from_numpy(host_bytes(src))),
            "copy to " + self.name,
        )

    def to_host(self, src: Any, dst: np.ndarray) -> None:
        """Device -> host, synchronous. The caller has waited for `src`'s producer, so on CUDA
        the read runs on a side stream that does not queue behind unrelated work."""
        out = self.torch.from_numpy(dst.reshape(-1).view(np.uint8))  # a planned, dense buffer
        if self.emulated:
            out.copy_(self._bytes(src))
        else:
            cuda = self.torch.cuda
            with cuda.device(self.device), cuda.stream(self.copy_stream):
                out.copy_(self._bytes(src))
            self.copy_stream.synchronize()

    def from_peer(self, src: Any, dst: Any) -> None:
        """Another device's tensor -> this device, on this stream (`src` ready, kept alive)."""
        self.submit(_copy_bytes, (self._bytes(dst), self._bytes(src)), "copy to " + self.name)


def _copy_bytes(dst: Any, src: Any) -> None:
    dst.copy_(src, non_blocking=True)


def make_runtime(name: str, capacity: int | None = None) -> DeviceRuntime:
    """The runtime serving device `name` (`cpu` or `cuda:N`)."""
    kind = name.split(":")[0]
    if kind == "cpu":
        return HostDevice(capacity)
    if kind == "cuda":
        return TorchDevice(name, capacity)
    raise DeviceUnavailable(f"no runtime serves '{kind}' devices (known: cpu, cuda)")
