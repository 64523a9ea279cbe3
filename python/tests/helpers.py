"""Small helpers of the tests."""

import numpy as np


def filled(shape, value, step=1.0):
    """value, value + step, ... in float32, like the C tests' fill()."""
    return (value + step * np.arange(int(np.prod(shape)), dtype=np.float32)).reshape(shape)


def overlap(a, b):
    """Whether two allocated tensors share bytes of the same buffer."""
    # host buffers are distinct allocations: address ranges alone tell
    assert a.buffer_name is not None and b.buffer_name is not None, "both tensors must be allocated"
    a0, b0 = a.data_ptr, b.data_ptr
    return a0 < b0 + b.nbytes and b0 < a0 + a.nbytes
