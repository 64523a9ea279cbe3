"""Small helpers of the tests."""

import os

import numpy as np
import pytest


def filled(shape, value, step=1.0):
    """value, value + step, ... in float32, like the C tests' fill()."""
    return (value + step * np.arange(int(np.prod(shape)), dtype=np.float32)).reshape(shape)


def overlap(a, b):
    """Whether two allocated tensors share bytes of the same buffer."""
    # host buffers are distinct allocations: address ranges alone tell
    assert a.buffer_name is not None and b.buffer_name is not None, "both tensors must be allocated"
    a0, b0 = a.data_ptr, b.data_ptr
    return a0 < b0 + b.nbytes and b0 < a0 + a.nbytes


def rust_cpu_path():
    """$GGML_RS_CPU_LIBRARY, the Rust CPU backend's library; skips the test when it is unset, or
    fails it with GGML_RS_CPU_REQUIRED=1 (the suite sets both)."""
    path = os.environ.get("GGML_RS_CPU_LIBRARY")
    if path is None:
        if os.environ.get("GGML_RS_CPU_REQUIRED") == "1":
            pytest.fail("GGML_RS_CPU_LIBRARY is not set (GGML_RS_CPU_REQUIRED=1)")
        pytest.skip("GGML_RS_CPU_LIBRARY (the Rust CPU backend's library) is not set")
    return path
