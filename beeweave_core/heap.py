"""The C heap overwrites what it hands out, so freed text never reaches an index file.

Embedded Chroma's HNSW index (hnswlib, in this process) writes its buffers to disk
whole: a node's unused link slots and the unused capacity at the end hold whatever
the heap held before, and in an agent's process that is freed text: a prompt, a
tool result, the raw value a redaction replaced, an event since purged.  Measured:
twelve weaves opened and filled one after another in one process, each with a
few made-up words, left those words in the HNSW file ``data_level0.bin`` of 2 and
of 8 (two runs); none with the heap's perturbation on.  glibc's
``mallopt(M_PERTURB)`` (what ``MALLOC_PERTURB_`` sets at start-up) fills every block
it hands out with one fixed byte and every block it takes back with another, so a
block handed out after this call carries no older bytes (but for a ``realloc`` that
grows a block in place over memory freed before the call).
"""

from __future__ import annotations

import ctypes
import logging
import platform
import threading

log = logging.getLogger(__name__)

#: ``M_PERTURB`` of glibc's ``malloc.h``.
_M_PERTURB = -6
#: Freed blocks are filled with this byte, blocks handed out with its complement.
PERTURB_BYTE = 0xA5

_lock = threading.Lock()
_on: bool | None = None  # None: not tried yet


def overwrite_reused_memory() -> bool:
    """Turn glibc's heap perturbation on for this process (once); False where it cannot be.

    Called before an embedded Chroma opens, which is what writes heap bytes to disk.
    The cost is a ``memset`` of each block the C allocator hands out or takes back:
    Python's own small objects (most of a captured event) do not go through it.
    """
    global _on
    with _lock:
        if _on is None:
            glibc = platform.libc_ver()[0] == "glibc"
            _on = glibc and bool(ctypes.CDLL(None).mallopt(_M_PERTURB, PERTURB_BYTE))
            if not _on:
                log.warning(
                    "freed text may reach embedded Chroma's index files here (no glibc "
                    "heap perturbation on %s); a Chroma server (vector_url) avoids it",
                    platform.platform(),
                )
        return _on
