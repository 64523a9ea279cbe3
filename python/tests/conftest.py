"""Shared fixtures: the library (from $GGML_RS_LIB_DIR), CPU backends, and an rpc-server.

The rpc-server is `ggml-rpc-server` next to the libraries (or $GGML_RS_RPC_SERVER), started
once on a free loopback port; $GGML_RS_RPC_ENDPOINT uses a running one instead. Tests that
need it are skipped, with the reason, when there is none.
"""

import ctypes
import os
import signal
import socket
import subprocess
import time

import pytest

import ggml_rs as g


@pytest.fixture(scope="session", autouse=True)
def library():
    return g.load()


@pytest.fixture
def cpu():
    with g.Backend.cpu(n_threads=1) as b:
        yield b


@pytest.fixture
def ctx():
    with g.Context() as c:
        yield c


def _die_with_parent():
    """In the rpc-server's process: a SIGTERM when pytest ends, however it ends (Linux)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (AttributeError, OSError):
        pass


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def rpc_endpoint(tmp_path_factory):
    endpoint = os.environ.get("GGML_RS_RPC_ENDPOINT")
    if endpoint:
        yield endpoint
        return
    server = os.environ.get("GGML_RS_RPC_SERVER") or os.path.join(os.environ.get("GGML_RS_LIB_DIR", ""), "ggml-rpc-server")
    if not os.access(server, os.X_OK):
        pytest.skip(f"no rpc-server ({server}): set GGML_RS_RPC_SERVER or GGML_RS_RPC_ENDPOINT")
    port = _free_port()
    log = open(tmp_path_factory.mktemp("rpc") / "rpc-server.log", "w")
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port), "-t", "1"], stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=_die_with_parent)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"rpc-server exited with {proc.returncode}")
                time.sleep(0.1)
        else:
            pytest.fail("rpc-server did not start in 10 s")
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


@pytest.fixture
def rpc(rpc_endpoint):
    with g.Backend.rpc(rpc_endpoint) as b:
        yield b

