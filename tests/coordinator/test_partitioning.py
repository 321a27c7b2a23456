from __future__ import annotations

import pytest

from odradek.coordinator.partitioning import java_string_hash, partition_for


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),  # Java's Integer.MIN_VALUE hash
        ("\U0001f600", 1772899),  # one code point, two UTF-16 code units
        ("consumer-group-1", 147483020),  # values checked against Java 17
        ("ünïcødé-grøup", 1068704242),
    ],
)
def test_java_string_hash_matches_java(value: str, expected: int) -> None:
    assert java_string_hash(value) == expected


def test_partition_uses_kafka_utils_abs_not_math_abs() -> None:
    # Math.abs(Integer.MIN_VALUE) stays negative; Kafka masks the sign bit instead, giving 0.
    assert partition_for("polygenelubricants", 50) == 0


def test_negative_hash_maps_by_masking_sign_bit() -> None:
    h = java_string_hash("my-group")
    assert h < 0
    assert partition_for("my-group", 50) == (h & 0x7FFFFFFF) % 50
    assert partition_for("my-group", 50) != abs(h) % 50


def test_partition_in_range() -> None:
    assert {partition_for(f"g{i}", 7) for i in range(500)} == set(range(7))
