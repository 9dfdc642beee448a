"""Reading a user's file safely (a prompt file, a dataset, a config file): a regular file
only, at most MAX_FILE_BYTES.

A FIFO or a device named by mistake would block the run or read forever, so the file is
opened non-blocking and checked with fstat (no race between the check and the read).
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from specmon.errors import UserError

MAX_FILE_BYTES = 2 * 1024**3  # 2 GiB: larger than any published prompt set


def read_bounded(path: str, what: str = "input file", limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of `path`; a UserError naming the file when it cannot be a prompt file."""
    where = f"{what} {path}"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise UserError(f"{where}: not found") from None
    except OSError as exc:
        raise UserError(f"{where}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise UserError(f"{where}: is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{where}: not a regular file (a FIFO, socket or device)")
        if info.st_size > limit:
            raise UserError(f"{where}: {info.st_size} bytes, over the {_size(limit)} limit")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = _read_chunks(handle, limit + 1)
    except OSError as exc:
        raise UserError(f"{where}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew while being read
        raise UserError(f"{where}: over the {_size(limit)} limit")
    return data


READ_CHUNK = 16 * 1024**2


def _read_chunks(handle: BinaryIO, most: int) -> bytes:
    """At most `most` bytes, in chunks: a stop signal is handled between two (one read of
    2 GiB would hold it back until the read ends; specmon/stops.py)."""
    parts, left = [], most
    while left > 0 and (part := handle.read(min(READ_CHUNK, left))):
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _size(n: int) -> str:
    return f"{n / 1024**3:g} GiB" if n >= 1024**3 else f"{n} bytes"
