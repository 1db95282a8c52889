"""The coverage-guided engine: atheris (libFuzzer for Python) with cudaship's modules instrumented.

``python -m fuzz._atheris TARGET [libFuzzer flags] CORPUS_DIR...``: runs until libFuzzer stops (time, runs or
the first finding, whose input libFuzzer writes to ``-artifact_prefix``). Called by ``python -m fuzz``.
"""

from __future__ import annotations

import importlib
import sys


def main() -> None:
    import atheris

    name = sys.argv[1]
    with atheris.instrument_imports(include=["cudaship"]):
        from fuzz import _harness
        from fuzz._harness import Finding, load_target, outcome

        _harness.USE_ALARM = False
        target = load_target(name)
        import cudaship.errors  # noqa: F401

        # readers the target reaches through lazy imports (the inspect dispatch imports them on first use):
        # imported here, so that they are instrumented too
        for module in target.modules:
            importlib.import_module("cudaship." + module.removesuffix(".py").replace("/", "."))

    def test_one_input(data: bytes) -> None:
        try:
            outcome(target, data)
        except Finding as e:
            # re-raise as itself: libFuzzer records the input and stops
            raise RuntimeError(f"{target.name}: {e}") from e

    atheris.Setup([sys.argv[0], *sys.argv[2:]], test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
