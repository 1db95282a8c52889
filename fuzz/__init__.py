"""Fuzzing harnesses for cudaship's readers: ``python -m fuzz TARGET --time 60`` (docs/reliability.md)."""
