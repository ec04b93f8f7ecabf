"""gpu/nvml.py against a fake NVML: the readings, the sampler over a timed region, and a timing
that goes on without a clock where the library, a symbol or the device is missing."""

import ctypes

import pytest

from autotune.gpu import nvml

BUS = "0000:3B:00.0"


class FakeNVML:
    """libnvidia-ml's functions as the sampler calls them, answering from lists of readings."""

    def __init__(self, clocks=(1980,), powers_mw=(500_000,), reasons=(0,), instant=True, bus=BUS):
        self.clocks, self.powers, self.reasons = list(clocks), list(powers_mw), list(reasons)
        self.instant, self.bus, self.calls = instant, bus, []

    @staticmethod
    def _next(values):
        return values.pop(0) if len(values) > 1 else values[0]

    def nvmlInit_v2(self):
        return 0

    def nvmlDeviceGetHandleByPciBusId_v2(self, bus, handle):
        handle._obj.value = 7
        return 0 if bus == self.bus.encode() else 2  # NVML_ERROR_INVALID_ARGUMENT

    def nvmlDeviceGetClockInfo(self, handle, kind, mhz):
        assert kind == 1 and handle.value == 7  # NVML_CLOCK_SM, the handle found
        self.calls.append("clock")
        mhz._obj.value = self._next(self.clocks)
        return 0

    def nvmlDeviceGetFieldValues(self, handle, count, field):
        value = field._obj
        assert count == 1 and value.fieldId == 186
        value.nvmlReturn = 0 if self.instant else 3  # NVML_ERROR_NOT_SUPPORTED
        value.value.uiVal = int(self._next(self.powers))
        return 0

    def nvmlDeviceGetPowerUsage(self, handle, mw):
        mw._obj.value = int(self._next(self.powers))
        return 0

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle, bits):
        bits._obj.value = self._next(self.reasons)
        return 0


class _Time:
    """time for nvml: a second passes at each reading of the clock, and a sleep takes none."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        self.now += 1.0
        return self.now

    def sleep(self, seconds):
        pass


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(nvml, "time", _Time())  # every poll samples: the counts below are exact

    def install(lib):
        monkeypatch.setattr(nvml, "_loaded", [lib])
        return lib

    return install


def test_the_device_is_found_by_its_pci_bus_id_and_read(fake):
    fake(FakeNVML(clocks=[1755], powers_mw=[690_500], reasons=[0x4 | 0x1]))
    assert nvml.open_device("0000:AF:00.0") is None  # another bus: no device, no error
    dev = nvml.open_device(BUS)
    assert (dev.sm_clock_mhz(), dev.power_w(), dev.reasons()) == (1755, 690.5, 0x5)


def test_the_sampler_summarises_what_it_read_while_the_launches_ran(fake):
    """Samples only once the first event passed (not during the spin kernel before it), until the
    last: the median clock and power, and every power or thermal reason seen, idle left out."""
    lib = fake(FakeNVML(clocks=[1980, 1830, 1755, 1740], powers_mw=[400e3, 690e3, 700e3, 699e3],
                        reasons=[0x1, 0x4, 0x4, 0x40]))  # fmt: skip
    polls = iter([False, False, True, True, True, True])  # the first event: not yet, then done
    ends = iter([False] * 6 + [True])
    out = nvml.Sampler(nvml.open_device(BUS)).watch(lambda: next(polls), lambda: next(ends), expected_s=1e-4)
    assert len(lib.calls) == 4  # the polls after the first event passed
    assert out == {"sm_clock_mhz": 1755, "power_w": 694.5, "throttle": ["sw_power_cap", "hw_thermal"]}


def test_a_region_too_short_for_a_sample_is_read_right_after_it(fake):
    lib = fake(FakeNVML(clocks=[1965], powers_mw=[350e3], reasons=[0]))
    out = nvml.Sampler(nvml.open_device(BUS)).watch(lambda: True, lambda: True, expected_s=1e-5)
    assert lib.calls == ["clock"] and out == {"sm_clock_mhz": 1965, "power_w": 350.0, "throttle": []}


def test_power_falls_back_to_the_average_and_reasons_to_the_older_name(fake):
    class Older(FakeNVML):  # a driver before the instant field and the clocks-event name
        nvmlDeviceGetCurrentClocksEventReasons = None

        def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle, bits):
            bits._obj.value = 0x20
            return 0

    fake(Older(powers_mw=[250e3], instant=False))
    dev = nvml.open_device(BUS)
    assert dev.power_w() == 250.0 and dev.reasons() == 0x20


def test_readings_nvml_refuses_are_unknown_not_errors(fake):
    class Refusing(FakeNVML):
        def nvmlDeviceGetClockInfo(self, handle, kind, mhz):
            return 3  # NVML_ERROR_NOT_SUPPORTED

        def nvmlDeviceGetPowerUsage(self, handle, mw):
            return 3

        def nvmlDeviceGetCurrentClocksEventReasons(self, handle, bits):
            raise ctypes.ArgumentError("bad argument")

    fake(Refusing(instant=False))
    sampler = nvml.Sampler(nvml.open_device(BUS))
    assert sampler.watch(lambda: True, lambda: True, 0.01) == {}


def test_without_nvml_a_timing_waits_as_before_and_has_no_clock(monkeypatch):
    """No library (ctypes cannot load it): no device, and watch returns at once without polling,
    so the runner's own synchronize is the wait."""

    def no_library(name, *args, **kwargs):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(nvml, "_loaded", [])
    monkeypatch.setattr(ctypes, "CDLL", no_library)
    assert nvml.library() is None and nvml.open_device(BUS) is None
    polled = []
    assert nvml.Sampler(None).watch(lambda: polled.append(1), lambda: polled.append(1), 1.0) == {}
    assert polled == []


def test_a_library_without_init_is_no_library(monkeypatch):
    monkeypatch.setattr(nvml, "_loaded", [])
    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: object())  # no nvmlInit_v2
    assert nvml.library() is None


def test_clock_fields_picks_the_clock_of_a_timing():
    timing = {"time_ms": 1.0, "sm_clock_mhz": 1755, "power_w": 690.0, "throttle": [], "path": "gemm"}
    assert nvml.clock_fields(timing) == {"sm_clock_mhz": 1755, "power_w": 690.0, "throttle": []}
    assert nvml.clock_fields({"time_ms": 1.0}) == {}
