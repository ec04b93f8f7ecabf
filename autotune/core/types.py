"""One vocabulary for the whole pipeline: problems, configs, outcomes."""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import operator
import re
import struct
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .tiers import DEFAULT, PRECISIONS, spelt_or


class UserError(Exception):
    """Bad input from the user (a file, an argument): reported as one line, exit code 2."""


class NoGPUError(UserError, RuntimeError):
    """No CUDA device (no GPU, no driver): `load` and `matmul` raise it, not CuPy's error."""

    # One sentence, not CuPy's; a RuntimeError too, as CuPy's is.


def one_line(text: str) -> str:
    """Return `text` as one line of printable characters, for a message or a generated comment.

    A newline, another control character or an undecodable byte of a file name (a lone
    surrogate) is shown escaped, as repr shows it.
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


# An error is one line a person reads, and what it quotes may be any size (an argument, a line of
# a file: megabytes): a value longer than QUOTE_CHARS shows its start and its end, and the line
# is bounded too.
QUOTE_CHARS = 200
LINE_CHARS = 2000
_LONG_RUN = re.compile(rf"(?<!\S)\S{{{QUOTE_CHARS + 1},}}")  # tried from a run's start only: linear


def clipped(text: str, limit: int) -> str:
    """Return `text`, or if longer than `limit`, its start and end around '...' (`limit` in all)."""
    # The end is kept too: that is where a message often says what is wrong.
    if len(text) <= limit:
        return text
    tail = limit // 4
    return f"{text[: limit - tail - 3]}...{text[len(text) - tail :]}"


def quoted(value: Any) -> str:
    """Return `repr(value)` as an error message quotes a user's value: at most QUOTE_CHARS long."""
    try:
        return clipped(repr(value), QUOTE_CHARS)
    except ValueError:  # an integer of more digits than Python converts to text (sys.int_info)
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"


def error_line(message: str) -> str:
    """Return `message` as the line an error is printed on: one line, clipped."""
    # Each run of more than QUOTE_CHARS non-blank characters is clipped (a message that quotes a
    # value whole), then the whole line to LINE_CHARS (a value with blanks in it).
    line = _LONG_RUN.sub(lambda m: clipped(m.group(), QUOTE_CHARS), one_line(message))
    return clipped(line, LINE_CHARS)


LAYOUTS = ("nn", "nt", "tn", "tt")
# The kernel parameters that say how A and B are stored (Problem.trans): every family built in
# this repository declares both; a family without them reads the nn layout only.
LAYOUT_PARAMS = ("TRANS_A", "TRANS_B")
# The kernel parameters a problem fixes (Problem.pinned): its layout, and BATCHED (1: blockIdx.z
# is the batch, each operand's matrices a stride apart). A family without BATCHED runs one matrix.
PINNED_PARAMS = (*LAYOUT_PARAMS, "BATCHED", "PRECISION")
# What a number handed to the kernels as a C float (beta, alpha) may be: one FP32 holds, as that
# number. Beyond FP32's largest (1e39) it becomes infinity, and a number of magnitude below its
# smallest (1e-50) becomes 0, which for beta means C is not read at all.
FP32_RANGE = "0, or a magnitude from 1.4e-45 to 3.4e+38"


def fp32_holds(x: float) -> bool:
    """Return whether FP32 holds `x` finite, and nonzero unless it is 0 (FP32_RANGE)."""
    try:
        (y,) = struct.unpack("<f", struct.pack("<f", x))
    except OverflowError:  # finite, but rounds to infinity
        return False
    return math.isfinite(y) and (y != 0 or x == 0)


@dataclass(frozen=True)
class Problem:
    """One product C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C, row-major float32.

    Args:
        M, N, K: The sizes, each from 1 to MAX_DIM (else UserError, as for any field).
        layout: How A and B are stored, as NumPy writes the product: "nn" is A @ B (A is M x K,
            B is K x N), "nt" is A @ B.T (B stored N x K, as a linear layer's weight), "tn" is
            A.T @ B (A stored K x M), "tt" is A.T @ B.T. Kernels read them in place; C is M x N.
        batch: More than 1: that many such products in one launch (strided batched GEMM).
        beta: The one timed (the kernels take any): 0 writes C without reading it.
        precision: The accuracy tier (`core.tiers`) a kernel must meet to serve the problem.
    """

    M: int
    N: int
    K: int
    layout: str = "nn"
    batch: int = 1
    beta: float = 0.0
    precision: str = DEFAULT

    # The kernels take M, N and K as C `int`s (32-bit on every CUDA platform): a larger size
    # would wrap around inside them, so no path (search, replay, export, the Python API) accepts one.
    MAX_DIM = 2**31 - 1

    def __post_init__(self) -> None:
        for dim in ("M", "N", "K"):
            value = getattr(self, dim)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"{dim} must be a positive integer, got {quoted(value)}")
            if value > self.MAX_DIM:
                raise UserError(
                    f"{dim}={value} is more than {self.MAX_DIM}, the largest size the kernels' int indices hold"
                )
        if self.layout not in LAYOUTS:
            raise UserError(f"layout must be one of {', '.join(LAYOUTS)}, got {quoted(self.layout)}")
        b = self.batch
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= self.MAX_DIM:
            raise UserError(f"batch must be an integer from 1 to {self.MAX_DIM}, got {quoted(b)}")
        beta = self.beta
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not math.isfinite(beta):
            raise UserError(f"beta must be a finite number, got {quoted(beta)}")
        object.__setattr__(self, "beta", float(beta) + 0.0)  # one value for 3 and 3.0, 0.0 for -0.0
        if self.precision not in PRECISIONS:
            raise UserError(f"precision must be one of {', '.join(PRECISIONS)}, got {quoted(self.precision)}")

    @property
    def name(self) -> str:
        """The results file's stem: '512x512x512_nt_b64_beta3', '4096x4096x4096_high'.

        'MxNxK', then '_<layout>' unless nn, '_b<batch>' for a batch, '_beta<beta>' unless beta
        is 0, and '_<precision>' unless it is the default tier.
        """
        shape = f"{self.M}x{self.N}x{self.K}"
        shape = shape if self.layout == "nn" else f"{shape}_{self.layout}"
        shape = shape if self.batch == 1 else f"{shape}_b{self.batch}"
        shape = shape if self.beta == 0 else f"{shape}_beta{_number(self.beta)}"
        return shape if self.precision == DEFAULT else f"{shape}_{self.precision}"

    @property
    def trans(self) -> tuple[int, int]:
        """(TRANS_A, TRANS_B): the kernel parameters of this layout."""
        return int(self.layout[0] == "t"), int(self.layout[1] == "t")

    @staticmethod
    def layout_of(trans: tuple[int, int]) -> str:
        """The layout of (TRANS_A, TRANS_B): (0, 1) is "nt"."""
        return "nt"[trans[0]] + "nt"[trans[1]]

    @property
    def pinned(self) -> dict[str, int]:
        """The kernel parameters this problem fixes: TRANS_A, TRANS_B, BATCHED and PRECISION."""
        return {
            "TRANS_A": self.trans[0],
            "TRANS_B": self.trans[1],
            "BATCHED": int(self.batch > 1),
            "PRECISION": self.precision,
        }

    def with_layout(self, layout: str) -> Problem:
        return dataclasses.replace(self, layout=layout)

    def with_beta(self, beta: float) -> Problem:
        return dataclasses.replace(self, beta=beta)

    def with_precision(self, precision: str) -> Problem:
        return dataclasses.replace(self, precision=precision)

    def as_dict(self) -> dict[str, int | str | float]:
        """Return the record's "problem": batch, beta and precision only when not 1, 0, default."""
        # So records of single FP32 products timed with beta = 0 read as they did before the
        # other fields existed.
        d: dict[str, int | str | float] = {"M": self.M, "N": self.N, "K": self.K, "layout": self.layout}
        if self.batch > 1:
            d["batch"] = self.batch
        if self.beta != 0:
            d["beta"] = self.beta
        if self.precision != DEFAULT:
            d["precision"] = self.precision
        return d

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K * self.batch

    @property
    def bytes(self) -> int:
        """Bytes an ideal kernel moves: A and B read once, C written (and read unless beta is 0)."""
        c = self.M * self.N * (1 if self.beta == 0 else 2)
        return 4 * (self.M * self.K + self.K * self.N + c) * self.batch

    @classmethod
    def parse(
        cls, text: str, layout: str = "nn", batch: int = 1, beta: float = 0.0, precision: str = DEFAULT
    ) -> Problem:
        """Return the problem `text` names: '4096' (square), '8192x8192x1024', '512x512x512_nt_b64'.

        As results files are named, the size may be followed by a layout ('_nt'), a batch count
        ('_b64'), a beta ('_beta3') and a precision ('_high'), which win over the arguments.

        Raises:
            UserError: `text` is not such a name.
        """
        shape, *tags = str(text).lower().split("_")
        parts = shape.split("x")
        usage = (
            "expected N or MxNxK, optionally _nn, _nt, _tn or _tt, _b<batch>, _beta<beta> and "
            f"{spelt_or([f'_{p}' for p in PRECISIONS])} after it"
        )
        if len(parts) not in (1, 3) or len(tags) > 4:
            raise UserError(f"shape {quoted(text)}: {usage}")
        try:
            dims = [int(p) for p in parts]
        except ValueError:
            raise UserError(f"shape {quoted(text)}: not an integer") from None
        if len(dims) == 1:
            dims *= 3
        seen = set()
        for tag in tags:
            if tag in LAYOUTS:
                kind, layout = "layout", tag
            elif tag[:1] == "b" and tag[1:].isascii() and tag[1:].isdigit():  # not '²', a digit int() refuses
                kind, batch = "batch", int(tag[1:])
            elif tag.startswith("beta") and _is_number(tag[4:]):
                kind, beta = "beta", float(tag[4:])
                if not fp32_holds(beta):
                    raise UserError(f"shape {text!r}: beta {tag[4:]} is not a number FP32 holds ({FP32_RANGE})")
            elif tag in PRECISIONS:
                kind, precision = "precision", tag
            else:
                raise UserError(f"shape {quoted(text)}: {quoted(tag)}: {usage}")
            if kind in seen:
                raise UserError(f"shape {quoted(text)}: a second {kind}: {usage}")
            seen.add(kind)
        return cls(*dims, layout, batch, beta, precision)


def _number(x: float) -> str:
    """Return a float as a name reads it back exactly: 3, -0.5, 1e-05."""
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


@dataclass(frozen=True)
class Config:
    """One point of a family's space: the template stem and its integer parameters."""

    family: str
    params: tuple[tuple[str, int | str], ...]  # integers, or names for parameters with named choices

    @classmethod
    def make(cls, family: str, params: Mapping[str, int | str]) -> Config:
        """Return the config of `family` with `params`, each an integer (numpy's too) or a name.

        128.5 or True is refused (UserError), not truncated or converted, since the name, the cache
        key and the kernel would disagree. Which names a parameter takes is the family's to check.
        """
        if not isinstance(params, Mapping):
            raise UserError(f"{family}: parameters must map names to values, got {quoted(params)}")
        return cls(family, tuple(sorted((k, _param_value(family, k, v)) for k, v in params.items())))

    def __getitem__(self, key: str) -> int | str:
        return dict(self.params)[key]

    def as_dict(self) -> dict[str, int | str]:
        return dict(self.params)

    @functools.cached_property
    def name(self) -> str:
        """Procedural name, as CUTLASS does: the cache key, results key and C identifier."""
        # The pinned parameters are named only when set (name_piece): a kernel for the nn layout
        # keeps the name it had before layouts existed, which stored results, replay tables and
        # studies use; so does one for a single product, BATCHED 0. A cached_property: a search
        # looks up the names of a whole space (600,000 points) several times.
        return self.family + "".join(name_piece(k, v) for k, v in self.params)


def name_piece(key: str, value: int | str) -> str:
    """Return a parameter's part of a config's name: "_BM128", or "" for a pinned one at 0."""
    # The enumeration builds the names of a whole space from these pieces at once.
    return "" if key in PINNED_PARAMS and value == 0 else f"_{key}{value}"


def _param_value(family: str, name: str, value: Any) -> int | str:
    if isinstance(value, str):
        return value
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise UserError(f"{family}: parameter {name} must be an integer, got {quoted(value)}")


class Status(enum.Enum):
    """How one evaluation of a config ended (anything but OK says why in its message)."""

    OK = "ok"
    REJECTED = "rejected"  # static filter (before or after compile)
    COMPILE_FAILED = "compile_failed"
    LAUNCH_FAILED = "launch_failed"  # fault, bad launch, worker died
    INCORRECT = "incorrect"
    TIMEOUT = "timeout"


@dataclass
class Measurement:
    """What one evaluation of a config on a problem produced."""

    config: Config
    problem: Problem
    status: Status
    message: str = ""
    time_ms: float | None = None  # median
    time_min_ms: float | None = None
    time_max_ms: float | None = None
    time_iqr_ms: float | None = None
    repeats: int = 0
    gflops: float | None = None
    error: float | None = None  # relative Frobenius error vs the reference
    registers: int | None = None
    spill_bytes: int | None = None
    smem_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["config"] = {"family": self.config.family, "params": self.config.as_dict(), "name": self.config.name}
        d["problem"] = self.problem.as_dict()
        d["status"] = self.status.value
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Measurement:
        d = dict(d)
        cfg = d.pop("config")
        d["config"] = Config.make(cfg["family"], cfg["params"])
        d["problem"] = Problem(**d.pop("problem"))
        d["status"] = Status(d.pop("status"))
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})
