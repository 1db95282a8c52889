"""``program export``: torch.export + AOTInductor, with the reference data and provenance a target needs.

Needs torch (the optional extra ``cudaship[torch]``); imported only here and in the run child. MODEL is a
built-in demo (:data:`DEMO_MODELS`) or ``module:function`` / ``path/to/file.py:function`` where the function
returns ``(module, example_inputs)``.

The export directory holds:

- ``model.pt2``: the AOTInductor package;
- ``reference.pt``: ``{"inputs": [...], "outputs": [...]}`` (eager outputs on the export machine, on CPU);
- ``eager/exported_program.pt2``: the ``torch.export`` program (``torch.export.save``), so ``program run``
  can time eager in the same process as the compiled program;
- ``provenance.json``: see :mod:`cudaship.program.provenance`.
"""

from __future__ import annotations

import importlib
import importlib.util
import platform as _platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cudaship.errors import ProgramError, UsageError
from cudaship.hashing import sha256_file
from cudaship.program.provenance import write_provenance
from cudaship.program.records import ProgramInfo, Provenance

PACKAGE_NAME = "model.pt2"
REFERENCE_NAME = "reference.pt"
EAGER_NAME = "eager/exported_program.pt2"


def import_torch() -> Any:
    """torch, or a one-line error saying how to get it."""
    try:
        return importlib.import_module("torch")
    except ImportError as e:
        raise ProgramError(
            f"torch is not importable ({e}); install the extra: pip install 'cudaship[torch]'"
        ) from None


def _demo_mlp(torch: Any) -> tuple[Any, tuple[Any, ...]]:
    class MLP(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.l1 = torch.nn.Linear(64, 128)
            self.l2 = torch.nn.Linear(128, 16)

        def forward(self, x: Any) -> Any:
            return self.l2(torch.relu(self.l1(x)))

    torch.manual_seed(0)
    return MLP(), (torch.randn(8, 64),)


def _demo_conv(torch: Any) -> tuple[Any, tuple[Any, ...]]:
    class Conv(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.c = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x: Any) -> Any:
            y = torch.nn.functional.gelu(self.c(x)).mean(dim=(2, 3))
            return torch.softmax(self.fc(y), dim=-1)

    torch.manual_seed(0)
    return Conv(), (torch.randn(2, 3, 16, 16),)


#: Built-in small models: name -> builder(torch) -> (module, example inputs).
DEMO_MODELS: dict[str, Callable[[Any], tuple[Any, tuple[Any, ...]]]] = {
    "demo-mlp": _demo_mlp,
    "demo-conv": _demo_conv,
}


def load_model(spec: str, torch: Any) -> tuple[Any, tuple[Any, ...]]:
    """Resolve MODEL to ``(module, inputs)``: a demo name, ``pkg.module:function`` or ``file.py:function``."""
    if spec in DEMO_MODELS:
        return DEMO_MODELS[spec](torch)
    target, sep, func_name = spec.rpartition(":")
    if not sep or not target or not func_name:
        demos = ", ".join(DEMO_MODELS)
        raise UsageError(f"MODEL {spec!r}: expected module:function, file.py:function or a demo ({demos})")
    try:
        if target.endswith(".py"):
            file = Path(target)
            if not file.is_file():
                raise UsageError(f"MODEL {spec!r}: no such file {target}")
            module_spec = importlib.util.spec_from_file_location(file.stem, file)
            if module_spec is None or module_spec.loader is None:
                raise UsageError(f"MODEL {spec!r}: cannot import {target}")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except UsageError:
        raise
    except Exception as e:  # the user's module failed to import: say so in one line
        raise UsageError(f"MODEL {spec!r}: importing {target} failed: {type(e).__name__}: {e}") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise UsageError(f"MODEL {spec!r}: {target} has no function {func_name}")
    result = func()
    if not (isinstance(result, tuple) and len(result) == 2):
        raise UsageError(f"MODEL {spec!r}: {func_name}() must return (module, example_inputs)")
    model, inputs = result
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return model, inputs


def compiler_version(cxx: str) -> str | None:
    """``/usr/bin/g++: g++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0``, None when it cannot run."""
    exe = shutil.which(cxx) or cxx
    try:
        done = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = (done.stdout or done.stderr).strip().splitlines()
    return f"{exe}: {first[0]}" if first else exe


@dataclass(frozen=True)
class ExportResult:
    directory: Path
    provenance: Provenance
    program: ProgramInfo
    export_s: float
    warnings: tuple[str, ...]


def export_program(
    spec: str, out_dir: Path, *, device: str = "auto", cxx: str | None = None, overwrite: bool = False
) -> ExportResult:
    """Export MODEL with AOTInductor into ``out_dir`` (created), with reference data and provenance."""
    torch = import_torch()
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ProgramError("--device cuda: this torch sees no CUDA GPU (export for CUDA needs one)")
    out_dir.mkdir(parents=True, exist_ok=True)
    package = out_dir / PACKAGE_NAME
    if package.exists() and not overwrite:
        raise UsageError(f"{package} exists (use --overwrite)")
    inductor_config: Any = importlib.import_module("torch._inductor.config")

    if cxx is not None:
        inductor_config.cpp.cxx = (None, cxx)
    used_cxx = str(inductor_config.cpp.cxx[-1])

    model, inputs = load_model(spec, torch)
    model = model.to(device).eval()
    inputs = tuple(x.to(device) if hasattr(x, "to") else x for x in inputs)
    started = time.perf_counter()
    with torch.no_grad():
        exported = torch.export.export(model, inputs)
        eager_out = model(*inputs)
        try:
            torch._inductor.aoti_compile_and_package(exported, package_path=str(package))
        except Exception as e:  # compiler errors are long: keep the first line
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise ProgramError(f"AOTInductor compile failed: {type(e).__name__}: {first}") from None
    export_s = time.perf_counter() - started
    leaves = torch.utils._pytree.tree_leaves(eager_out)
    torch.save(
        {"inputs": [x.detach().cpu() for x in inputs], "outputs": [y.detach().cpu() for y in leaves]},
        out_dir / REFERENCE_NAME,
    )
    (out_dir / EAGER_NAME).parent.mkdir(exist_ok=True)
    torch.export.save(exported, str(out_dir / EAGER_NAME))

    from cudaship.program.pt2 import libstdcxx_copy
    from cudaship.program.reader import read_program

    info = read_program(package)
    gpu_name = capability = driver = None
    if device == "cuda":
        index = torch.cuda.current_device()
        gpu_name = torch.cuda.get_device_name(index)
        major, minor = torch.cuda.get_device_capability(index)
        capability = f"{major}.{minor}"
        from cudaship.program.runner_child import driver_version

        driver = driver_version()
    machine = _platform.machine().lower().replace("amd64", "x86_64").replace("arm64", "aarch64")
    os_name = {"linux": "linux", "win32": "windows", "darwin": "macos"}.get(sys.platform, sys.platform)
    prov = Provenance(
        package=PACKAGE_NAME,
        package_sha256=sha256_file(package),
        torch_version=str(torch.__version__),
        cuda_train=getattr(torch.version, "cuda", None),
        device=device,
        target_platform=f"{info.platform or os_name}-{info.machine or machine}",
        device_code_archs=(*info.sass, *info.ptx),
        gpu_name=gpu_name,
        gpu_capability=capability,
        driver=driver,
        compiler=compiler_version(used_cxx),
        python=_platform.python_version(),
        model=spec,
        reference=REFERENCE_NAME,
        exported_program=EAGER_NAME,
        created=datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
    )
    write_provenance(out_dir, prov)
    warnings = []
    for m in info.libraries:
        count = libstdcxx_copy(m.report)
        if count:
            warnings.append(
                f"{m.name.rsplit('/', 1)[-1]} carries its own static libstdc++ ({count} std::locale symbols, "
                f"no libstdc++.so.6 needed; compiler {used_cxx}): loading it in a process that has libstdc++ "
                "crashes; re-export with --cxx pointing at a compiler that links libstdc++ dynamically"
            )
    return ExportResult(out_dir, prov, info, export_s, tuple(warnings))
