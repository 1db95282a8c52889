"""The variant readers: the label in a wheel's file name, variant.json and an index's *-variants.json
(PEP 825), each malformed input one WheelError naming the file and the key."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cudaship.errors import WheelError
from cudaship.wheel.archive import wheel_info
from cudaship.wheel.metadata import tags_from_filename
from cudaship.wheel.variant import parse_property, parse_variant_json, split_label, wheel_variant

BASE = "torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64"


def test_the_label_is_split_off_the_file_name() -> None:
    assert split_label(f"{BASE}.whl") == (f"{BASE}.whl", None)
    assert split_label(f"{BASE}-cu128.whl") == (f"{BASE}.whl", "cu128")
    # a build tag starts with a digit: six parts with one are not a label
    assert split_label("pkg-1.0-1-py3-none-any.whl") == ("pkg-1.0-1-py3-none-any.whl", None)
    assert split_label("pkg-1.0-1-py3-none-any-null.whl") == ("pkg-1.0-1-py3-none-any.whl", "null")
    with pytest.raises(WheelError, match="variant label 'CU128'"):
        split_label(f"{BASE}-CU128.whl")


def test_tags_and_wheel_info_ignore_the_label() -> None:
    """packaging's parse_wheel_filename refuses the sixth part: before the label was split off, the tags were
    read from the wrong parts and wheel_info fell back to a lenient split."""
    assert tags_from_filename(f"{BASE}-cu128.whl") == ("cp312-cp312-manylinux_2_28_x86_64",)
    info = wheel_info(f"{BASE}-cu128.whl")
    assert (info.name, info.version, info.tags) == ("torch", "2.9.0", ("cp312-cp312-manylinux_2_28_x86_64",))


def doc(variants: dict[str, Any], **extra: Any) -> bytes:
    base: dict[str, Any] = {
        "$schema": "https://variants-schema.wheelnext.dev/v0.0.3.json",
        "default-priorities": {"namespace": ["nvidia"]},
        "providers": {"nvidia": {"requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"]}},
        "variants": variants,
    }
    base.update(extra)
    return json.dumps(base).encode()


CU128 = {"nvidia": {"cuda_version_lower_bound": ["12.8"], "sm_arch": ["90_real", "120_virtual"]}}


def test_an_index_file_with_several_variants_and_the_null_one() -> None:
    meta = parse_variant_json(doc({"cu128": CU128, "null": {}}), "torch-2.9.0-variants.json")
    assert [v.label for v in meta.variants] == ["cu128", "null"]
    cu128 = meta.variant("cu128")
    assert cu128 is not None and cu128.values("nvidia", "sm_arch") == ("120_virtual", "90_real")
    assert next(p.text for p in cu128.properties) == "nvidia :: cuda_version_lower_bound :: 12.8"
    assert meta.providers[0].requires == ("nvidia-variant-provider>=0.0.1,<1.0.0",)


def test_a_wheel_variant_needs_its_label_in_both_places() -> None:
    data = doc({"cu128": CU128})
    variant = wheel_variant(f"{BASE}-cu128.whl", "torch-2.9.0.dist-info", data)
    assert variant is not None and variant.description.label == "cu128"
    assert wheel_variant(f"{BASE}.whl", "torch-2.9.0.dist-info", None) is None
    with pytest.raises(
        WheelError, match=r"has the variant label 'cu128' but there is no torch-2\.9\.0\.dist-info"
    ):
        wheel_variant(f"{BASE}-cu128.whl", "torch-2.9.0.dist-info", None)
    with pytest.raises(WheelError, match="describes variant cu128 but the file name has no variant label"):
        wheel_variant(f"{BASE}.whl", "torch-2.9.0.dist-info", data)
    with pytest.raises(WheelError, match="must describe exactly the file name's variant 'cu130'"):
        wheel_variant(f"{BASE}-cu130.whl", "torch-2.9.0.dist-info", data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"[1, 2]", "must be a JSON object, not a list"),
        (doc({"cu128": {}}), "variants.cu128: a variant without properties must use the label 'null'"),
        (
            doc({"null": CU128}),
            "variants.null: the label 'null' is reserved for the variant without properties",
        ),
        (
            doc({"cu128": {"nvidia": {"sm_arch": []}}}),
            "variants.cu128.nvidia.sm_arch: must list at least one value",
        ),
        (
            doc({"cu128": {"x86_64": {"level": ["v3"]}}}),
            "must list every namespace the variants use; missing x86_64",
        ),
        (doc({"cu128": CU128}, extra=1), "extra"),
        (doc({"cu128": CU128}, providers={"nvidia": {}}), "providers.nvidia.requires: is required"),
    ],
    ids=[
        "not-an-object",
        "empty-not-null",
        "null-with-properties",
        "no-values",
        "namespace-missing",
        "unknown",
        "no-requires",
    ],
)
def test_malformed_variant_json_is_one_error_naming_the_key(data: bytes, message: str) -> None:
    with pytest.raises(WheelError) as caught:
        parse_variant_json(data, "x/variant.json")
    assert caught.value.path == "x/variant.json"
    assert message in str(caught.value)


def test_property_syntax() -> None:
    assert parse_property("nvidia :: sm_arch :: 90_real").text == "nvidia :: sm_arch :: 90_real"
    assert parse_property("nvidia::cuda_version_lower_bound::12.8").value == "12.8"
    with pytest.raises(WheelError, match="is not a variant property"):
        parse_property("nvidia :: sm_arch")
