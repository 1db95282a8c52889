"""The variant sections of ``gpus`` and ``doctor`` (which variant of a release a machine gets, and whether it
runs there; decided in :mod:`cudaship.analysis.variant_here`): text lines and JSON, shared by both."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cudaship.analysis.variant_pick import VariantPick, VariantRelease
from cudaship.render.escape import markdown_cell as cell
from cudaship.words import count


def _driver(p: VariantPick) -> str:
    if p.cuda is None:
        return "no driver"
    if p.cuda_to is not None and p.cuda_to != p.cuda:
        return f"CUDA {p.cuda}-{p.cuda_to}"
    return f"CUDA {p.cuda}"


def lines(releases: Sequence[VariantRelease]) -> list[str]:
    out: list[str] = []
    for r in releases:
        out.append(
            f"variants of {r.release}: {', '.join(r.labels) or 'none'}"
            + (f" (index {r.index})" if r.index else "")
        )
        if r.machine is not None:
            out.append(f"  this machine as the NVIDIA provider sees it: {r.machine}")
        out.append(f"  {'GPU':<5} {'driver':<16} {'variant':<12} {'runs':<4} why")
        for p in r.picks:
            runs = "-" if p.runs is None else ("yes" if p.runs else "NO")
            label = p.label if p.label is not None else "(nothing)"
            out.append(f"  {p.capability:<5} {_driver(p):<16} {label:<12} {runs:<4} {p.reason}")
        unfit = [p for p in r.picks if not p.fits]
        if unfit:
            out.append(
                f"  no variant fits {len(unfit)} of the {count(len(r.picks), 'line')} above "
                "(the null variant or nothing installed)"
            )
        out.append("")
    return out


def markdown(releases: Sequence[VariantRelease]) -> list[str]:
    out: list[str] = []
    for r in releases:
        index = f" (index `{cell(r.index)}`)" if r.index else ""
        out += ["", f"### Variants of {cell(r.release)}: {cell(', '.join(r.labels) or 'none')}{index}", ""]
        if r.machine is not None:
            out += [f"This machine as the NVIDIA provider sees it: {cell(r.machine)}", ""]
        out += ["| GPU | driver | variant | runs | why |", "|---|---|---|---|---|"]
        for p in r.picks:
            runs = "-" if p.runs is None else ("yes" if p.runs else "**no**")
            label = f"`{cell(p.label)}`" if p.label is not None else "(nothing)"
            out.append(f"| {p.capability} | {_driver(p)} | {label} | {runs} | {cell(p.reason)} |")
    return out


def to_json(releases: Sequence[VariantRelease]) -> list[dict[str, Any]]:
    return [
        {
            "release": r.release,
            "labels": list(r.labels),
            "index": r.index,
            "machine": r.machine,
            "picks": [
                {
                    "gpu": p.capability,
                    "cuda": p.cuda,
                    "cuda_to": p.cuda_to,
                    "variant": p.label,
                    "wheel": p.wheel,
                    "fits": p.fits,
                    "runs": p.runs,
                    "reason": p.reason,
                }
                for p in r.picks
            ],
        }
        for r in releases
    ]
