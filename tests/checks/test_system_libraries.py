"""The documented system library lists the closure check uses, per platform."""

from __future__ import annotations

import pytest

from cudaship.knowledge.system_libraries import Provider, provider_of, system_library_patterns


@pytest.mark.parametrize(
    ("name", "platform", "provider"),
    [
        ("libc.so.6", "linux", Provider.SYSTEM),
        ("libstdc++.so.6", "linux", Provider.SYSTEM),
        ("ld-linux-aarch64.so.1", "linux", Provider.SYSTEM),
        ("libcuda.so.1", "linux", Provider.DRIVER),
        ("libpython3.12.so.1.0", "linux", Provider.PYTHON),
        ("KERNEL32.dll", "windows", Provider.SYSTEM),
        ("api-ms-win-crt-runtime-l1-1-0.dll", "windows", Provider.SYSTEM),
        ("VCRUNTIME140_1.dll", "windows", Provider.SYSTEM),
        # Windows components in System32 that onnxruntime-genai-cuda 0.18.0's DLL imports (accuracy corpus)
        ("WINHTTP.dll", "windows", Provider.SYSTEM),
        ("WindowsCodecs.dll", "windows", Provider.SYSTEM),
        ("bcryptprimitives.dll", "windows", Provider.SYSTEM),
        ("nvcuda.dll", "windows", Provider.DRIVER),
        ("python3.dll", "windows", Provider.PYTHON),
        ("/usr/lib/libSystem.B.dylib", "macos", Provider.SYSTEM),
        # issue 12: every /usr/lib dylib is the OS's (SIP; dyld shared cache), not only a short list
        ("/usr/lib/libsqlite3.dylib", "macos", Provider.SYSTEM),
        ("/usr/lib/libiconv.2.dylib", "macos", Provider.SYSTEM),
        ("/usr/lib/swift/libswiftCore.dylib", "macos", Provider.SYSTEM),
        ("/System/Library/Frameworks/Metal.framework/Versions/A/Metal", "macos", Provider.SYSTEM),
        ("/usr/local/lib/libomp.dylib", "macos", None),
        ("@rpath/libomp.dylib", "macos", None),
        ("/opt/homebrew/lib/libsqlite3.dylib", "macos", None),
        ("libcudart.so.13", "linux", None),
        ("cudart64_13.dll", "windows", None),
        ("libgcc_s_seh-1.dll", "windows", None),
        ("KERNEL32.dll", "linux", None),
    ],
    ids=lambda v: str(v),
)
def test_provider(name: str, platform: str, provider: Provider | None) -> None:
    assert provider_of(name, platform) is provider


def test_extra_system_libraries() -> None:
    assert provider_of("libnuma.so.1", "linux") is None
    assert provider_of("libnuma.so.1", "linux", ("libnuma.so.*",)) is Provider.SYSTEM


def test_every_platform_has_a_list() -> None:
    for platform in ("linux", "windows", "macos"):
        assert system_library_patterns(platform)
    assert system_library_patterns("plan9") == ()
