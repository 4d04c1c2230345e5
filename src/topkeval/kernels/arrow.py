"""Arrow arrays as the kernels read them: in one piece, strings as numpy views of their buffers."""

from __future__ import annotations

import numpy as np


def one_chunk(values):
    """An Arrow array in one piece (chunks joined: one copy of the buffers, far cheaper than
    encoding each chunk and unifying their dictionaries)."""
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 1:
            return values.chunk(0)
        return values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    return values


def text_buffers(values) -> tuple[np.ndarray, np.ndarray]:
    """An Arrow string array's value offsets (int32 or int64, one more than the strings) and UTF-8
    bytes, as numpy views of its buffers (no copy)."""
    import pyarrow as pa

    buffers = values.buffers()
    wide = pa.types.is_large_string(values.type)
    offsets = np.frombuffer(buffers[1], np.int64 if wide else np.int32)[values.offset:values.offset + len(values) + 1]
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return offsets, data
