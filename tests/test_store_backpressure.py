"""SpoolGate's decisions (pure, on a fake clock) and measure_spool on a real directory."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from crawlproject.store.backpressure import (
    WRITE_FAILED_MIN_FREE_BYTES,
    Change,
    SpoolGate,
    SpoolUsage,
    is_space_error,
    measure_spool,
)

GIB = 1024**3


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def usage(spooled: int, free: int = 100 * GIB) -> SpoolUsage:
    return SpoolUsage(spooled_bytes=spooled, files=1, free_bytes=free)


def test_pauses_over_the_cap_and_resumes_below_80_percent() -> None:
    clock = Clock()
    gate = SpoolGate(max_bytes=1000, min_free_bytes=0, clock=clock)
    assert gate.check(usage(1000)) is None  # at the cap: not over it
    assert gate.check(usage(1001)) is Change.PAUSE
    assert gate.paused and "1001 bytes, over its cap of 1000" in gate.reason
    clock.now += 5
    # Hysteresis: under the cap but above 80 % stays paused.
    assert gate.check(usage(900)) is None
    assert gate.check(usage(801)) is None
    assert gate.paused
    clock.now += 2.5
    assert gate.check(usage(800)) is Change.RESUME
    assert not gate.paused and gate.reason == ""
    assert gate.pauses == 1
    assert gate.last_pause_seconds == pytest.approx(7.5)
    assert gate.paused_seconds() == pytest.approx(7.5)


def test_paused_seconds_add_up_over_pauses_and_count_the_current_one() -> None:
    clock = Clock()
    gate = SpoolGate(max_bytes=100, min_free_bytes=0, clock=clock)
    gate.check(usage(200))
    clock.now += 3
    gate.check(usage(0))
    clock.now += 50  # running: not counted
    gate.check(usage(101))
    clock.now += 2
    assert gate.pauses == 2
    assert gate.paused_seconds() == pytest.approx(5.0)
    assert gate.current_pause_seconds() == pytest.approx(2.0)  # the pause going on
    assert gate.check(usage(101)) is None  # already paused: no second pause
    gate.check(usage(0))
    assert gate.current_pause_seconds() == 0.0


def test_pauses_on_low_free_space_and_resumes_above_the_floor_over_080() -> None:
    gate = SpoolGate(max_bytes=0, min_free_bytes=1000, clock=Clock())
    assert gate.check(usage(10**15, free=1000)) is None  # no cap: size never pauses
    assert gate.check(usage(0, free=999)) is Change.PAUSE
    assert "999 bytes free, under 1000" in gate.reason
    assert gate.check(usage(0, free=1249)) is None
    assert gate.check(usage(0, free=1250)) is Change.RESUME


def test_both_limits_must_be_back_inside_to_resume() -> None:
    gate = SpoolGate(max_bytes=1000, min_free_bytes=1000, clock=Clock())
    assert gate.check(usage(2000, free=500)) is Change.PAUSE
    assert gate.check(usage(100, free=500)) is None
    assert gate.check(usage(2000, free=5000)) is None
    assert gate.check(usage(100, free=5000)) is Change.RESUME


def test_no_limits_never_pause() -> None:
    gate = SpoolGate(max_bytes=0, min_free_bytes=0, clock=Clock())
    assert gate.check(usage(10**15, free=0)) is None
    assert not gate.paused


def test_a_failed_write_pauses_until_there_is_room_whatever_the_limits() -> None:
    gate = SpoolGate(max_bytes=0, min_free_bytes=0, clock=Clock())
    assert gate.write_failed(usage(0, free=10)) is Change.PAUSE
    assert "no space left" in gate.reason
    assert gate.write_failed(usage(0, free=10)) is None  # already paused
    assert gate.check(usage(0, free=WRITE_FAILED_MIN_FREE_BYTES)) is None
    assert gate.check(usage(0, free=2 * WRITE_FAILED_MIN_FREE_BYTES)) is Change.RESUME
    # The raised floor was for that pause only: no limits again.
    assert gate.check(usage(0, free=0)) is None


def test_a_failed_write_on_a_small_filesystem_needs_a_tenth_of_it_free() -> None:
    gate = SpoolGate(max_bytes=0, min_free_bytes=0, clock=Clock())
    small = SpoolUsage(spooled_bytes=0, files=0, free_bytes=0, disk_bytes=1_000_000)
    assert gate.write_failed(small) is Change.PAUSE
    assert gate.check(usage(0, free=124_999)) is None  # 100 KB / 0.8
    assert gate.check(usage(0, free=125_000)) is Change.RESUME


def test_a_failed_write_keeps_a_higher_configured_floor() -> None:
    floor = 4 * WRITE_FAILED_MIN_FREE_BYTES
    gate = SpoolGate(max_bytes=0, min_free_bytes=floor, clock=Clock())
    assert gate.write_failed(usage(0, free=floor * 2)) is Change.PAUSE
    assert gate.check(usage(0, free=floor)) is None
    assert gate.check(usage(0, free=floor * 2)) is Change.RESUME


@pytest.mark.parametrize(
    ("max_bytes", "min_free", "fraction"), [(-1, 0, 0.8), (0, -1, 0.8), (1, 1, 1.0), (1, 1, 0.0)]
)
def test_bad_limits_are_refused(max_bytes: int, min_free: int, fraction: float) -> None:
    with pytest.raises(ValueError, match="must be"):
        SpoolGate(max_bytes, min_free, resume_fraction=fraction)


def test_space_errors_are_told_apart() -> None:
    assert is_space_error(OSError(errno.ENOSPC, "No space left on device"))
    assert is_space_error(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not is_space_error(OSError(errno.EIO, "I/O error"))
    assert not is_space_error(ValueError("no"))


def test_measure_spool_counts_every_file_below_the_directory(tmp_path: Path) -> None:
    spool = tmp_path / "spool" / "crawl"
    (spool / "objects").mkdir(parents=True)
    (spool / "a.warc.gz").write_bytes(b"x" * 1000)
    (spool / "b.warc.gz.open").write_bytes(b"y" * 234)
    (spool / "objects" / "c.gz").write_bytes(b"z" * 10)
    os.symlink(spool / "a.warc.gz", spool / "link")  # not a second copy
    measured = measure_spool(spool)
    assert measured.spooled_bytes == 1244
    assert measured.files == 3
    fs = os.statvfs(spool)
    assert 0 < measured.free_bytes <= measured.disk_bytes == fs.f_blocks * fs.f_frsize


def test_measure_spool_of_a_missing_directory_is_empty(tmp_path: Path) -> None:
    measured = measure_spool(tmp_path / "not-yet")
    assert (measured.spooled_bytes, measured.files) == (0, 0)
    assert 0 < measured.free_bytes <= measured.disk_bytes
