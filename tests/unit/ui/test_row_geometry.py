"""Row positions as running sums of heights: what the transcript's scrolling stands on."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ui.row_geometry import RowGeometry


def test_rows_are_found_by_the_pixels_they_cover_after_every_kind_of_change() -> None:
    g = RowGeometry()
    assert g.row_at(0) == -1 and g.total() == 0
    g.reset([10, 20, 30])
    assert [g.top(r) for r in range(3)] == [0, 10, 30] and g.total() == 60
    assert [g.row_at(y) for y in (0, 9, 10, 29, 30, 59)] == [0, 0, 1, 1, 2, 2]
    assert g.row_at(-5) == 0 and g.row_at(10_000) == 2  # clamped to the first and last row
    assert g.set_height(1, 5) == -15 and g.top(2) == 15 and g.row_at(14) == 1
    g.insert(1, [100, 100])
    assert len(g) == 5 and g.top(1) == 10 and g.top(3) == 210 and g.row_at(150) == 2
    g.remove(1, 2)
    assert [g.top(r) for r in range(3)] == [0, 10, 15] and g.total() == 45
    g.set_height(0, 0)  # a row never collapses to nothing: it could not be clicked or reached
    assert g.height(0) == 1


def test_ten_thousand_rows_answer_from_one_pass() -> None:
    g = RowGeometry()
    g.reset([r % 7 + 20 for r in range(10_000)])
    g.set_height(5_000, 500)
    want = sum(r % 7 + 20 for r in range(5_000))
    assert g.top(5_000) == want and g.row_at(want + 499) == 5_000 and g.row_at(want + 500) == 5_001


@given(st.integers(0, 2000), st.integers(0, 2000), st.integers(0, 2000))
def test_the_model_views_label_never_covers_the_title_or_the_status(
        header_w: int, title_w: int, meta_w: int) -> None:
    """The "not sent · why" label sits between a row's title and its status text (where a
    card says "✓ done"), or is left out when there is no room: never drawn over either."""
    from ui.row_paint import MIN_LABEL, label_span

    span = label_span(header_w, title_w, meta_w)
    if span is None:
        assert header_w - meta_w - title_w < MIN_LABEL + 2 * 12
        return
    left, width = span
    assert left > title_w and left + width < header_w - meta_w and width >= MIN_LABEL
