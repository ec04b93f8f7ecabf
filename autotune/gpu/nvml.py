"""The SM clock, board power and clock-limit reasons of a GPU while a timing runs, read from NVML.

NVML (libnvidia-ml, installed with the driver) is loaded with ctypes: no package to install.
Where the library, a symbol or the device is missing, every reading is None and a timing goes on
without it: a clock is something a record may say, never something a timing needs. CUDA's device
numbers are not NVML's (CUDA_VISIBLE_DEVICES renumbers them), so a device is found by its PCI bus
id. `Sampler.watch` reads the clock and power while timed launches run on the GPU, from the host
thread that would otherwise block waiting for them.
"""

from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Callable

# The keys a timing's dict, a Measurement's extra and a record's entry (and its cuBLAS) hold:
# the median SM clock (MHz) and board power (W) of the samples, and the power or thermal reasons
# that held the clock down in any of them (an empty list: read, and none).
FIELDS = ("sm_clock_mhz", "power_w", "throttle")

_SUCCESS = 0
_CLOCK_SM = 1  # nvmlClockType_t NVML_CLOCK_SM
_POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT: mW now (GetPowerUsage averages over a second)

# nvmlClocksEventReasons bits that mean the clock was held below what was asked of it by power or
# heat. Left out: idle, application clocks, sync boost, display clock (not a timing's doing).
THROTTLES = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
}
_LIBRARIES = ("libnvidia-ml.so.1", "nvml.dll")


class _Value(ctypes.Union):
    _fields_ = [("dVal", ctypes.c_double), ("uiVal", ctypes.c_uint), ("ulVal", ctypes.c_ulong),
                ("ullVal", ctypes.c_ulonglong), ("sllVal", ctypes.c_longlong), ("siVal", ctypes.c_int)]  # fmt: skip


class _FieldValue(ctypes.Structure):  # nvmlFieldValue_t
    _fields_ = [("fieldId", ctypes.c_uint32), ("scopeId", ctypes.c_uint32), ("timestamp", ctypes.c_int64),
                ("latencyUsec", ctypes.c_int64), ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", _Value)]  # fmt: skip


_loaded: list = []  # [library or None], once a process


def library():
    """Return NVML, loaded and initialised once a process; None where it cannot be."""
    if not _loaded:
        _loaded.append(_load())
    return _loaded[0]


def _load():
    for name in _LIBRARIES:
        try:
            lib = ctypes.CDLL(name)
            if lib.nvmlInit_v2() == _SUCCESS:
                return lib
        except (OSError, AttributeError):  # no such library, or one without the symbol
            continue
    return None


class Device:
    """One GPU's NVML handle; each reading is None where NVML cannot give it."""

    def __init__(self, lib, handle: ctypes.c_void_p):
        self.lib, self.handle = lib, handle

    def _call(self, name: str, *args) -> bool:
        fn = getattr(self.lib, name, None)
        try:
            return fn is not None and fn(self.handle, *args) == _SUCCESS
        except (OSError, ctypes.ArgumentError):
            return False

    def sm_clock_mhz(self) -> int | None:
        """Return the SM clock now, in MHz."""
        mhz = ctypes.c_uint()
        return mhz.value if self._call("nvmlDeviceGetClockInfo", _CLOCK_SM, ctypes.byref(mhz)) else None

    def power_w(self) -> float | None:
        """Return the board's power now (the instant reading, else the recent average), in W."""
        field = _FieldValue(fieldId=_POWER_INSTANT)
        if self._call("nvmlDeviceGetFieldValues", 1, ctypes.byref(field)) and field.nvmlReturn == _SUCCESS:
            return field.value.uiVal / 1e3
        mw = ctypes.c_uint()
        return mw.value / 1e3 if self._call("nvmlDeviceGetPowerUsage", ctypes.byref(mw)) else None

    def reasons(self) -> int | None:
        """Return the bit mask of what holds the clocks now (nvmlClocksEventReasons)."""
        bits = ctypes.c_ulonglong()
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            if self._call(name, ctypes.byref(bits)):  # the second is the name drivers before 535 know
                return bits.value
        return None


def open_device(pci_bus_id: str | None) -> Device | None:
    """Return the NVML device at `pci_bus_id` ("0000:3b:00.0", as CUDA gives it); None if none."""
    lib = library()
    if lib is None or not pci_bus_id:
        return None
    handle = ctypes.c_void_p()
    try:
        found = lib.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(), ctypes.byref(handle)) == _SUCCESS
    except (OSError, AttributeError, ctypes.ArgumentError):
        found = False
    return Device(lib, handle) if found else None


class Sampler:
    """Readings of one device over a timed region, summed up as a record keeps them (`summary`)."""

    def __init__(self, device: Device | None):
        self.device = device
        self.clocks: list[int] = []
        self.powers: list[float] = []
        self.reasons: int | None = None

    def sample(self) -> None:
        """Read the clock, power and clock-limit reasons now."""
        if self.device is None:
            return
        mhz, watts, bits = self.device.sm_clock_mhz(), self.device.power_w(), self.device.reasons()
        if mhz is not None:
            self.clocks.append(mhz)
        if watts is not None:
            self.powers.append(watts)
        if bits is not None:
            self.reasons = (self.reasons or 0) | bits

    def watch(self, started: Callable[[], bool], finished: Callable[[], bool], expected_s: float) -> dict:
        """Sample from `started()` until `finished()`, about 16 times over `expected_s`; summarise.

        The caller has queued the timed launches: `started` and `finished` ask (without blocking)
        whether the first and last timing events have passed. The host polls every half
        millisecond, so the timing ends at most that late; samples are 1 to 25 ms apart (an NVML
        reading costs microseconds). A region too short for a sample is read once right after
        it, when the clock has not yet moved. Without a device this returns {} at once, and the
        caller's wait is the one it had.
        """
        if self.device is None:
            return {}
        interval = min(0.025, max(0.001, expected_s / 16))
        last = -float("inf")
        while not finished():
            now = time.monotonic()
            if now - last >= interval and started():
                self.sample()
                last = now
            time.sleep(5e-4)
        if not self.clocks:
            self.sample()
        return self.summary()

    def summary(self) -> dict:
        """Return the median SM clock (MHz) and power (W), and the throttle reasons seen: FIELDS.

        Each only where read; an empty throttle list means the reasons were read and none held.
        """
        out: dict = {}
        if self.clocks:
            out["sm_clock_mhz"] = int(statistics.median_low(self.clocks))
        if self.powers:
            out["power_w"] = round(statistics.median(self.powers), 1)
        if self.reasons is not None:
            out["throttle"] = [name for bit, name in THROTTLES.items() if self.reasons & bit]
        return out


def clock_fields(timing: dict) -> dict:
    """Return the clock fields (FIELDS) a timing's dict holds."""
    return {k: timing[k] for k in FIELDS if k in timing}
