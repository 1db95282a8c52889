"""The child process of ``program run``: load the program, run it, time it against eager, compare.

Run as a script (``python -X faulthandler runner_child.py ...``), so it needs only the standard library and
torch: no cudaship import, no compiler. It writes its JSON result to ``--json-out`` twice: first the
environment (before loading, so a crash while loading still leaves the driver, GPU and runtime versions for
the parent to print), then the full result. Exit status 0 when it ran (the parent compares), 2 on a caught
error (the message is in the JSON), and whatever signal kills it otherwise.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import importlib
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

#: Compilers whose presence on PATH would mean the target could build code (the run proves it need not).
COMPILERS = ("cc", "c++", "gcc", "g++", "clang", "clang++", "nvcc", "cl")
CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


def driver_version() -> str | None:
    """The NVIDIA driver's version (``580.159.04``): /proc on Linux, else NVML through ctypes."""
    proc = Path("/proc/driver/nvidia/version")
    try:
        for word in proc.read_text(errors="replace").split():
            parts = word.split(".")
            if len(parts) >= 2 and all(p.isdigit() for p in parts) and int(parts[0]) >= 100:
                return word
    except OSError:
        pass
    for name in ("libnvidia-ml.so.1", "nvml.dll"):
        try:
            nvml = ctypes.CDLL(name)
        except OSError:
            continue
        if nvml.nvmlInit_v2() != 0:
            return None
        buf = ctypes.create_string_buffer(96)
        ok = nvml.nvmlSystemGetDriverVersion(buf, 96) == 0
        nvml.nvmlShutdown()
        return buf.value.decode() if ok else None
    return None


def _libcuda() -> Any:
    for name in ("libcuda.so.1", "nvcuda.dll"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def device_facts() -> dict[str, Any]:
    """Device 0's name and capability, the driver's CUDA version and memory-pool support (driver API)."""
    facts: dict[str, Any] = {}
    cuda = _libcuda()
    if cuda is None:
        facts["error"] = "no libcuda.so.1 / nvcuda.dll: no NVIDIA driver"
        return facts
    if cuda.cuInit(0) != 0:
        facts["error"] = "cuInit failed: no usable GPU"
        return facts
    version = ctypes.c_int(0)
    if cuda.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value:
        facts["driver_cuda"] = f"{version.value // 1000}.{(version.value % 1000) // 10}"
    device = ctypes.c_int(0)
    if cuda.cuDeviceGet(ctypes.byref(device), 0) == 0:
        value = ctypes.c_int(0)
        minor = ctypes.c_int(0)
        if (
            cuda.cuDeviceGetAttribute(
                ctypes.byref(value), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device
            )
            == 0
            and cuda.cuDeviceGetAttribute(
                ctypes.byref(minor), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device
            )
            == 0
        ):
            facts["capability"] = f"{value.value}.{minor.value}"
        name = ctypes.create_string_buffer(256)
        if cuda.cuDeviceGetName(name, 256, device) == 0:
            facts["gpu"] = name.value.decode("utf-8", "replace")
        if (
            cuda.cuDeviceGetAttribute(ctypes.byref(value), CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device)
            == 0
        ):
            facts["memory_pools"] = bool(value.value)
    return facts


def environment(torch: Any | None, device: str) -> dict[str, Any]:
    env: dict[str, Any] = {"python": platform.python_version()}
    found = [c for c in COMPILERS if shutil.which(c)]
    env["compiler_on_path"] = shutil.which(found[0]) if found else None
    if torch is not None:
        env["torch"] = str(torch.__version__)
        env["torch_cuda"] = getattr(torch.version, "cuda", None)
        lib = Path(torch.__file__).parent / "lib"
        roots = [str(lib), *(str(Path(p) / "nvidia") for p in sys.path if p)]
        cudart: set[str] = set()
        for root in roots:
            for pattern in (
                "libcudart.so*",
                "*/lib/libcudart.so*",
                "cudart64_*.dll",
                "*/bin/**/cudart64_*.dll",
            ):
                cudart.update(
                    os.path.basename(p) for p in glob.glob(os.path.join(root, pattern), recursive=True)
                )
        env["cudart"] = sorted(cudart)
    if device == "cuda":
        env["driver"] = driver_version()
        env.update(device_facts())
    if torch is not None and device == "cuda":
        try:
            if torch.cuda.is_available():
                env["gpu"] = torch.cuda.get_device_name(0)
                major, minor = torch.cuda.get_device_capability(0)
                env["capability"] = f"{major}.{minor}"
        except Exception as e:  # a broken CUDA setup is what the person needs to see
            env["error"] = f"torch.cuda: {type(e).__name__}: {e}"
    return env


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def _median_ms(fn: Any, runs: int, sync: Any) -> float:
    times = []
    for _ in range(runs):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1000.0)
    return float(statistics.median(times))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json-out", required=True, type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--diagnose", action="store_true")
    parser.add_argument("--package", type=Path)
    parser.add_argument("--reference", type=Path)
    parser.add_argument("--eager", type=Path)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"stage": "import"}
    _write(args.json_out, result)
    try:
        torch: Any = importlib.import_module("torch")
    except ImportError as e:
        result.update(
            stage="import",
            error=f"torch is not importable here: {e}",
            environment=environment(None, args.device),
        )
        _write(args.json_out, result)
        return 2
    result["environment"] = environment(torch, args.device)
    if args.diagnose:
        result["stage"] = "done"
        _write(args.json_out, result)
        return 0
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        result.update(stage="device", error="this torch sees no CUDA GPU")
        _write(args.json_out, result)
        return 2

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    try:
        ref = torch.load(str(args.reference), weights_only=True)
        inputs = [x.to(args.device) for x in ref["inputs"]]
        expected = list(ref["outputs"])
    except Exception as e:
        result.update(stage="reference", error=f"cannot read the reference: {type(e).__name__}: {e}")
        _write(args.json_out, result)
        return 2
    result["stage"] = "load"
    result["loader"] = "torch._inductor.aoti_load_package"
    _write(args.json_out, result)
    if cuda:
        torch.zeros(1, device="cuda")  # a CUDA context first: the loader expects one
        sync()
    start = time.perf_counter()
    try:
        compiled = torch._inductor.aoti_load_package(str(args.package), device_index=0 if cuda else -1)
    except Exception as e:
        result.update(error=f"load failed: {_first_line(e)}")
        _write(args.json_out, result)
        return 2
    sync()
    result["load_s"] = time.perf_counter() - start
    result["stage"] = "run"
    _write(args.json_out, result)
    with torch.no_grad():
        try:
            out = compiled(*inputs)
            sync()
        except Exception as e:
            result.update(error=f"run failed: {_first_line(e)}")
            _write(args.json_out, result)
            return 2
        leaves = torch.utils._pytree.tree_leaves(out)
        if len(leaves) != len(expected):
            result.update(
                # no cudaship import in the child: the agreement written here
                error=f"the program returned {len(leaves)} output{'' if len(leaves) == 1 else 's'}, "
                f"the reference has {len(expected)}"
            )
            _write(args.json_out, result)
            return 2
        diffs = [
            float((a.detach().cpu().float() - b.float()).abs().max()) if a.numel() else 0.0
            for a, b in zip(leaves, expected, strict=True)
        ]
        result["max_abs_diff"] = max(diffs) if diffs else 0.0
        result["latency_ms"] = _median_ms(lambda: compiled(*inputs), args.runs, sync)
        if args.eager is not None and args.eager.is_file():
            result["stage"] = "eager"
            _write(args.json_out, result)
            try:
                eager = torch.export.load(str(args.eager)).module()
                eager_out = torch.utils._pytree.tree_leaves(eager(*inputs))
                sync()
                result["eager_max_abs_diff"] = max(
                    (
                        float((a.detach().cpu().float() - b.detach().cpu().float()).abs().max())
                        for a, b in zip(leaves, eager_out, strict=False)
                    ),
                    default=0.0,
                )
                result["eager_latency_ms"] = _median_ms(lambda: eager(*inputs), args.runs, sync)
            except Exception as e:
                result["eager_error"] = _first_line(e)
    result["stage"] = "done"
    _write(args.json_out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
