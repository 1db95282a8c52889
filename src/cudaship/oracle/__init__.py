"""The loader oracle: install a wheel for real, load it in child processes, record what the dynamic loader
mapped, and compare that with the audit's static verdicts.

This layer runs processes (pip, the target interpreter); it never prints. ``records`` holds its frozen
records, ``child`` the stdlib-only script the target interpreter runs, ``observe`` the parent's side
(:func:`cudaship.oracle.observe.observe`), ``install`` the environment it loads in and ``compare`` the
agreement with the static audit.
"""
