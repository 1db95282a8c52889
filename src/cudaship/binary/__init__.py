"""Readers of native binaries and device code. Readers take a buffer, return records, never print."""
