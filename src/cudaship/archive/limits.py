"""The limits every archive read is held to (one place, so inspect, audit, program and toolkit agree)."""

from __future__ import annotations

from dataclasses import dataclass

#: Bytes inflated per step; no decompressor call ever returns more.
CHUNK = 1 << 20
#: Compressed bytes fed to a decompressor per step (the output stays bounded by ``max_length`` whatever
#: this is). Each step takes the GIL back once, waiting while another thread runs Python: 64 KiB steps took
#: it back 5,500 times for libtorch_cuda.so; with 1 MiB steps (and the CLI's 1 ms switch interval)
#: inflating it next to a busy Python thread took 2.9-4.1 s instead of 4.2-6.4 s (docs/performance.md).
IN_CHUNK = 1 << 20


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps on one archive. A member over a cap is that member's error; the archive's total over its cap ends
    the read of every further member."""

    #: Largest member unpacked (bytes, as produced).
    max_member_size: int = 8 << 30
    #: A member may produce at most this many bytes per compressed byte stored for it (or
    #: :attr:`ratio_floor`, when more); real CUDA libraries compress 2-10x, a zip bomb 1000x or more.
    max_ratio: int = 200
    #: Bytes any member may produce whatever its ratio (a page of zeros compresses 1000x legitimately).
    ratio_floor: int = 32 << 20
    #: All members of the archive together may produce at most ``max_ratio`` x the archive's size, or this
    #: when more.
    total_floor: int = 128 << 20
    #: Most members (central directory entries, tar headers) one archive may hold.
    max_members: int = 1_000_000
    #: Largest tar extended header (GNU long name or link, PAX record block) read.
    max_extended_header: int = 1 << 16

    def member_cap(self, compressed: int) -> int:
        """The most bytes a member with ``compressed`` stored bytes may produce."""
        return min(self.max_member_size, max(max(compressed, 0) * self.max_ratio, self.ratio_floor))

    def total_cap(self, archive_size: int) -> int:
        """The most bytes all members of an archive of ``archive_size`` bytes may produce together."""
        return max(max(archive_size, 0) * self.max_ratio, self.total_floor)


DEFAULT_LIMITS = ArchiveLimits()
