"""The archive layer: every zip and tar read in cudaship goes through here.

- :mod:`.zip`: :class:`~.zip.ZipArchive` lists a zip's members from its central directory, reads and checks
  every local header, refuses overlapping members (as :mod:`zipfile` does since Python 3.12, on every Python),
  and streams a member's bytes through bounded inflation for every method it accepts (stored, deflate, bzip2,
  lzma), with the ratio checked against the compressed bytes actually there, not the size the archive
  declares;
- :mod:`.inflate`: the bounded decompressors (each call produces at most one chunk) for zip members and for
  compressed tar streams (``.tar.xz``, ``.tar.gz``, ``.tar.bz2``);
- :mod:`.tar`: tar archives read as a bounded stream, with a cap on extended headers (GNU long names, PAX);
- :mod:`.spill`: where a member's bytes go (memory within a shared budget, else an anonymous temporary file,
  mapped) and hashing while they stream;
- :mod:`.select`: which members are worth reading as binaries.

Every limit is on totals, not only per member: the bytes all members of one archive may expand to are capped
at :attr:`~.limits.ArchiveLimits.max_ratio` times the archive's size plus a floor, whatever the headers say.
Errors are :class:`~cudaship.errors.ArchiveError` (one line, no path); callers add the path and turn it into
their layer's error.
"""
