"""The fallback engine: a seeded mutation loop that needs nothing beyond the standard library.

Not coverage-guided (that is atheris' job, see :mod:`fuzz._atheris`); instead it keeps an input in its
corpus when it produces an outcome not seen before (a new error message, with numbers blanked, or success),
which steers it past the first length check of a format into the next one. The mutations are the ones that
break binary readers: bit flips, "interesting" integers (0, -1, 2^31, 2^63, sizes near the input's length)
written over length and offset fields in both byte orders, truncation, insertion, deletion, duplication of a
range, and splicing two corpus entries.
"""

from __future__ import annotations

import random
import re
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from fuzz._harness import Finding, Target, outcome

_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+")
_INTERESTING = (
    0,
    1,
    2,
    7,
    8,
    16,
    0x7F,
    0x80,
    0xFF,
    0x100,
    0x7FFF,
    0x8000,
    0xFFFF,
    0x10000,
    0x7FFFFFFF,
    0x80000000,
    0xFFFFFFFF,
    1 << 32,
    (1 << 63) - 1,
    1 << 63,
    (1 << 64) - 1,
)
_FORMATS = ("<B", "<H", ">H", "<I", ">I", "<Q", ">Q")


def _signature(message: str) -> str:
    return _NUMBER.sub("N", message)[:120]


class Mutator:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def mutate(self, data: bytes, corpus: list[bytes]) -> bytes:
        out = bytearray(data)
        for _ in range(self.rng.choice((1, 1, 1, 2, 2, 3, 4, 8))):
            self._one(out, corpus)
        return bytes(out)

    def _one(self, out: bytearray, corpus: list[bytes]) -> None:
        rng = self.rng
        n = len(out)
        op = rng.randrange(9)
        if n == 0 or op == 8:
            at = rng.randint(0, n)
            out[at:at] = rng.randbytes(rng.choice((1, 2, 4, 8, 16, 64)))
        elif op == 0:
            at = rng.randrange(n)
            out[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            out[rng.randrange(n)] = rng.randrange(256)
        elif op in (2, 3):
            fmt = rng.choice(_FORMATS)
            size = struct.calcsize(fmt)
            if n < size:
                return
            value = rng.choice((*_INTERESTING, n, n - 1, n + 1, rng.randrange(max(n, 1) * 2)))
            value &= (1 << (8 * size)) - 1
            # fields sit on their alignment in every format read here; half the time keep it
            at = rng.randrange(n - size + 1)
            if rng.random() < 0.5:
                at -= at % size
            struct.pack_into(fmt, out, at, value)
        elif op == 4:
            if rng.random() < 0.3:
                del out[rng.randint(0, n - 1) :]  # truncate
            else:
                a = rng.randrange(n)
                del out[a : a + rng.randint(1, max(1, min(n - a, 256)))]
        elif op == 5:
            a = rng.randrange(n)
            b = min(n, a + rng.randint(1, 256))
            at = rng.randint(0, n)
            out[at:at] = out[a:b] * rng.choice((1, 2, 16))
        elif op == 6 and corpus:
            other = rng.choice(corpus)
            if other:
                a = rng.randrange(len(other))
                chunk = other[a : a + rng.randint(1, 4096)]
                at = rng.randrange(n)
                out[at : at + len(chunk)] = chunk
        else:
            a = rng.randrange(n)
            b = rng.randrange(n)
            length = rng.randint(1, min(64, n - max(a, b)) or 1)
            out[b : b + length] = out[a : a + length]


@dataclass
class LoopResult:
    executions: int = 0
    seconds: float = 0.0
    outcomes: set[str] = field(default_factory=set)
    corpus: list[bytes] = field(default_factory=list)
    findings: list[tuple[Finding, bytes]] = field(default_factory=list)


def run_loop(
    target: Target,
    seeds: Iterable[bytes],
    *,
    seconds: float,
    seed: int = 0,
    max_runs: int | None = None,
    max_corpus: int = 512,
    stop_on_finding: bool = True,
) -> LoopResult:
    """Mutate ``seeds`` for ``seconds`` (or ``max_runs`` executions); collect findings with their inputs."""
    rng = random.Random(f"{target.name}-{seed}")
    mutator = Mutator(rng)
    result = LoopResult(corpus=[s for s in seeds if len(s) <= target.max_seed_size])
    if not result.corpus:
        result.corpus.append(b"")
    start = time.monotonic()
    pending = list(result.corpus)  # every seed runs once unmutated first
    while True:
        elapsed = time.monotonic() - start
        if pending:
            data = pending.pop()
        elif elapsed >= seconds or (max_runs is not None and result.executions >= max_runs):
            break
        else:
            data = mutator.mutate(rng.choice(result.corpus), result.corpus)
        result.executions += 1
        try:
            message = outcome(target, data)
        except Finding as finding:
            result.findings.append((finding, data))
            if stop_on_finding:
                break
            continue
        sig = _signature(message)
        if sig not in result.outcomes:
            result.outcomes.add(sig)
            if len(result.corpus) < max_corpus:
                result.corpus.append(data)
    result.seconds = time.monotonic() - start
    return result
