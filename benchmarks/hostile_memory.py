#!/usr/bin/env python3
"""Benchmark: memory and work of every reader and loader on the hostile inputs of docs/reliability.md
("Hostile input, round 2" and "round 3": policy patterns, dependency sources, quadratic corners, endless
bodies), against the ceiling every reader must hold: **256 x input + 128 MiB**.

Each case runs in a fresh child process (so one case's allocations never count for another) and reports:

- the input's size (the file or buffer handed to cudaship);
- the peak of Python allocations under tracemalloc while cudaship reads it (building the input is not
  counted: the peak is reset once it is built), every ``bytes`` a decompressor returns included;
- the bytes a zip read produced where the case exposes it (``--json``), and the child's peak resident set
  size (``getrusage``, which also counts building the input, so it is only reported in ``--json``);
- the outcome (the one-line error, or what was read).

Usage: python benchmarks/hostile_memory.py [--json FILE]
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/inspect.py would shadow the standard library's inspect module
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

CASES = [
    "zip-bzip2-bomb-lying-size",
    "zip-lzma-bomb-lying-size",
    "zip-deflate-bomb-lying-size",
    "zip-20k-cd-entries-one-header",
    "wheel-bzip2-bomb-inspect",
    "wheel-bzip2-bomb-audit",
    "pt2-bzip2-bomb",
    "toolkit-zip-bzip2-bomb",
    "tar-bz2-long-name-64MiB",
    "tar-bz2-96MiB-zeros",
    "json-200k-deep",
    "toml-100k-dotted-key",
    "record-20MiB",
    "metadata-10001-requires",
    "pe-3000-descriptors-one-table",
    "elf-20k-symbols-one-name",
    "fatbin-20k-chain",
    # round 3 (issue 25)
    "policy-glob-backtracking",
    "env-dev-zero-fifo-latin1-200k-field",
    "wheelhouse-bzip2-bomb-metadata",
    "index-remote-bzip2-bomb-metadata",
    "index-file-url-and-redirect",
    "audit-3000-needed-3000-runpath",
    "doctor-env-3000-needed-3000-runpath",
    "mirror-endless-body",
    "provenance-100k-deep",
]


def _reset() -> None:
    """The input is built: from here on, the peak is the read's."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.reset_peak()


def _case(name: str) -> tuple[int, str, int]:
    """Run one case in this process: (input size, outcome, work counter). Each branch builds its input,
    then calls :func:`_reset`, then reads."""
    import tempfile
    import zipfile

    from tests.security import test_archive_layer as al
    from tests.security import test_shared_references as sr

    from cudaship.errors import CudashipError

    tmp = Path(tempfile.mkdtemp(prefix="cudaship-bench-"))
    try:
        if name.startswith("zip-") and "bomb" in name:
            from cudaship.archive.zip import ZipArchive

            method = {"bzip2": zipfile.ZIP_BZIP2, "lzma": zipfile.ZIP_LZMA, "deflate": zipfile.ZIP_DEFLATED}[
                name.split("-")[1]
            ]
            data = al._forge_size(al._bomb_zip(method), "pkg/libbomb.so", 1 << 20)
            _reset()
            archive = ZipArchive(data)
            try:
                for member in archive.files():
                    for _ in archive.chunks(member):
                        pass
                return len(data), "read", archive.produced
            except CudashipError as e:
                return len(data), e.message, archive.produced
        if name == "zip-20k-cd-entries-one-header":
            import struct

            from cudaship.archive.zip import ZipArchive

            one = al._zip([("pkg/a.so", b"x" * 1000, zipfile.ZIP_DEFLATED)])
            cd_at, eocd_at = one.find(b"PK\x01\x02"), one.find(b"PK\x05\x06")
            entry, eocd = one[cd_at:eocd_at], bytearray(one[eocd_at:])
            struct.pack_into("<HHII", eocd, 8, 20_000, 20_000, len(entry) * 20_000, cd_at)
            data = one[:cd_at] + entry * 20_000 + bytes(eocd)
            _reset()
            try:
                ZipArchive(data)
                return len(data), "read", 0
            except CudashipError as e:
                return len(data), e.message, 0
        if name.startswith("wheel-"):
            wheel = tmp / "bomb-1.0-py3-none-any.whl"
            data = al._forge_size(al._bomb_zip(zipfile.ZIP_BZIP2), "pkg/libbomb.so", 1 << 20)
            wheel.write_bytes(data)
            if name.endswith("inspect"):
                from cudaship.inspection.walk import inspect_paths

                _reset()
                report = inspect_paths([wheel])
                return len(data), "; ".join(f.error or "read" for f in report.files), 0
            dist = "bomb-1.0.dist-info"
            members = [
                ("pkg/libbomb.so", al.ELF_HEAD + bytes(al.BOMB - len(al.ELF_HEAD)), zipfile.ZIP_BZIP2),
                (f"{dist}/METADATA", b"Metadata-Version: 2.1\nName: bomb\nVersion: 1.0\n", 8),
                (f"{dist}/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-any\n", 8),
                (f"{dist}/RECORD", b"", 8),
            ]
            data = al._forge_size(al._zip(members), "pkg/libbomb.so", 1 << 20)
            wheel.write_bytes(data)
            from cudaship.inspection.scan import scan as scan_wheel

            del members  # 96 MiB of zeros: the input was built from it, it is not the input
            _reset()
            scan = scan_wheel(wheel, workers=1)
            return len(data), "; ".join(f"{n}: {m}" for n, m in scan.unreadable), 0
        if name == "pt2-bzip2-bomb":
            from cudaship.inspection.pt2 import read_pt2

            member = "model/data/aotinductor/model/x.wrapper.so"
            data = al._forge_size(al._bomb_zip(zipfile.ZIP_BZIP2, member), member, 1 << 20)
            _reset()
            info = read_pt2(data, "bomb.pt2")
            return len(data), "; ".join(info.notes), 0
        if name.startswith("toolkit-") or name.startswith("tar-"):
            from tests.security.builders import M, tar_bytes

            from cudaship.toolkit.extract import extract_archive

            if name.startswith("toolkit-"):
                member = f"{al.TOP}/lib/libbomb.so"
                data = al._forge_size(al._bomb_zip(zipfile.ZIP_BZIP2, member), member, 1 << 20)
                filename = "a.zip"
            elif "long-name" in name:
                data, filename = al._long_name_bomb(64 << 20), "a.tar.bz2"
            else:
                data, filename = (
                    tar_bytes([M(f"{al.TOP}/lib/zeros.bin", bytes(al.BOMB))], mode="w:bz2"),
                    "a.tar.bz2",
                )
            (tmp / filename).write_bytes(data)
            (tmp / "dest").mkdir()
            del data
            data = b"x" * (tmp / filename).stat().st_size  # for the size below
            _reset()
            try:
                extract_archive(tmp / filename, tmp / "dest", filename=filename)
                return len(data), "extracted", 0
            except CudashipError as e:
                return len(data), e.message, 0
        if name.startswith("json-") or name.startswith("toml-"):
            from cudaship.errors import PolicyError
            from cudaship.loaders import load_json, load_toml

            if name.startswith("json"):
                text = "[" * 200_000 + "]" * 200_000
                loader = load_json
            else:
                text = ".".join(f"k{i}" for i in range(100_000)) + " = 1"
                loader = load_toml  # type: ignore[assignment]
            _reset()
            try:
                loader(text, error=PolicyError)
                return len(text), "loaded", 0
            except CudashipError as e:
                return len(text), e.message, 0
        if name in ("record-20MiB", "metadata-10001-requires"):
            from cudaship.wheel import metadata

            if name.startswith("record"):
                data = b"a,,\n" * (5 << 20)
                call = metadata.parse_record
            else:
                data = b"Metadata-Version: 2.1\nName: x\nVersion: 1.0\n" + b"".join(
                    b"Requires-Dist: p%d\n" % i for i in range(10_001)
                )
                call = metadata.parse_metadata  # type: ignore[assignment]
            _reset()
            try:
                call(data)
                return len(data), "parsed", 0
            except CudashipError as e:
                return len(data), e.message, 0
        if name.startswith("pe-") or name.startswith("elf-") or name.startswith("fatbin-"):
            from cudaship.inspection.dispatch import inspect_buffer

            if name.startswith("pe-"):
                data = sr._pe_sharing_one_lookup_table(3000, 3000)
            elif name.startswith("elf-"):
                data = sr._elf_sharing_one_name(20_000, 60_000)
            else:
                data = sr._fatbin_chain(20_000)
            _reset()
            if name.startswith("fatbin-"):  # the scan a library gets (a .fatbin file is read strictly)
                from cudaship.binary.devicescan import scan_containers

                try:
                    scan_containers(data)
                    return len(data), "scanned", 0
                except CudashipError as e:
                    return len(data), e.message, 0
            report = inspect_buffer(data, name)
            return len(data), report.error or "read", 0
        if name in ROUND3:
            return ROUND3[name](tmp)
        raise SystemExit(f"unknown case {name}")
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


# --- round 3 ------------------------------------------------------------------------------------------------


def _policy_glob(tmp: Path) -> tuple[int, str, int]:
    from cudaship.checks.globs import Glob

    pattern, path = "*a" * 500 + "b", "a" * 100_000
    glob = Glob(pattern)
    _reset()
    matched = glob.match(path)
    return len(pattern) + len(path), f"matched: {matched}, {glob.steps} steps", glob.steps


def _env(tmp: Path) -> tuple[int, str, int]:
    import os

    from cudaship.providers.sources import EnvSource

    site = tmp / "site"
    for name in ("good", "zeros", "fifo", "latin", "field"):
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "RECORD").write_text(f"{name}/x.py,,\n")
    (site / "zeros-1.0.dist-info" / "METADATA").unlink()
    (site / "zeros-1.0.dist-info" / "METADATA").symlink_to("/dev/zero")
    (site / "fifo-1.0.dist-info" / "RECORD").unlink()
    os.mkfifo(site / "fifo-1.0.dist-info" / "RECORD")
    (site / "latin-1.0.dist-info" / "RECORD").write_bytes(b"caf\xe9/x.py,,\n")
    (site / "field-1.0.dist-info" / "RECORD").write_text('"' + "a" * 200_000 + '",,\n')
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file() and not f.is_symlink())
    _reset()
    source = EnvSource(str(site))
    found = [d.name for d in source.distributions()]
    return size, f"found {found}; left out {len(source.problems)}: {source.problems[0][-60:]}", 0


def _wheelhouse(tmp: Path) -> tuple[int, str, int]:
    from packaging.specifiers import SpecifierSet
    from tests.security.test_dependency_sources import LINUX, _hostile_wheels

    from cudaship.errors import CudashipError
    from cudaship.providers.sources import WheelhouseSource

    data = _hostile_wheels()["bad_bz-1.0-py3-none-any.whl"]
    (tmp / "bad_bz-1.0-py3-none-any.whl").write_bytes(data)
    _reset()
    try:
        WheelhouseSource(str(tmp)).find("bad-bz", SpecifierSet(), LINUX)
        return len(data), "read", 0
    except CudashipError as e:
        return len(data), str(e)[-90:], 0


def _serve(index: object) -> tuple[object, str]:
    import http.server
    import threading

    from tests.security.test_dependency_sources import _handler

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(index))  # type: ignore[arg-type]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _index(tmp: Path, project: str, filename: str) -> tuple[int, str, int]:
    from packaging.specifiers import SpecifierSet
    from tests.security.test_dependency_sources import LINUX, _hostile_wheels, _Index, _wheel_bytes

    from cudaship.errors import CudashipError
    from cudaship.providers.cache import DiskCache
    from cudaship.providers.http import Client
    from cudaship.providers.index import IndexSource

    wheels = _hostile_wheels()
    (tmp / "secret-1.0-py3-none-any.whl").write_bytes(_wheel_bytes("secret"))
    index = _Index(tmp, wheels)
    server, url = _serve(index)
    index.url = url
    size = len(wheels.get(filename, b"")) or (tmp / "secret-1.0-py3-none-any.whl").stat().st_size
    client = Client()
    _reset()
    try:
        found = IndexSource(url + "/simple", DiskCache(None), client).find(project, SpecifierSet(), LINUX)
        outcome = f"found {found}"
    except CudashipError as e:
        outcome = str(e)[-90:]
    server.shutdown()  # type: ignore[attr-defined]
    return size, f"{outcome} ({client.fetched.bytes:,} B fetched)", client.fetched.bytes


def _hostile_library(tmp: Path) -> tuple[Path, Path]:
    import subprocess

    n = 3000
    stubs = tmp / "stubs"
    stubs.mkdir()
    (tmp / "stub.c").write_text("int stub_fn(void) { return 0; }\n")
    first = stubs / "libs00000.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(first), "-Wl,-soname,libs00000.so", str(tmp / "stub.c")]
    )
    base = first.read_bytes()
    for i in range(1, n):
        (stubs / f"libs{i:05d}.so").write_bytes(base.replace(b"libs00000", f"libs{i:05d}".encode()))
    (tmp / "big.c").write_text("int big_fn(void) { return 1; }\n")
    runpath = ":".join(f"$ORIGIN/d{i}" for i in range(n))
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(tmp / "libbig.so"), str(tmp / "big.c"), "-Wl,--no-as-needed",
         "-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}", f"-L{stubs}",
         *(f"-l:libs{i:05d}.so" for i in range(n))],
        check=True,
    )  # fmt: skip
    return tmp / "libbig.so", first


def _quiet_main(args: list[str]) -> int:
    import contextlib
    import io

    from cudaship.cli.main import main

    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(args)
    del out  # the report is not the measure: what reading the input cost is
    return code


def _audit_quadratic(tmp: Path) -> tuple[int, str, int]:
    import zipfile

    lib, _ = _hostile_library(tmp)
    wheel = tmp / "big-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: big\nVersion: 1.0\n")
        zf.writestr(
            "big-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n",
        )
        zf.write(lib, "big/libbig.so")
        zf.writestr("big-1.0.dist-info/RECORD", "")
    from cudaship.checks import resolve

    contexts: list[object] = []
    original = resolve.search_path

    def spy(ctx, path, report):  # type: ignore[no-untyped-def]
        contexts.append(ctx)
        return original(ctx, path, report)

    resolve.search_path = spy  # type: ignore[assignment]
    _reset()
    code = _quiet_main(["audit", "--offline", str(wheel)])
    probes = contexts[0].resolve_probes  # type: ignore[attr-defined]
    return wheel.stat().st_size, f"exit {code}; {probes:,} probes", probes


def _doctor_quadratic(tmp: Path) -> tuple[int, str, int]:
    import shutil

    lib, _ = _hostile_library(tmp)
    site = tmp / "site"
    (site / "big").mkdir(parents=True)
    shutil.copy(lib, site / "big" / "libbig.so")
    (site / "big-1.0.dist-info").mkdir()
    (site / "big-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: big\nVersion: 1.0\n")
    (site / "big-1.0.dist-info" / "RECORD").write_text("big/libbig.so,,\n")
    from cudaship.checks import environment

    graphs: list[object] = []
    original = environment.check_environment

    def spy(env, graph):  # type: ignore[no-untyped-def]
        graphs.append(graph)
        return original(env, graph)

    environment.check_environment = spy  # type: ignore[assignment]
    _reset()
    code = _quiet_main(["doctor", "--env", str(site), "--no-system"])
    listings, probes = graphs[0].search_work  # type: ignore[attr-defined]
    return (
        lib.stat().st_size,
        f"exit {code}; {listings:,} directories listed, {probes} probes",
        listings + probes,
    )


def _mirror(tmp: Path) -> tuple[int, str, int]:
    import http.server
    import threading

    from tests.security.test_inputs import _Forever

    from cudaship.errors import ToolkitError
    from cudaship.toolkit import download
    from cudaship.toolkit.records import Observer

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Forever)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/x.tar.xz"
    cap = 16 << 20
    _reset()
    try:
        download._download(url, tmp / "x.part", "x.tar.xz", None, Observer(), download.FetchOptions(
            retries=0, timeout=10, max_bytes=cap))  # fmt: skip
        outcome = "downloaded"
    except ToolkitError as e:
        outcome = e.message[-60:]
    server.shutdown()
    return cap, f"{outcome}; part file kept: {(tmp / 'x.part').exists()}", cap


def _provenance(tmp: Path) -> tuple[int, str, int]:
    from cudaship.errors import CudashipError
    from cudaship.inspection.provenance import read_provenance

    text = '{"a":' * 100_000 + "1" + "}" * 100_000
    (tmp / "provenance.json").write_text(text)
    _reset()
    try:
        read_provenance(tmp)
        return len(text), "read", 0
    except CudashipError as e:
        return len(text), e.message, 0


ROUND3 = {
    "policy-glob-backtracking": _policy_glob,
    "env-dev-zero-fifo-latin1-200k-field": _env,
    "wheelhouse-bzip2-bomb-metadata": _wheelhouse,
    "index-remote-bzip2-bomb-metadata": lambda tmp: _index(tmp, "bad-lie", "bad_lie-1.0-py3-none-any.whl"),
    "index-file-url-and-redirect": lambda tmp: _index(tmp, "secret", ""),
    "audit-3000-needed-3000-runpath": _audit_quadratic,
    "doctor-env-3000-needed-3000-runpath": _doctor_quadratic,
    "mirror-endless-body": _mirror,
    "provenance-100k-deep": _provenance,
}


def child(name: str) -> None:
    import resource
    import tracemalloc

    tracemalloc.start()
    size, outcome, work = _case(name)
    peak = tracemalloc.get_traced_memory()[1]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        json.dumps({"case": name, "size": size, "peak": peak, "rss": rss, "work": work, "outcome": outcome})
    )


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    rows = []
    for name in CASES:
        done = subprocess.run(
            [sys.executable, __file__, "--child", name], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            rows.append({"case": name, "error": done.stderr.strip().splitlines()[-1:]})
            continue
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("| case | input | peak allocation | ceiling (256x + 128 MiB) | peak / ceiling | outcome |")
    print("|---|---:|---:|---:|---:|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['case']} | | | | | FAILED {r['error']} |")
            continue
        ceiling = 256 * r["size"] + (128 << 20)
        outcome = r["outcome"][:90].replace("|", "\\|")
        print(
            f"| {r['case']} | {r['size']:,} B | {r['peak'] / 2**20:.1f} MiB"
            f" | {ceiling / 2**20:,.0f} MiB | {r['peak'] / ceiling:.3f} | {outcome} |"
        )
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
