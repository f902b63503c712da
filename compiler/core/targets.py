"""SM targets and PTX ISA versions, with the PTX ISA's target rules as predicates.

The `mma` excerpts gate features three ways, and each has a predicate here so the instruction
table can state requirements as data instead of hand-written comparisons:

* "requires sm_XY or higher"            -> `SmTarget.at_least(XY)` (any suffix counts)
* "requires sm_120a" / "sm_120a, sm_121a" -> `SmTarget.is_arch(120, 121)` (exact 'a' targets only)
* "supported on sm_120f or higher in the same family"
                                        -> `SmTarget.in_family_from(120)` ('f' or 'a', same family,
                                           same or newer minor)

Families are `number // 10` (sm_100/sm_103, sm_110, sm_120/sm_121); ptxas 13.0 agrees: it compiles
`.target sm_120f` for sm_121a but refuses `.target sm_100f` for sm_110 ("different SM-family").

`MIN_PTX_FOR_TARGET` is what ptxas 13.0 accepts in `.target`, measured (not copied from the
documentation): each target was assembled with every `.version` from 6.0 to 9.0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

_SUFFIXES = ("", "f", "a")  # feature sets grow in this order: base < family < arch-specific


@total_ordering
@dataclass(frozen=True)
class PtxVersion:
    """A PTX ISA version such as 8.7; ordered, printed as `.version` wants it."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str | PtxVersion) -> PtxVersion:
        """'8.7' -> PtxVersion(8, 7); raises ValueError naming the expected spelling."""
        if isinstance(text, PtxVersion):
            return text
        m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", str(text))
        if not m:
            raise ValueError(
                f"bad PTX ISA version {text!r}: expected MAJOR.MINOR such as '8.7' or '9.0'"
            )
        return cls(int(m.group(1)), int(m.group(2)))

    def __lt__(self, other: PtxVersion) -> bool:
        return (self.major, self.minor) < (other.major, other.minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def as_tuple(self) -> tuple[int, int]:
        return (self.major, self.minor)


def parse_ptx_version(text: str | PtxVersion) -> PtxVersion:
    return PtxVersion.parse(text)


def released_ptx_version(text: str | PtxVersion) -> PtxVersion:
    """A PTX ISA version a user asks for: one of `PTX_VERSIONS`, else a ValueError naming them."""
    v = PtxVersion.parse(text)
    if v not in PTX_VERSIONS:
        raise ValueError(
            f"unknown PTX ISA version {v}: tilemma knows the released versions "
            f"{PTX_VERSIONS[0]} to {PTX_VERSIONS[-1]}; ptxas 13.0 takes up to {PTXAS_MAX_PTX}"
        )
    return v


# Released PTX ISA versions, 6.0 to the newest documented (9.1).
# Used to name "the version just below" a minimum; there is no 7.9 or 8.9.
PTX_VERSIONS: tuple[PtxVersion, ...] = tuple(
    PtxVersion(major, minor)
    for major, minors in ((6, range(6)), (7, range(9)), (8, range(9)), (9, range(2)))
    for minor in minors
)
# Newest version the ptxas we test with (13.0) accepts; 9.1 exists in the ISA but not in ptxas.
PTXAS_MAX_PTX = PtxVersion(9, 0)
DEFAULT_PTX = PTXAS_MAX_PTX


def previous_ptx_version(v: PtxVersion) -> PtxVersion | None:
    """The released PTX version just below `v` (8.0 -> 7.8), or None below 6.0."""
    older = [p for p in PTX_VERSIONS if p < v]
    return older[-1] if older else None


@total_ordering
@dataclass(frozen=True)
class SmTarget:
    """An `sm_XY[a|f]` target. Ordering is (number, '' < 'f' < 'a'): a sort key, not support."""

    number: int
    suffix: str = ""

    def __post_init__(self) -> None:
        if self.suffix not in _SUFFIXES:
            raise ValueError(f"bad SM suffix {self.suffix!r}: expected '', 'a' or 'f'")

    @property
    def name(self) -> str:
        return f"sm_{self.number}{self.suffix}"

    def __str__(self) -> str:
        return self.name

    def __lt__(self, other: SmTarget) -> bool:
        return self.sort_key() < other.sort_key()

    def sort_key(self) -> tuple[int, int]:
        return (self.number, _SUFFIXES.index(self.suffix))

    @property
    def family(self) -> int:
        """Family number: 12 for sm_120/sm_121, 10 for sm_100/sm_103, 11 for sm_110."""
        return self.number // 10

    @property
    def arch_specific(self) -> bool:
        return self.suffix == "a"

    @property
    def family_specific(self) -> bool:
        """True for 'f' and 'a' targets: an 'a' target has every feature of its 'f' target."""
        return self.suffix in ("a", "f")

    # --- the three forms of "Target ISA Notes" ---------------------------------------------
    def at_least(self, number: int) -> bool:
        """'requires sm_XY or higher': every later number qualifies, whatever its suffix."""
        return self.number >= number

    def is_arch(self, *numbers: int) -> bool:
        """'requires sm_120a': only the listed arch-specific ('a') targets qualify."""
        return self.suffix == "a" and self.number in numbers

    def in_family_from(self, number: int) -> bool:
        """'supported on sm_XYf or higher in the same family': an 'f' or 'a' target of the
        same family whose number is at least XY (sm_120f, sm_121f, sm_120a, sm_121a for 120)."""
        return self.family_specific and self.family == number // 10 and self.number >= number

    def runs_code_for(self, code: SmTarget) -> bool:
        """Whether PTX written for `.target code` may be assembled for this target (ptxas rules):
        base code runs on any newer target, 'f' code within its family, 'a' code only on itself."""
        if code.suffix == "a":
            return self == code
        if code.suffix == "f":
            return self.family == code.family and self.number >= code.number
        return self.number >= code.number

    @property
    def limits(self) -> Limits:
        """This target's hardware record (`LIMITS`)."""
        return limits(self)

    @property
    def min_ptx(self) -> PtxVersion:
        """Oldest `.version` ptxas accepts with this `.target`."""
        return MIN_PTX_FOR_TARGET[self]


# Measured with ptxas 13.0 (`.version V` + `.target T`, for every V): the oldest V accepted.
# sm_88 is accepted from 7.3 although NVIDIA documents it from PTX 9.0; ptxas is the authority
# for what assembles here, so the measured value is kept.
_MIN_PTX_TEXT = {
    "sm_75": "6.3", "sm_80": "7.0", "sm_86": "7.1", "sm_87": "7.4", "sm_88": "7.3",
    "sm_89": "7.8", "sm_90": "7.8", "sm_90a": "8.0",
    "sm_100": "8.6", "sm_100a": "8.6", "sm_100f": "8.8",
    "sm_103": "8.8", "sm_103a": "8.8", "sm_103f": "8.8",
    "sm_110": "9.0", "sm_110a": "9.0", "sm_110f": "9.0",
    "sm_120": "8.7", "sm_120a": "8.7", "sm_120f": "8.8",
    "sm_121": "8.8", "sm_121a": "8.8", "sm_121f": "8.8",
}  # fmt: skip

_SM_RE = re.compile(r"(?:sm_)?(\d+)([af]?)")


def _spellings_help() -> str:
    return (
        "expected one of " + ", ".join(t.name for t in ALL_TARGETS)
        + " (the 'sm_' prefix is optional: '90', 'sm_90', '120a', 'sm_120a')"
    )


def parse_sm(text: str | SmTarget) -> SmTarget:
    """'90', 'sm_90', '120a', 'sm_120a' -> SmTarget; ValueError lists the valid spellings."""
    if isinstance(text, SmTarget):
        return text
    m = _SM_RE.fullmatch(str(text).strip().lower())
    if not m:
        raise ValueError(f"bad SM target {text!r}: {_spellings_help()}")
    target = SmTarget(int(m.group(1)), m.group(2))
    if target not in MIN_PTX_FOR_TARGET:
        raise ValueError(f"unknown SM target {target.name!r}: {_spellings_help()}")
    return target


MIN_PTX_FOR_TARGET: dict[SmTarget, PtxVersion] = {}
for _name, _ver in _MIN_PTX_TEXT.items():
    _m = _SM_RE.fullmatch(_name)
    assert _m is not None
    MIN_PTX_FOR_TARGET[SmTarget(int(_m.group(1)), _m.group(2))] = PtxVersion.parse(_ver)

ALL_TARGETS: tuple[SmTarget, ...] = tuple(sorted(MIN_PTX_FOR_TARGET))


def all_targets() -> tuple[SmTarget, ...]:
    """Every target ptxas 13.0 accepts, sm_75 .. sm_121f, oldest first."""
    return ALL_TARGETS


NATIVE, EMULATED = "native", "emulated"


@dataclass(frozen=True)
class Limits:
    """What one target's hardware holds and runs fast: every check and default reads this.

    Sizes are the CUDA C++ Programming Guide's "Technical Specifications per Compute Capability"
    table (shared memory per CTA is the opt-in maximum, static + dynamic; from sm_80 on 1 KiB less
    than per SM, which the driver reserves per CTA). `int4_mma` / `fp8_mma`: how ptxas 13.0 assembles
    `mma.sync.m16n8k64.s32.s4.s4.s32` / `mma.sync.m16n8k32.f32.e4m3.e4m3.f32` for the target
    (cuobjdump -sass): native is one IMMA.16864.S4 / QMMA.16832.E4M3; emulated is two
    IMMA.16832.S8 and ~180 integer instructions unpacking the nibbles / twelve F2FP.F16.E4M3 and two
    f16 HMMA.16816 (the f16 path); None: the instruction does not exist there (fp8 before sm_89).
    `sm_count` and `l2_bytes` are those of the product named in `product`, None where no product
    is settled (or, for the L2, its size was not checked)."""

    shared_per_cta: int  # bytes of shared memory one CTA may use
    shared_per_sm: int  # bytes of shared memory per SM
    int4_mma: str
    fp8_mma: str | None
    sm_count: int | None
    product: str | None
    l2_bytes: int | None = None
    registers_per_thread: int = 255  # 32-bit registers
    registers_per_sm: int = 65536  # 32-bit registers; also the most one CTA may use
    threads_per_cta: int = 1024

    @property
    def shared_reserve(self) -> int:
        """Bytes of an SM's shared memory the driver keeps per resident CTA (from sm_80 on 1 KiB:
        what `shared_per_cta` lacks of `shared_per_sm`)."""
        return self.shared_per_sm - self.shared_per_cta

    @property
    def sms(self) -> int:
        """SMs of the target's product; a target with no settled product takes the H100's 132,
        where the default configurations were measured."""
        return self.sm_count or 132

    @property
    def one_wave(self) -> int:
        """CTAs that keep most of the SMs busy: 10/11 of them (an H100's 132 SMs: 120)."""
        return self.sms * 10 // 11

    @property
    def l2(self) -> int:
        """Bytes of L2 cache; a target with no settled product (or size) takes the H100's, 50 MiB."""
        return self.l2_bytes or 50 * 2**20

    def thread_registers(self, threads: int) -> int:
        """32-bit registers each thread of a CTA of `threads` threads may have: ptxas reads
        `.maxntid` and keeps the CTA within the SM's register file (spilling the rest)."""
        return min(self.registers_per_thread, self.registers_per_sm // threads)

    def launch_registers(self, threads: int) -> int:
        """Registers each thread of a CTA of `threads` threads holds when it launches with all the
        file allows, in setmaxnreg's units of 8: what ptxas gives a kernel that uses setmaxnreg,
        and the count its warpgroups' `.inc`s and `.dec`s start from."""
        return self.thread_registers(threads) // 8 * 8

    def resident_ctas(self, threads: int, shared: int) -> int:
        """CTAs of `threads` threads and `shared` bytes of shared memory an SM holds at once: its
        shared memory, less the driver's reserve a CTA, and its registers at the most ptxas may
        give a thread."""
        return min(self.shared_per_sm // (shared + self.shared_reserve),
                   self.registers_per_sm // (threads * self.thread_registers(threads)))


_N, _E = NATIVE, EMULATED
# One row per SM number: shared memory per CTA and per SM (KiB), int4 and fp8 mma.sync, SM count
# and the product it counts. Shared memory and threads/registers: the Programming Guide's table
# (sm_88 is not in it: taken as sm_86/sm_89, its siblings). int4/fp8: ptxas 13.0 SASS, as above
# (sm_75's int4 is Turing's IMMA.8832, not checked here). SM counts and L2 (MiB): NVIDIA's product
# pages and architecture whitepapers; a count marked "unsure" was not checked against a datasheet,
# an L2 not given was not checked (the H100's is taken).
_LIMITS_TABLE = (
    (75, 64, 64, _N, None, 40, "Tesla T4", 4),
    (80, 163, 164, _N, None, 108, "A100", 40),
    (86, 99, 100, _N, None, 82, "GeForce RTX 3090 (A40, RTX A6000: 84; A10: 72)", 6),
    (87, 163, 164, _N, None, 16, "Jetson AGX Orin 64GB (unsure)", None),
    (88, 99, 100, _N, None, None, None, None),
    (89, 99, 100, _N, _N, 142, "L40S (GeForce RTX 4090: 128)", 96),
    (90, 227, 228, _E, _E, 132, "H100 SXM (H100 PCIe: 114)", 50),
    (100, 227, 228, _E, _E, 148, "B200", None),
    (103, 227, 228, _E, _E, None, None, None),  # B300: SM count not settled here
    (110, 227, 228, _E, _E, 20, "Jetson Thor T5000 (unsure)", None),
    (120, 99, 100, _E, _N, 170, "GeForce RTX 5090", None),
    (121, 99, 100, _E, _N, 48, "DGX Spark GB10 (unsure)", None),
)  # fmt: skip
LIMITS: dict[int, Limits] = {
    number: Limits(cta * 1024, sm * 1024, int4, fp8, count, product, None if l2 is None else l2 * 2**20)
    for number, cta, sm, int4, fp8, count, product, l2 in _LIMITS_TABLE
}


def limits(target: str | SmTarget) -> Limits:
    """The hardware record of `target` (its SM number's row: sm_90a and sm_90 share one)."""
    t = parse_sm(target)
    if t.number not in LIMITS:
        raise ValueError(f"no hardware limits known for {t.name}")
    return LIMITS[t.number]


def max_shared_per_cta(target: str | SmTarget) -> int:
    """Bytes of shared memory one CTA may use on `target` (232448 = 227 KiB on sm_90)."""
    return limits(target).shared_per_cta
