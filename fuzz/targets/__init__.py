"""One harness module per fuzz target; each exposes ``TARGET`` (a :class:`fuzz._harness.Target`)."""
