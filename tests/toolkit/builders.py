"""Builders for toolkit tests: redist archives (.tar.xz / .zip) and manifests, and a local HTTP server.

The server serves a directory on 127.0.0.1, honours Range requests, and can be told to cut a connection
after N bytes once, or to hold a file until an event is set.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

LINUX = "linux-x86_64"
WINDOWS = "windows-x86_64"

#: name -> files (archive-relative, below the top directory) of small but well-formed components
COMPONENT_FILES: dict[str, dict[str, dict[str, bytes]]] = {
    "cuda_cudart": {
        LINUX: {
            "include/cuda_runtime.h": b"#pragma once\n/* test cudart */\n",
            "lib/libcudart.so.13.0.96": b"\x7fELF fake cudart\n",
            "lib/libcudart_static.a": b"!<arch>\n",
            "LICENSE": b"cudart license\n",
        },
        WINDOWS: {
            "include/cuda_runtime.h": b"#pragma once\r\n/* test cudart */\r\n",
            "bin/cudart64_13.dll": b"MZ fake cudart dll\n",
            "lib/x64/cudart.lib": b"!<arch>\n",
            "LICENSE": b"cudart license\n",
        },
    },
    "cuda_nvcc": {
        LINUX: {
            "bin/nvcc": b"#!/bin/sh\necho nvcc\n",
            "bin/nvcc.profile": b"TOP = $(_HERE_)/..\n",
            "include/fatbinary_section.h": b"#pragma once\n",
            "LICENSE": b"nvcc license\n",
        },
        WINDOWS: {
            "bin/nvcc.exe": b"MZ fake nvcc\n",
            "bin/nvcc.profile": b"TOP = $(_HERE_)/..\n",
            "LICENSE": b"nvcc license\n",
        },
    },
    "cuda_crt": {
        LINUX: {"include/crt/host_config.h": b"#pragma once\n", "LICENSE": b"crt license\n"},
        WINDOWS: {"include/crt/host_config.h": b"#pragma once\n", "LICENSE": b"crt license\n"},
    },
    "libnvvm": {
        LINUX: {"nvvm/bin/cicc": b"\x7fELF fake cicc\n", "LICENSE": b"nvvm license\n"},
        WINDOWS: {"nvvm/bin/cicc.exe": b"MZ fake cicc\n", "LICENSE": b"nvvm license\n"},
    },
    "cuda_cccl": {
        LINUX: {"include/cccl/cuda/std/version": b"// cccl\n", "LICENSE": b"cccl license\n"},
        WINDOWS: {"include/cccl/cuda/std/version": b"// cccl\n", "LICENSE": b"cccl license\n"},
    },
}
VERSIONS = {
    "cuda_cudart": "13.0.96",
    "cuda_nvcc": "13.0.88",
    "cuda_crt": "13.0.88",
    "libnvvm": "13.0.88",
    "cuda_cccl": "13.0.85",
}
EXECUTABLES = {"bin/nvcc", "nvvm/bin/cicc"}


def top_dir(name: str, platform: str, version: str) -> str:
    return f"{name}-{platform}-{version}-archive"


def make_tar_xz(files: dict[str, bytes], top: str, *, links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tf:
        directory = tarfile.TarInfo(top)
        directory.type = tarfile.DIRTYPE
        directory.mode = 0o755
        tf.addfile(directory)
        for rel, data in files.items():
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size = len(data)
            info.mode = 0o755 if rel in EXECUTABLES else 0o644
            tf.addfile(info, io.BytesIO(data))
        for rel, target in (links or {}).items():
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tf.addfile(info)
    return buffer.getvalue()


def make_zip(files: dict[str, bytes], top: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, data in files.items():
            zf.writestr(f"{top}/{rel}", data)
    return buffer.getvalue()


@dataclass
class RedistTree:
    root: Path
    release: str
    archives: dict[tuple[str, str], Path] = field(default_factory=dict)  #: (component, platform) -> file

    @property
    def manifest_path(self) -> Path:
        return self.root / f"redistrib_{self.release}.json"

    def manifest(self) -> dict[str, object]:
        return json.loads(self.manifest_path.read_text())  # type: ignore[no-any-return]

    def write_manifest(self, manifest: dict[str, object]) -> None:
        self.manifest_path.write_text(json.dumps(manifest, indent=2))


def build_redist(
    root: Path,
    release: str = "13.0.2",
    *,
    platforms: tuple[str, ...] = (LINUX, WINDOWS),
    components: tuple[str, ...] = tuple(COMPONENT_FILES),
    overrides: dict[tuple[str, str], bytes] | None = None,
) -> RedistTree:
    """A redist tree like NVIDIA's: redistrib_<release>.json + <name>/<platform>/<name>-...-archive.*.

    ``overrides`` replaces the bytes of one archive (component, platform) after its checksum was computed
    from the real content only when the caller wants a mismatch; otherwise the manifest describes it.
    """
    tree = RedistTree(root, release)
    manifest: dict[str, object] = {
        "release_date": "2025-10-09",
        "release_label": release,
        "release_product": "cuda",
    }
    for name in components:
        version = VERSIONS[name]
        entry: dict[str, object] = {
            "name": name,
            "license": "CUDA Toolkit",
            "license_path": f"{name}/LICENSE.txt",
            "version": version,
        }
        for platform in platforms:
            files = COMPONENT_FILES[name][platform]
            top = top_dir(name, platform, version)
            if platform == WINDOWS:
                data, suffix = make_zip(files, top), "zip"
            else:
                data, suffix = make_tar_xz(files, top), "tar.xz"
            if overrides and (name, platform) in overrides:
                data = overrides[(name, platform)]
            relative = f"{name}/{platform}/{top}.{suffix}"
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            tree.archives[(name, platform)] = path
            entry[platform] = {
                "relative_path": relative,
                "sha256": hashlib.sha256(data).hexdigest(),
                "md5": hashlib.md5(data).hexdigest(),
                "size": str(len(data)),
            }
        manifest[name] = entry
    tree.write_manifest(manifest)
    return tree


@dataclass
class ServerControl:
    root: Path
    cut_after: dict[str, int] = field(default_factory=dict)  #: file name -> bytes before a cut (once)
    hold: dict[str, threading.Event] = field(default_factory=dict)  #: file name -> served once set
    requests: list[tuple[str, str | None]] = field(default_factory=list)  #: (path, Range header)
    requested: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(control: ServerControl) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            rel = self.path.lstrip("/").split("?", 1)[0]
            with control.lock:
                control.requests.append((rel, self.headers.get("Range")))
            control.requested.set()
            name = rel.rsplit("/", 1)[-1]
            if name in control.hold:
                control.hold[name].wait(timeout=60)
            path = (control.root / rel).resolve()
            if control.root.resolve() not in path.parents or not path.is_file():
                self.send_error(404)
                return
            data = path.read_bytes()
            start = 0
            header = self.headers.get("Range")
            if header and header.startswith("bytes=") and header.endswith("-"):
                start = int(header[6:-1])
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            cut = control.cut_after.pop(name, None)
            if cut is not None:
                self.wfile.write(body[:cut])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.wfile.write(body)

    return Handler


@contextmanager
def serve(root: Path) -> Iterator[tuple[str, ServerControl]]:
    """Serve ``root`` on 127.0.0.1; yields (base URL, control)."""
    control = ServerControl(root)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(control))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host}:{port}", control
    finally:
        for event in control.hold.values():
            event.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
