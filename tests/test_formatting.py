"""Sizes as people read them (issue 30, point 3): decimal units, the exact count in a tooltip."""

from __future__ import annotations

import pytest

from retention.formatting import bytes_html, format_bytes


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (999, "999 bytes"),
        (1_000, "1.0 kB"),
        (9_949, "9.9 kB"),
        (9_950, "10 kB"),
        (52_000, "52 kB"),
        (999_499, "999 kB"),
        (999_500, "1.0 MB"),  # never "1000 kB"
        (2_400_000, "2.4 MB"),
        (5 * 10**12, "5.0 TB"),
        (3 * 10**21, "3000 EB"),  # past the last unit: the number grows
        (None, "—"),
    ],
)
def test_format_bytes__decimal_units_one_decimal_under_ten(value, shown):
    assert format_bytes(value) == shown


def test_bytes_html__the_exact_count_in_the_tooltip():
    assert bytes_html(2_400_000) == '<span title="2,400,000 bytes">2.4 MB</span>'


def test_bytes_html__no_size_is_a_dash_saying_why():
    assert bytes_html(None) == '<span title="not recorded">—</span>'
    assert bytes_html(None, unknown="a row has no size") == (
        '<span title="a row has no size">—</span>'
    )
