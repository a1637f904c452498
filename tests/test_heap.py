"""A block the C heap hands out holds none of the bytes it held before (glibc): what
keeps freed text out of embedded Chroma's index files (see test_purge_complete and
test_redaction_storage for the files themselves)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

#: Run in a fresh process: the check needs a heap that has not been perturbed yet.
PROBE = r"""
import ctypes
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
SIZE, WORD = 4000, b"cobaltheron "

def reused() -> bytes:
    block = libc.malloc(SIZE)
    ctypes.memmove(block, WORD * (SIZE // len(WORD)), SIZE // len(WORD) * len(WORD))
    libc.free(block)
    again = libc.malloc(SIZE)  # the block just freed, as glibc hands it out again
    data = ctypes.string_at(again, SIZE)
    libc.free(again)
    return data

before = reused()
import sys
from beeweave_core.heap import PERTURB_BYTE, overwrite_reused_memory
if sys.argv[1:]:  # a directory: what opening an embedded Chroma there does
    from beeweave_core.index.chroma import make_client
    make_client(sys.argv[1])
    on = True
else:
    on = overwrite_reused_memory()
after = reused()
print(WORD.strip() in before, on, WORD.strip() in after, after.count(PERTURB_BYTE ^ 0xFF))
"""

GLIBC = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="perturbation is glibc's")


def _probe(*args: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True,
                          text=True, timeout=120, check=True)  # fmt: skip
    return proc.stdout.split()


@GLIBC
def test_a_reused_block_holds_no_freed_bytes_once_perturbation_is_on() -> None:
    seen_before, on, seen_after, filled = _probe()
    assert seen_before == "True"  # without it, the freed words come back
    assert (on, seen_after, filled) == ("True", "False", "4000")


@GLIBC
def test_opening_an_embedded_chroma_turns_it_on(tmp_path) -> None:
    seen_before, _, seen_after, filled = _probe(str(tmp_path / "chroma"))
    assert (seen_before, seen_after, filled) == ("True", "False", "4000")
