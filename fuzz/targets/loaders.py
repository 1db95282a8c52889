"""The JSON and TOML loaders (``loaders.py``): the input through ``load_json`` and ``load_toml`` (bytes and
text), and through ``read_json``/``read_toml`` from a file. Only :class:`CudashipError` may come out, and
whatever loads nests at most ``MAX_DEPTH`` levels."""

from __future__ import annotations

from cudaship.errors import CudashipError, PolicyError
from cudaship.loaders import MAX_DEPTH, depth_of, load_json, load_toml, read_json, read_toml
from fuzz._harness import Target
from fuzz.targets._scratch import scratch


class TooDeep(Exception):
    """A loader returned a document nested deeper than it allows."""


def run(data: bytes) -> object:
    results: list[object] = []
    for load in (load_json, load_toml):
        for form in (data, data.decode("utf-8", "replace")):
            try:
                value = load(form, error=PolicyError)
            except CudashipError:
                continue
            if depth_of(value) > MAX_DEPTH:
                raise TooDeep(f"{load.__name__} returned a document {depth_of(value)} levels deep")
            results.append(value)
    path = scratch() / "document"
    path.write_bytes(data)
    for read in (read_json, read_toml):
        try:
            results.append(read(path, error=PolicyError))
        except CudashipError:
            continue
    return results


TARGET = Target(
    name="loaders",
    summary="load_json, load_toml, read_json, read_toml on policies and redist manifests",
    run=run,
    seed_kinds=("policy", "manifest"),
    modules=("loaders.py", "safe_read.py"),
)
