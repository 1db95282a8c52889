"""``program check``: will this exported program load and run on that target?

Checks, each one :class:`~cudaship.records.findings.CheckResult` of family ``program`` (every check runs; one
failing never stops the others; a warning is a failure of severity warning, which passes):

- ``package``: the package reads, every member inside reads, and its sha256 is the one provenance recorded;
- ``reference``: the reference inputs/outputs are there (``program run`` compares with them);
- ``platform``: the package's target platform is the runtime's (a Linux ``.so`` never loads on Windows);
- ``train``: the exact CUDA train the program was exported with is the runtime's. Every CUDA 13 train loads
  the same ``cudart`` major, so a mismatch would not fail at load time by itself;
- ``arch``: every kernel's device code runs on the GPU by the runs-on rules (``sm_90a`` runs on 9.0 only);
- ``driver``: the driver runs the device code and the exported CUDA train;
- ``libstdc++``: no library carries its own static copy of libstdc++ (the H200 loader crash, docs/program.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from cudaship.errors import CudashipError, KnowledgeError, NoGpuError, ProgramError, UsageError
from cudaship.hashing import sha256_file
from cudaship.inspection.program import find_package, read_program
from cudaship.inspection.program_records import ProgramInfo, Provenance, TrainAnswer, train_answer
from cudaship.inspection.provenance import provenance_present, read_provenance
from cudaship.knowledge.archs import Arch, parse_arch
from cudaship.knowledge.driver import parse_driver
from cudaship.knowledge.gpus import capability_of, group_for
from cudaship.knowledge.platforms import normalize_machine, os_of, platform_from_tag
from cudaship.knowledge.program_runtimes import is_compiler_runtime, runtime_name
from cudaship.knowledge.releases import minor_compat_floor
from cudaship.knowledge.runs_on import Verdict, runs_on
from cudaship.knowledge.trains import Train, parse_train
from cudaship.program.records import FAMILY, CheckReport, Target, libstdcxx_copy
from cudaship.program.runner_child import device_facts, driver_version
from cudaship.program.toolchain import parse_target
from cudaship.records.binary import DeviceCode, DeviceCodeKind, FileFormat
from cudaship.records.findings import CheckResult, Severity, failed, passed, skipped
from cudaship.wheel.archive import WheelArchive
from cudaship.words import count


def target_from_wheel(path: Path) -> Target:
    """The train (from the wheel's ``+cuXYZ`` local tag) and platform (from its tags) of a runtime wheel."""

    with WheelArchive(path) as archive:
        info = archive.info()
    if not info.local or not info.local.lower().startswith("cu"):
        raise UsageError(
            f"{path.name}: its version {info.version!r} carries no CUDA train (+cuXYZ); use --train",
            path=None,
        )
    train = parse_train(info.local.split(".")[0])
    platforms = {platform_from_tag(t.split("-")[-1]).label for t in info.tags}
    platform = sorted(platforms)[0] if len(platforms) == 1 else None
    return Target(train=train.version, train_source=path.name, platform=platform, runtime=path.name)


def gpu_capability(text: str) -> tuple[str, str | None]:
    """``--gpu 8.6`` → (``8.6``, ``8.6 Ampere (A10G, A10)``); ``--gpu "RTX 3090"`` → (``8.6``, ``RTX 3090
    (8.6 Ampere)``): a GPU named is echoed as named (issue 32, class 15), a capability with its group's
    names."""
    arch = capability_of(text)
    group = group_for(arch)
    named = " ".join(text.split())
    if named != arch.capability:
        head = f"{arch.capability} {group.generation}" if group and group.generation else arch.capability
        return arch.capability, f"{named} ({head})"
    return arch.capability, (group.label if group else None)


def _train_of(answer: TrainAnswer) -> Train | None:
    if answer.version is None:
        return None
    try:
        return parse_train(answer.version)
    except CudashipError:
        return None


def _device_groups(info: ProgramInfo) -> list[tuple[str, tuple[DeviceCode, ...]]]:
    """One group per member holding device code (each AOTInductor kernel is its own cubin)."""
    groups = []
    for m in info.members:
        if m.report is not None and m.report.device_code:
            groups.append((m.name.rsplit("/", 1)[-1], m.report.device_code))
    return groups


def _arch_note(info: ProgramInfo) -> str | None:
    specific = [a for a in info.sass if a.endswith("a")]
    if not specific:
        return None
    parts = []
    for name in specific:
        arch = parse_arch(name)
        group = group_for(arch)
        label = f" ({group.generation}: {', '.join(group.names[:3])})" if group and group.generation else ""
        parts.append(f"{name} runs on exactly capability {arch.capability}{label}, no other GPU")
    return "arch-specific device code: " + "; ".join(parts)


def check_arch(
    info: ProgramInfo, capability: str, train: Train | None, gpu_label: str | None = None
) -> CheckResult:
    groups = _device_groups(info)
    if info.device != "cuda" and not groups:
        return skipped(FAMILY, "arch", "a CPU program: no device code")
    if not groups:
        return failed(FAMILY, "arch", "a CUDA program with no device code found in its libraries or cubins")
    failing: list[str] = []
    jit = 0
    for name, entries in groups:
        verdict = runs_on(entries, capability, build_cuda=train)
        if not verdict.runs:
            failing.append(f"{name}: {verdict.reason}")
        elif verdict.verdict.value == "jit":
            jit += 1
    archs = " ".join((*info.sass, *info.ptx))
    gpu = gpu_label or _gpu_label(capability)
    if failing:
        more = f" (and {len(failing) - 1} more)" if len(failing) > 1 else ""
        return failed(
            FAMILY,
            "arch",
            f"device code {archs} does not run on {gpu}: {failing[0]}{more}; "
            f"re-export on a GPU of capability "
            f"{capability} to run there",
        )
    how = f", {jit} through PTX JIT" if jit else ""
    message = (
        f"all {count(len(groups), 'kernel')} run on {gpu} ({archs}{how})"
        if len(groups) != 1
        else f"the kernel runs on {gpu} ({archs}{how})"
    )
    note = _arch_note(info)
    if note:
        return failed(FAMILY, "arch", f"{message}; {note}", severity=Severity.WARNING)
    return passed(FAMILY, "arch", message)


def _gpu_label(capability: str) -> str:
    group = group_for(capability)
    return group.label if group else f"capability {capability}"


def check_driver(info: ProgramInfo, driver: str, train: Train | None, platform: str) -> CheckResult:
    groups = _device_groups(info)
    verdicts: list[tuple[str, Verdict]] = []
    for name, entries in groups:
        # Any capability the code runs on will do: the driver rules are what is asked here.
        cap = _some_capability(entries)
        if cap is not None:
            verdicts.append((name, runs_on(entries, cap, driver, platform=platform, build_cuda=train)))
    failing = [(n, v) for n, v in verdicts if not v.runs]
    if failing:
        name, verdict = failing[0]
        return failed(FAMILY, "driver", f"driver {driver}: {name}: {verdict.reason}")
    if train is not None:
        problem = _train_driver(train, driver, platform)
        if problem is not None:
            return failed(FAMILY, "driver", problem)
    need = {v.min_driver for _, v in verdicts if v.min_driver}
    extra = f" (needs {', '.join(sorted(need))} or newer)" if need else ""
    return passed(FAMILY, "driver", f"driver {driver} runs the device code and CUDA train{extra}")


def _train_driver(train: Train, driver: str, platform: str) -> str | None:

    drv = parse_driver(driver, platform)
    if drv.cuda is not None and drv.cuda.major < train.major:
        return f"{drv.phrase} is older than CUDA {train.major}, which the program was exported with"
    floor = minor_compat_floor(train.major, platform)
    if floor is not None and drv.version is not None and not drv.meets(floor):
        return f"driver {drv.version} is below {floor}, the oldest that runs CUDA {train.major}.x"
    return None


def _some_capability(entries: Sequence[DeviceCode]) -> str | None:
    for entry in entries:
        if entry.kind in (DeviceCodeKind.SASS, DeviceCodeKind.PTX) and not entry.relocatable:
            return Arch.from_sm(entry.sm).capability
    return None


def check_program(
    directory: Path,
    *,
    train: str | None = None,
    wheel: Path | None = None,
    gpu: str | None = None,
    here: bool = False,
    driver: str | None = None,
    platform: str | None = None,
) -> CheckReport:
    """Check the export directory against the target; every check runs, the report says which failed."""
    if not directory.is_dir():
        raise ProgramError(
            "not a directory (program check takes the directory program export wrote)", path=str(directory)
        )
    if train is not None and wheel is not None:
        raise UsageError("--train and --wheel both name the runtime's train: give one")
    target = Target()
    if wheel is not None:
        target = target_from_wheel(wheel)
    elif train is not None:
        target = Target(
            train=parse_train(train).version, train_source="--train", runtime=parse_train(train).tag
        )
    if platform is not None:
        wanted = parse_target(platform)
        if target.platform is not None and target.platform != wanted:
            raise UsageError(f"--platform {platform}: the wheel {target.runtime} is {target.platform}")
        target = _with(target, platform=wanted)
    if gpu is not None:
        capability, label = gpu_capability(gpu)
        target = _with(target, capability=capability, gpu=label)
    if here:
        target = _here(target)
    if driver is not None:
        parse_driver(driver)  # bad input is a one-line error now, not a failed check
        target = _with(target, driver=driver)

    items: list[CheckResult] = []
    prov: Provenance | None = None
    if provenance_present(directory):
        # there but unreadable, not JSON, nested past the loader's depth, not the schema: bad input (exit 2,
        # one line naming the file), not a failed check
        prov = read_provenance(directory)
    else:
        items.append(
            failed(
                FAMILY,
                "provenance",
                "no provenance.json: not a directory written by 'cudaship program export'",
            )
        )
    info: ProgramInfo | None = None
    try:
        package = directory / prov.package if prov else find_package(directory)
        info = read_program(package)
        problems = info.errors
        if prov is not None and sha256_file(package) != prov.package_sha256:
            problems = (*problems, f"{package.name} differs from the sha256 provenance.json recorded")
        if problems:
            items.append(failed(FAMILY, "package", "; ".join(problems)))
        else:
            items.append(
                passed(FAMILY, "package", f"{package.name}: {count(len(info.members), 'member')} read")
            )
    except (ProgramError, OSError) as e:
        items.append(failed(FAMILY, "package", str(e) if isinstance(e, ProgramError) else f"{e}"))
    items.append(_check_reference(directory, prov))
    if here:
        target = _here_runtime(target, info)
    answer = info.train if info is not None else train_answer(None, prov)
    exported_train = _train_of(answer)
    program_platform = (
        f"{info.platform}-{info.machine}" if info and info.platform and info.machine else None
    ) or (prov.target_platform if prov else None)
    if target.platform is None:
        items.append(
            skipped(FAMILY, "platform", f"program for {program_platform}; no runtime platform given")
        )
    elif program_platform == target.platform:
        items.append(passed(FAMILY, "platform", f"program and runtime are {target.platform}"))
    else:
        items.append(
            failed(
                FAMILY,
                "platform",
                f"the program was compiled for {program_platform}; the runtime ({target.runtime}) is "
                f"{target.platform}: export on (or cross-compile for) {target.platform}",
            )
        )
    items.append(_check_train(prov, info, exported_train, target))
    if info is not None:
        if target.capability is not None:
            items.append(check_arch(info, target.capability, exported_train, target.gpu))
        else:
            note = _arch_note(info)
            message = "no GPU given (--gpu or --here)"
            items.append(skipped(FAMILY, "arch", f"{message}; {note}" if note else message))
        if target.driver is not None and info.device == "cuda":
            plat = (target.platform or program_platform or "linux").split("-")[0]
            plat = plat if plat in ("linux", "windows") else "linux"
            items.append(check_driver(info, target.driver, exported_train, plat))
        elif info.device == "cuda":
            items.append(skipped(FAMILY, "driver", "no driver given (--driver or --here)"))
        items.append(_check_libstdcxx(info))
        declared = _check_import_libraries(info, prov)
        if declared is not None:
            items.append(declared)
    return CheckReport(str(directory), prov, info, target, tuple(items))


def _with(target: Target, **changes: str | None) -> Target:
    return replace(target, **changes)


def this_platform() -> str | None:
    """This machine's platform label (``linux-x86_64``), None on a machine CUDA wheels do not target."""
    import platform as _platform
    import sys

    try:
        return f"{os_of(sys.platform)}-{normalize_machine(_platform.machine())}"
    except KnowledgeError:
        return None


def installed_runtime(kind: str, path: list[str] | None = None) -> tuple[str, str | None] | None:
    """The runtime of a ``kind`` program (pt2: torch) installed in this Python (``path``: where to look,
    default ``sys.path``), as (``torch 2.11.0+cu130``, its CUDA train ``13.0`` from the ``+cuXYZ`` local
    version, None for a CPU or untagged build); None when it is not installed. Read from its dist-info, never
    imported."""
    import sys
    from importlib import metadata

    name = runtime_name(kind)
    found = next(iter(metadata.distributions(name=name, path=path if path else sys.path)), None)
    if found is None:
        return None
    version = found.version
    local = version.partition("+")[2].split(".")[0]
    train: str | None = None
    if local.lower().startswith("cu"):
        try:
            train = parse_train(local).version
        except CudashipError:
            train = None
    return f"{name} {version}", train


def _here_runtime(target: Target, info: ProgramInfo | None) -> Target:
    """``--here``: this machine's platform and the train of the runtime installed here, where not given
    (issue 32, class 15: ``--here`` knows both)."""
    if target.platform is None:
        target = _with(target, platform=this_platform())
    if target.train is None and info is not None:
        runtime = installed_runtime(info.kind.value)
        if runtime is not None and runtime[1] is not None:
            label, train = runtime
            target = _with(target, train=train, train_source=f"{label} installed here", runtime=label)
    return target


def _here(target: Target) -> Target:
    """This machine's GPU and driver, through the driver API (no torch needed)."""

    facts = device_facts()
    if "capability" not in facts:
        raise NoGpuError(f"--here: {facts.get('error', 'no NVIDIA GPU found')}")
    return _with(
        target,
        capability=target.capability or facts["capability"],
        gpu=target.gpu or facts.get("gpu"),
        driver=target.driver or driver_version() or facts.get("driver_cuda"),
    )


def _check_reference(directory: Path, prov: Provenance | None) -> CheckResult:
    name = (prov.reference if prov else None) or "reference.pt"
    if not (directory / name).is_file():
        return failed(
            FAMILY, "reference", f"no reference data ({name}): program run has nothing to compare with"
        )
    eager = prov.exported_program if prov else None
    if eager and not (directory / eager).is_file():
        return failed(
            FAMILY,
            "reference",
            f"{name} present; {eager} missing: run cannot time eager",
            severity=Severity.WARNING,
        )
    return passed(FAMILY, "reference", f"{name} present")


def _check_train(
    prov: Provenance | None, info: ProgramInfo | None, exported: Train | None, target: Target
) -> CheckResult:
    if info is not None and info.device != "cuda" and (prov is None or prov.device != "cuda"):
        return skipped(FAMILY, "train", "a CPU program: no CUDA train")
    answer = info.train if info is not None else train_answer(None, prov)
    program = f"the program's CUDA train is {answer.phrase}"
    if target.train is None:
        return skipped(FAMILY, "train", f"{program}; no runtime train given (--train or --wheel)")
    wanted = parse_train(target.train)
    if exported is None:
        return failed(FAMILY, "train", f"{program}: cannot show it matches the runtime's {wanted.tag}")
    if exported.line == wanted.line:
        return passed(FAMILY, "train", f"{program}; the runtime is {wanted.tag}")
    same_major = (
        f"every CUDA {wanted.major} train loads the same cudart major, "
        "so this would not fail at load time by itself; "
        if exported.major == wanted.major
        else ""
    )
    majors = info.cudart_majors if info is not None else ()
    if majors and wanted.major not in majors:
        names = ", ".join(_cudart_name(m, info) for m in majors)
        same_major = (
            f"its wrapper imports {names}, which a {wanted.tag} runtime does not provide (load fails); "
        )
    return failed(
        FAMILY,
        "train",
        f"{program}, but the runtime ({target.train_source}) is {wanted.tag}: "
        f"{same_major}re-export with a {wanted.tag} torch, or run it with a {exported.tag} runtime",
    )


def _cudart_name(major: int, info: ProgramInfo | None) -> str:
    return (
        f"cudart64_{major}.dll"
        if info is not None and info.platform == "windows"
        else f"libcudart.so.{major}"
    )


def runtime_problems(info: ProgramInfo, cxx: str | None = None) -> list[str]:
    """The wrapper's C++ runtime, as a target loads it: a Linux library with its own static libstdc++ (the
    H200 crash in std::regex), a Windows library importing a MinGW runtime DLL no Windows machine has.
    Shared by ``program check`` and ``program export``'s check of its own output."""

    compiler = f" (compiler {cxx})" if cxx else ""
    problems = []
    for m in info.libraries:
        name = m.name.rsplit("/", 1)[-1]
        count = libstdcxx_copy(m.report)
        if count:
            problems.append(
                f"{name} links libstdc++ statically{compiler} "
                f"({count} std::locale symbols exported, libstdc++.so.6 not needed): "
                "loading it into a process that has libstdc++ crashes in std::regex "
                "(SIGSEGV); re-export with a compiler that links libstdc++ dynamically (--cxx)"
            )
        report = m.report
        if report is not None and report.host is not None and report.format is FileFormat.PE:
            mingw = [i.library for i in report.host.imports if is_compiler_runtime(i.library, "windows")]
            if mingw:
                problems.append(
                    f"{name} imports {', '.join(mingw)}{compiler}: MinGW's own runtime, which no Windows "
                    "machine, torch or NVIDIA wheel provides; link it statically "
                    "(-static, or -static-libstdc++ -static-libgcc and a static winpthread for MinGW's "
                    "posix flavour)"
                )
    return problems


def _check_import_libraries(info: ProgramInfo, prov: Provenance | None) -> CheckResult | None:
    """A Windows wrapper linked against import libraries cudaship made (``provenance.json``'s
    ``import_libraries``) imports, from each of their DLLs, only names that library provides: names the
    exporting torch declares, so names its ``torch_cuda.dll`` exports. None when no import library is
    recorded (a Linux program, an older export)."""
    records = prov.import_libraries if prov is not None else ()
    if not records:
        return None
    problems: list[str] = []
    said: list[str] = []
    for record in records:
        imported = sorted(
            {
                symbol.name
                for m in info.libraries
                if m.report is not None and m.report.host is not None
                for i in m.report.host.imports
                if i.library.lower() == record.dll.lower()
                for symbol in i.symbols
                if symbol.name is not None
            }
        )
        undeclared = [name for name in imported if name not in set(record.names)]
        origin = f"{record.library} {record.how} ({record.source})"
        if undeclared:
            problems.append(
                f"the wrapper imports {undeclared[0]}"
                + (f" and {count(len(undeclared) - 1, 'more name')}" if len(undeclared) > 1 else "")
                + f" from {record.dll}, which {origin} does not provide: loading fails on Windows"
            )
        else:
            said.append(f"{count(len(imported), 'name')} imported from {record.dll}, all in {origin}")
    if problems:
        return failed(FAMILY, "import libraries", "; ".join(problems))
    return passed(FAMILY, "import libraries", "; ".join(said))


def _check_libstdcxx(info: ProgramInfo) -> CheckResult:
    problems = runtime_problems(info)
    if problems:
        return failed(FAMILY, "libstdc++", "; ".join(problems))
    return passed(FAMILY, "libstdc++", "no library carries its own libstdc++ or needs MinGW's")
