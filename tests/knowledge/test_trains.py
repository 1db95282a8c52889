"""CUDA trains: cuXY tags and X.Y[.Z] versions."""

from __future__ import annotations

import pytest

from cudaship.errors import KnowledgeError
from cudaship.knowledge.trains import Train, as_train, parse_train


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cu132", Train(13, 2)),
        ("cu118", Train(11, 8)),
        ("cu126", Train(12, 6)),
        ("cu92", Train(9, 2)),
        ("CU130", Train(13, 0)),
        ("13.2", Train(13, 2)),
        ("13.2.2", Train(13, 2, 2)),
        ("CUDA 13.4", Train(13, 4)),
        ("cuda-12.9.1", Train(12, 9, 1)),
        ("128", Train(12, 8)),  # the tag's digits alone
        ("92", Train(9, 2)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_parse_train(text: str, expected: Train) -> None:
    assert parse_train(text) == expected


@pytest.mark.parametrize(
    "text", ["cu1", "cu13200", "13", "13.x", "cuda", "", "cu02", "sm_90", "cu13", "cu12", "12"], ids=repr
)
def test_parse_train_errors_name_the_token(text: str) -> None:
    with pytest.raises(KnowledgeError) as info:
        parse_train(text)
    assert repr(text) in str(info.value)


def test_train_properties_and_order() -> None:
    train = Train(13, 2, 2)
    assert (train.tag, train.version, train.full_version, str(train)) == ("cu132", "13.2", "13.2.2", "cu132")
    assert train.line == Train(13, 2)
    assert Train(12, 9) < Train(13, 0) < Train(13, 2) < Train(13, 2, 0) < Train(13, 2, 2) < Train(13, 4)
    assert sorted([Train(13, 4), Train(12, 6), Train(13, 2, 2)]) == [
        Train(12, 6),
        Train(13, 2, 2),
        Train(13, 4),
    ]
    assert as_train("cu134") == Train(13, 4)
    assert as_train(train) is train


@pytest.mark.parametrize("text", ["cu13", "13", "CU12"])
def test_a_major_alone_is_refused_not_read_as_one_point_something(text: str) -> None:
    """Issue 35: ``cu13`` was read as CUDA 1.3."""
    with pytest.raises(
        KnowledgeError, match=r"alone is no train, and as a tag it would be 1\.\d: write cu1\d0"
    ):
        parse_train(text)
