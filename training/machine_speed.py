"""How fast this machine multiplies matrices right now: the yardstick that says whether two runs' times compare.

A speedup divides a baseline's time by a run's. Measured on another day, or while something else used the cores,
the baseline ran on a different machine in all but name (the same code ran 8,400 and 3,300 samples/s here on two
days). Each training run measures a float32 matrix product on all cores just before and just after it trains; a
speedup against a baseline whose measure differs by more than :data:`COMPARABLE_WITHIN` is not printed.
"""

from __future__ import annotations

import time

import numpy as np

MATRIX_SIZE = 512  # 0.27 GFLOP a product: many products a second, so the clock's resolution does not matter
MEASURE_SECONDS = 0.5
COMPARABLE_WITHIN = 0.15  # the spread of this measure on an idle machine here was a few per cent


def matmul_gflops(seconds: float = MEASURE_SECONDS, size: int = MATRIX_SIZE) -> float:
    """GFLOP/s of repeated ``size``² float32 matrix products for about ``seconds`` (numpy, all cores)."""
    rng = np.random.default_rng(0)
    left, right = (rng.random((size, size), np.float32) for _ in range(2))
    left @ right  # the first product pays for thread start-up
    products, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        left @ right
        products += 1
    return 2 * size**3 * products / elapsed / 1e9


def bf16_hardware(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU multiplies bfloat16 natively (AMX tiles or AVX512-BF16): read, never assumed."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as lines:
            flags = next((line for line in lines if line.startswith("flags")), "").split()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def difference(first: float, second: float) -> float:
    """How far apart two measures are, as a share of the larger."""
    return abs(first - second) / max(first, second)


def comparable(first: float, second: float) -> bool:
    return difference(first, second) <= COMPARABLE_WITHIN
