"""Reading a local file a user named: regular files only, and never more than a cap.

A FIFO named ``clip.wav`` blocks ``open`` until a writer appears, and a link to ``/dev/zero`` reads without end;
both hang a step for good. The file is opened without blocking and checked on the open descriptor (no window
between the check and the read), then read up to a bound the caller chooses. Standard library only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO


class UnreadableFileError(ValueError):
    """A named file is not a regular file, is larger than allowed, or cannot be read; the message names it."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def is_regular_file(path: str | Path) -> bool:
    """Whether ``path`` (links followed) is a regular file; False for anything that cannot be looked at."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def require_regular_file(path: str | Path) -> os.stat_result:
    """The file's status (links followed), or UnreadableFileError when it is missing or not a regular file."""
    try:
        status = os.stat(path)
    except (OSError, ValueError) as error:
        raise UnreadableFileError(f"{path}: cannot be read ({getattr(error, 'strerror', None) or error})") from None
    if not stat.S_ISREG(status.st_mode):
        raise UnreadableFileError(f"{path}: {_kind(status.st_mode)}, not a regular file; only regular files are "
                                  "read")
    return status


def open_regular_file(path: str | Path) -> BinaryIO:
    """``path`` opened for reading without blocking and checked on the open descriptor to be a regular file;
    UnreadableFileError naming it otherwise."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as error:
        raise UnreadableFileError(f"{path}: cannot be read ({getattr(error, 'strerror', None) or error})") from None
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise UnreadableFileError(f"{path}: {_kind(mode)}, not a regular file; only regular files are read")
    return os.fdopen(descriptor, "rb")


def read_regular_file(path: str | Path, max_bytes: int, what: str = "file") -> bytes:
    """The whole content of a regular file of at most ``max_bytes``; UnreadableFileError naming the file
    otherwise. ``what`` names the kind of file in the size message ("WAV file", "model file")."""
    with open_regular_file(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise UnreadableFileError(f"{path}: {size:,} bytes, more than the {max_bytes:,} a {what} may hold here")
        try:
            content = handle.read(size + 1)  # +1: a file that grew since fstat is caught below
        except OSError as error:
            raise UnreadableFileError(f"{path}: cannot be read ({error.strerror or error})") from None
    if len(content) > size:
        raise UnreadableFileError(f"{path}: grew while being read; read it again once it is written")
    return content
