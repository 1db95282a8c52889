"""How a host binary gets the CUDA runtime and reaches the driver, decided from the evidence in its record.

Runtime:

* ``dynamic`` — it imports the CUDA runtime library (``DT_NEEDED libcudart.so.13``, a PE import or delay
  import of ``cudart64_13.dll`` / ``cudart64_110.dll``, a Mach-O ``libcudart.N.dylib``), also under the name
  auditwheel or delvewheel gives the copy it grafts (``libcudart-d0da41ae.so.11.8.89``,
  ``cudart64_12-<32 hex>.dll``: :func:`cudaship.knowledge.repair.unhashed`); the major comes from the name
  without that hash (:func:`cudaship.knowledge.libraries.cudart_major`).
* ``static`` — it carries the runtime itself. Evidence, any of: it exports the runtime's entry points
  (``cudaGetExportTable``, ``__cudaRegisterFatBinary``: the CUDA runtime library itself, or a library that
  re-exports a static copy); the runtime's own strings in its read-only data (``HostBinary.cuda_markers``:
  static cudart on Linux resolves its entry points by these names); the name of the helper that CUDA 13's
  static runtime loads on Windows (``nvcudart_hybrid64.dll``) stored as a string; or the runtime's fatbin
  registration section (``.nvFatBinSegment`` / PE ``.nvFatBi``, emitted by nvcc for
  ``__cudaRegisterFatBinary``)
  with no runtime import to register through.
  An undefined ``__cudaRegisterFatBinary`` with no runtime import is ``dynamic`` with an unknown major (it is
  resolved from a runtime some other library loads).
* ``none`` — no evidence of either.

Driver: ``import`` when ``libcuda.so.1`` / ``nvcuda.dll`` is imported; ``dlopen`` when its name is stored as a
string (static cudart and most libraries that load the driver lazily do this); ``none`` otherwise.
Each decision carries its evidence as short sentences.
"""

from __future__ import annotations

from cudaship.knowledge import libraries
from cudaship.knowledge.repair import unhashed
from cudaship.records.binary import HostBinary, ImportKind
from cudaship.records.files import CudaLinkage, DriverAccess, RuntimeLinkage

#: Symbols only the CUDA runtime defines: defined (exported) by a binary, they mean it carries the runtime.
RUNTIME_EXPORTS = ("cudaGetExportTable", "__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd")
#: Libraries the static CUDA runtime loads by name (so their name in .rdata is runtime evidence).
RUNTIME_HELPERS = ("nvcudart_hybrid64.dll",)
#: Sections nvcc emits for the runtime's fatbin registration (ELF / Mach-O name, PE name cut to 8).
REGISTRATION_SECTIONS = (".nvFatBinSegment", ".nvFatBi")

_KIND_WORDS = {
    ImportKind.NEEDED: "DT_NEEDED",
    ImportKind.IMPORT: "imports",
    ImportKind.DELAY: "delay-loads",
    ImportKind.DYLIB: "loads dylib",
}


def _strip_mangling(symbol: str) -> str:
    """Mach-O prefixes C names with ``_``; compare without it."""
    return symbol[1:] if symbol.startswith("_") and not symbol.startswith("__") else symbol


def _unhashed(name: str) -> str:
    """``name`` without the hash auditwheel (``-<8 hex>`` before ``.so``) or delvewheel (``-<32 hex>`` before
    ``.dll``) put in a grafted copy's name; ``name`` itself when it has none."""
    return unhashed(unhashed(name, "linux"), "windows")


def cuda_linkage(host: HostBinary) -> CudaLinkage:
    """Decide runtime and driver linkage of ``host`` with the evidence for each."""
    runtime = RuntimeLinkage.NONE
    major: int | None = None
    runtime_evidence: list[str] = []
    driver = DriverAccess.NONE
    driver_evidence: list[str] = []

    for imp in host.imports:
        plain = _unhashed(imp.library)
        found = libraries.identify(plain)
        if found is None:
            continue
        if found.component == "cudart":
            runtime = RuntimeLinkage.DYNAMIC
            imp_major = libraries.cudart_major(plain)
            if major is None:
                major = imp_major
            runtime_evidence.append(f"{_KIND_WORDS[imp.kind]} {imp.library}")
        elif found.component == "cuda":
            driver = DriverAccess.IMPORT
            driver_evidence.append(f"{_KIND_WORDS[imp.kind]} {imp.library}")

    if runtime is RuntimeLinkage.NONE:
        # Runtime entry points left undefined are resolved from a library loaded by another one (a Python
        # extension relying on libcudart already loaded by its host package): dynamic, major unknown.
        undefined = {_strip_mangling(s.name) for s in host.undefined_symbols if s.name}
        taken = [name for name in RUNTIME_EXPORTS if name in undefined]
        if taken:
            runtime = RuntimeLinkage.DYNAMIC
            runtime_evidence = [f"takes {name} from another library (undefined symbol)" for name in taken]

    if runtime is RuntimeLinkage.NONE:
        exports = {_strip_mangling(name) for name in host.exports}
        static_evidence = [
            f"defines {name} (exported): carries the CUDA runtime"
            for name in RUNTIME_EXPORTS
            if name in exports
        ]
        static_evidence += [
            f"stores the CUDA runtime's string {marker!r} in read-only data" for marker in host.cuda_markers
        ]
        lowered = {name.lower() for name in host.embedded_library_names}
        static_evidence += [
            f"stores {helper} as a string (loaded by the static CUDA runtime)"
            for helper in RUNTIME_HELPERS
            if helper in lowered
        ]
        section_names = {section.name for section in host.sections}
        static_evidence += [
            f"has section {name} (fatbin registration through the runtime) but imports no CUDA runtime"
            for name in REGISTRATION_SECTIONS
            if name in section_names
        ]
        if static_evidence:
            runtime = RuntimeLinkage.STATIC
            runtime_evidence = static_evidence

    if driver is DriverAccess.NONE:
        for name in host.embedded_library_names:
            found = libraries.identify(name)
            if found is not None and found.component == "cuda":
                driver = DriverAccess.DLOPEN
                driver_evidence.append(f"stores {name} as a string (dlopen / LoadLibrary)")

    return CudaLinkage(
        runtime=runtime,
        cudart_major=major,
        runtime_evidence=tuple(runtime_evidence),
        driver=driver,
        driver_evidence=tuple(driver_evidence),
    )
