"""Turning paths (files, directories, wheels) into per-file reports by dispatching to the readers."""
