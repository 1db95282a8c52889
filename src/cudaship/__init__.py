"""cudaship: make CUDA binaries ship right."""

__version__ = "0.1.0"
