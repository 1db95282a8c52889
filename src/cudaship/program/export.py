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

import dataclasses
import importlib
import importlib.util
import os
import platform as _platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cudaship.errors import ProgramError, UsageError
from cudaship.hashing import sha256_file
from cudaship.inspection.program import read_program
from cudaship.inspection.program_records import ProgramInfo, Provenance
from cudaship.knowledge.platforms import machine_of, os_of, platform_name
from cudaship.program.check import runtime_problems
from cudaship.program.provenance import write_provenance
from cudaship.program.runner_child import driver_version
from cudaship.program.toolchain import Toolchain, linux_toolchain, parse_target, windows_toolchain

PACKAGE_NAME = "model.pt2"
REFERENCE_NAME = "reference.pt"
EAGER_NAME = "eager/exported_program.pt2"


#: what torch prints at import when numpy is missing (torch/csrc/utils/tensor_numpy.cpp)
_NUMPY_WARNING = "Failed to initialize NumPy"


def import_torch(notes: list[str] | None = None) -> Any:
    """torch, or a one-line error saying how to get it.

    torch warns "Failed to initialize NumPy" at import when numpy is missing; the extra ``cudaship[torch]``
    installs numpy with torch. Without it, export works (it never converts to numpy): the warning becomes one
    note in ``notes`` instead of a message on stderr."""
    numpy_missing = importlib.util.find_spec("numpy") is None
    if numpy_missing:  # for the whole process: torch may say it again at first use, not only at import
        warnings.filterwarnings("ignore", message=f".*{_NUMPY_WARNING}")
    try:
        torch = importlib.import_module("torch")
    except ImportError as e:
        raise ProgramError(
            f"torch is not importable ({e}); install the extra: pip install 'cudaship[torch]'"
        ) from None
    if numpy_missing and notes is not None:
        notes.append(
            "numpy is not installed (torch asks for it; not needed to export): "
            "pip install 'cudaship[torch]' installs it"
        )
    return torch


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


def _demo_attention(torch: Any) -> tuple[Any, tuple[Any, ...]]:
    """A transformer block: self-attention (4 heads) and an MLP, each with a residual and a LayerNorm."""

    class Block(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(64, 4, batch_first=True)
            self.norm1 = torch.nn.LayerNorm(64)
            self.mlp = torch.nn.Sequential(
                torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)
            )
            self.norm2 = torch.nn.LayerNorm(64)

        def forward(self, x: Any) -> Any:
            y, _ = self.attn(x, x, x, need_weights=False)
            x = self.norm1(x + y)
            return self.norm2(x + self.mlp(x))

    torch.manual_seed(0)
    return Block(), (torch.randn(2, 16, 64),)


#: Built-in small models: name -> builder(torch) -> (module, example inputs).
DEMO_MODELS: dict[str, Callable[[Any], tuple[Any, tuple[Any, ...]]]] = {
    "demo-mlp": _demo_mlp,
    "demo-conv": _demo_conv,
    "demo-attention": _demo_attention,
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
    #: what export's own check of the package found wrong (``program export`` exits 1): a Linux wrapper
    #: with its own static libstdc++, a Windows one importing a MinGW runtime DLL, a wrong format
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  #: the compiler chosen and the ones skipped, numpy missing


def _host_target() -> str:
    return platform_name(os_of(sys.platform), machine_of(_platform.machine()))


#: Called with each phase of an export as it starts (``importing torch``, ``compiling with AOTInductor``).
Phases = Callable[[str], None]


def _quiet(_phase: str) -> None:
    pass


def _torchs(filename: str) -> bool:
    """Whether a warning issued at ``filename`` during an export is torch's: in torch's own files, in code
    it generates (``<eval_with_key>``), or in the standard library on its behalf (``copyreg.py``, when torch
    pickles a tree spec: only torch calls into it there)."""
    parts = Path(filename).parts
    if "torch" in parts or "torchgen" in parts or filename.startswith("<"):
        return True
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return Path(filename).parent == stdlib


@contextmanager
def torch_warnings(recorded: list[str]) -> Iterator[None]:
    """Warnings torch issues inside the block (its ``FutureWarning`` about an API it changes, ...) go into
    ``recorded`` as ``torch: FutureWarning: <first line>``, each once, instead of onto stderr, where they read
    as cudaship's own; any other warning is shown as Python would, each once.

    Each warning is handled as it is issued and nothing else is kept: recording them all
    (``catch_warnings(record=True)``) held every repeat of a warning issued in a loop, and an export of the
    test model with torch 2.13 (CPU) grew to 16 GB and spent minutes showing them afterwards."""
    numpy_missing = importlib.util.find_spec("numpy") is None
    seen: set[tuple[str, str, str, int]] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        if numpy_missing:  # a note of its own (import_torch)
            warnings.filterwarnings("ignore", message=f".*{_NUMPY_WARNING}")
        python_shows = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: Any = None,
            line: str | None = None,
        ) -> None:
            if _torchs(filename):
                first = (str(message).strip().splitlines() or [""])[0]
                text = f"torch: {category.__name__}: {first}"
                if text not in recorded:
                    recorded.append(text)
                return
            key = (str(message), category.__name__, filename, lineno)
            if key not in seen:
                seen.add(key)
                python_shows(message, category, filename, lineno, file, line)

        warnings.showwarning = show  # restored by catch_warnings
        yield
    if numpy_missing:  # for the whole process, as import_torch says
        warnings.filterwarnings("ignore", message=f".*{_NUMPY_WARNING}")


def export_program(
    spec: str,
    out_dir: Path,
    *,
    device: str = "auto",
    cxx: str | None = None,
    overwrite: bool = False,
    target_platform: str | None = None,
    windows_cuda: Path | None = None,
    windows_torch: Path | None = None,
    on_phase: Phases | None = None,
) -> ExportResult:
    """Export MODEL with AOTInductor into ``out_dir`` (created), with reference data and provenance.

    ``target_platform``: ``windows-x86_64`` cross-compiles the wrapper for Windows (see
    :mod:`cudaship.program.toolchain` for what that needs); None: this machine's platform. The compiler is
    checked before compiling and the package after (:func:`self_check`). ``on_phase``: told each phase as
    it starts (an export is silent for 20 s or more otherwise). Warnings torch issues meanwhile are in the
    result's ``warnings`` (:func:`torch_warnings`), not on stderr."""
    phase = on_phase or _quiet
    recorded: list[str] = []
    with torch_warnings(recorded):
        result = _export_program(
            spec, out_dir, device, cxx, overwrite, target_platform, windows_cuda, windows_torch, phase
        )
    return dataclasses.replace(result, warnings=(*result.warnings, *recorded))


def _export_program(
    spec: str,
    out_dir: Path,
    device: str,
    cxx: str | None,
    overwrite: bool,
    target_platform: str | None,
    windows_cuda: Path | None,
    windows_torch: Path | None,
    phase: Phases,
) -> ExportResult:
    target = parse_target(target_platform) or _host_target()
    notes: list[str] = []
    phase("importing torch")
    torch = import_torch(notes)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ProgramError("--device cuda: this torch sees no CUDA GPU (export for CUDA needs one)")
    package = out_dir / PACKAGE_NAME
    if package.exists() and not overwrite:
        raise UsageError(f"{package} exists (use --overwrite)")
    inductor_config: Any = importlib.import_module("torch._inductor.config")
    cuda_train = getattr(torch.version, "cuda", None)

    with tempfile.TemporaryDirectory(prefix="cudaship-toolchain-") as work:
        if target.startswith("windows") and not sys.platform.startswith("win"):  # a cross compile
            if not hasattr(inductor_config.aot_inductor, "cross_target_platform"):
                raise ProgramError(
                    f"--target-platform {target}: torch {torch.__version__} has no "
                    "aot_inductor.cross_target_platform (AOTInductor's Windows cross compile)"
                )
            chain = windows_toolchain(
                cxx,
                windows_cuda,
                windows_torch,
                cuda_train,
                Path(work),
                cuda=device == "cuda",
                torch_dir=Path(torch.__file__).parent,
                torch_version=str(torch.__version__),
            )
        elif target == _host_target() and sys.platform.startswith("linux"):
            chain = linux_toolchain(cxx, Path(work))
            inductor_config.cpp.cxx = (None, chain.cxx)
        elif target != _host_target():
            raise UsageError(
                f"--target-platform {target}: export on {target} (this machine is {_host_target()})"
            )
        else:
            chain = Toolchain(cxx=cxx or str(inductor_config.cpp.cxx[-1]))
            if cxx is not None:
                inductor_config.cpp.cxx = (None, cxx)
        notes.extend(chain.notes)
        out_dir.mkdir(parents=True, exist_ok=True)
        result = _export(torch, spec, out_dir, package, device, chain, target, cuda_train, notes, phase)
    return result


def _export(
    torch: Any,
    spec: str,
    out_dir: Path,
    package: Path,
    device: str,
    chain: Any,
    target: str,
    cuda_train: str | None,
    notes: list[str],
    phase: Phases,
) -> ExportResult:
    phase(f"loading the model {spec}")
    model, inputs = load_model(spec, torch)
    model = model.to(device).eval()
    inputs = tuple(x.to(device) if hasattr(x, "to") else x for x in inputs)
    # keys this torch lacks are left out (precompile_headers is older than the cross compile, but checked)
    configs = {k: v for k, v in chain.config.items() if _has_config(k)}
    saved = {k: os.environ.get(k) for k in chain.env}
    os.environ.update(chain.env)
    if "WINDOWS_CUDA_HOME" in chain.env:  # read by torch.utils.cpp_extension at its import: set it there too
        cpp_extension: Any = importlib.import_module("torch.utils.cpp_extension")
        cpp_extension.WINDOWS_CUDA_HOME = chain.env["WINDOWS_CUDA_HOME"]
    started = time.perf_counter()
    try:
        with torch.no_grad():
            phase(f"exporting the graph (torch.export, {device})")
            exported = torch.export.export(model, inputs)
            eager_out = model(*inputs)
            phase(f"compiling with AOTInductor ({Path(chain.cxx).name}; the longest step)")
            try:
                torch._inductor.aoti_compile_and_package(
                    exported, package_path=str(package), inductor_configs=configs or None
                )
            except Exception as e:  # compiler errors are long: the first line and the compiler's first error
                raise ProgramError(f"AOTInductor compile failed: {_compile_error(e)}") from None
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    export_s = time.perf_counter() - started
    phase("saving the reference data and the exported program")
    leaves = torch.utils._pytree.tree_leaves(eager_out)
    torch.save(
        {"inputs": [x.detach().cpu() for x in inputs], "outputs": [y.detach().cpu() for y in leaves]},
        out_dir / REFERENCE_NAME,
    )
    (out_dir / EAGER_NAME).parent.mkdir(exist_ok=True)
    torch.export.save(exported, str(out_dir / EAGER_NAME))

    phase("checking the package")
    info = read_program(package)
    gpu_name = capability = driver = None
    if device == "cuda":
        index = torch.cuda.current_device()
        gpu_name = torch.cuda.get_device_name(index)
        major, minor = torch.cuda.get_device_capability(index)
        capability = f"{major}.{minor}"

        driver = driver_version()
    prov = Provenance(
        package=PACKAGE_NAME,
        package_sha256=sha256_file(package),
        torch_version=str(torch.__version__),
        cuda_train=cuda_train,
        device=device,
        target_platform=target,
        device_code_archs=(*info.sass, *info.ptx),
        gpu_name=gpu_name,
        gpu_capability=capability,
        driver=driver,
        compiler=compiler_version(chain.cxx),
        python=_platform.python_version(),
        model=spec,
        reference=REFERENCE_NAME,
        exported_program=EAGER_NAME,
        created=datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        import_libraries=tuple(getattr(chain, "import_libraries", ())),
    )
    write_provenance(out_dir, prov)
    return ExportResult(out_dir, prov, info, export_s, (), self_check(info, target, chain.cxx), tuple(notes))


def _has_config(key: str) -> bool:
    node: Any = importlib.import_module("torch._inductor.config")
    for part in key.split("."):
        if not hasattr(node, part):
            return False
        node = getattr(node, part)
    return True


def _compile_error(error: Exception) -> str:
    """``CppCompileError: C++ compile error; first error: ld: cannot find -ltorch_cuda``: the exception's
    first line and the first line of the compiler's output that says what failed."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    head = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    markers = ("error:", "undefined reference", "cannot find", "fatal", "No such file")
    first = next((line for line in lines[1:] if any(m in line for m in markers)), None)
    return f"{head}; first error: {first[:400]}" if first else head


def self_check(info: ProgramInfo, target: str, cxx: str) -> tuple[str, ...]:
    """What is wrong with an exported package for ``target``: the checks ``program check`` runs on the
    wrapper's C++ runtime (a static libstdc++ in a Linux wrapper; a MinGW runtime DLL imported by a Windows
    one), and a wrapper of the wrong format."""

    # a member that did not read was not checked: that is not a pass
    problems = [f"cannot check {error}" for error in info.errors]
    if not info.libraries:
        problems.append("no compiled wrapper library in the package: nothing to check or load")
    want = target.split("-")[0]
    for member in info.libraries:
        report = member.report
        fmt = report.format.value if report is not None and report.format is not None else None
        expected = {"linux": "elf", "windows": "pe"}.get(want)
        if expected is not None and fmt is not None and fmt != expected:
            name = member.name.rsplit("/", 1)[-1]
            problems.append(f"{name} is {fmt.upper()}, not a {want} library ({expected.upper()})")
    problems.extend(runtime_problems(info, cxx))
    return tuple(problems)
