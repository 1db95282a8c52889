"""Host packages as data (knowledge/data/hosts.toml): each row has its source; a library or directory maps to
its host only for the wheels the row applies to."""

from __future__ import annotations

from cudaship.knowledge.hosts import host_of_directory, host_of_library, hosts


def test_every_host_names_its_module_and_source() -> None:
    rows = hosts()
    assert {h.project for h in rows} >= {"torch", "tensorflow"}
    for h in rows:
        assert h.source and h.module and (h.libraries or h.directories), h.project


def test_torch_libraries_and_directory_belong_to_torch_for_any_wheel() -> None:
    for name in ("libc10.so", "libtorch_cpu.so", "c10.dll"):
        host = host_of_library(name, "some-extension")
        assert host is not None and host.project == "torch", name
    assert host_of_library("libtorchaudio.so", "some-extension") is None
    dir_host = host_of_directory("torch/lib", "some-extension")
    assert dir_host is not None and dir_host.module == "torch"
    assert host_of_directory("torch", "some-extension") is None


def test_a_row_restricted_to_some_wheels_applies_only_to_them() -> None:
    bindings = host_of_library("libnvinfer.so.11", "tensorrt-cu12-bindings")
    assert bindings is not None and bindings.project == "tensorrt-cu12"
    assert host_of_library("libnvinfer.so.11", "torch-tensorrt") is None
