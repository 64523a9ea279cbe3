"""Backends (CPU, RPC, any the registry knows), their buffer types, and buffers."""

import ctypes
import os
import socket

from ._lib import (DEVICE_TYPE_CPU, ENV_CPU_LIBRARY, RPC_ADD_SERVER, STATUS, GgmlError, clear_messages, failure, lib,
                   library_info)
from ._owner import Owner, lifecycle, locked, register_buffer, unregister_buffer

_DEVICE_TYPES = {"cpu": 0, "gpu": 1, "igpu": 2, "accel": 3}
USAGE = {"any": 0, "weights": 1, "compute": 2}
# backend modules loaded through Backend.load_module: real path -> (registry, device names)
_MODULES = {}


class BufferType:
    """A buffer type (`ggml_backend_buffer_type_t`). Not owned: ggml keeps buffer types for the
    life of the process (the CPU's is static, a device's lives with its registry)."""

    def __init__(self, ptr, backend=None):
        self.ptr = ptr
        self._backend = backend  # keeps the backend (and its device) alive while this is used

    @property
    def name(self):
        return lib().ggml_backend_buft_name(self.ptr).decode()

    @property
    def alignment(self):
        return lib().ggml_backend_buft_get_alignment(self.ptr)

    @property
    def is_host(self):
        return lib().ggml_backend_buft_is_host(self.ptr)

    def __eq__(self, other):
        return isinstance(other, BufferType) and other.ptr == self.ptr

    def __hash__(self):
        return hash(self.ptr)

    def __repr__(self):
        return f"<BufferType {self.name}>"


class Backend(Owner):
    """A ggml backend. Make one with `Backend.cpu()`, `Backend.rpc(endpoint)`,
    `Backend.by_name(name)` or `Backend.by_type(kind)`; close it (or use `with`) when done:
    closing it first closes the schedulers and buffers made with it."""

    kind = "backend"
    rank = 2

    def __init__(self, ptr):
        super().__init__(ptr, lib().ggml_backend_free)
        self.name = lib().ggml_backend_name(ptr).decode()

    def describe(self):
        return f"backend {self.name}"

    @classmethod
    def _made(cls, ptr, what, fallback):
        if not ptr:
            raise failure(what, fallback)
        return cls(ptr)

    @classmethod
    def cpu(cls, n_threads=None):
        """The CPU backend (ggml_backend_cpu_init), with `n_threads` threads if given."""
        L = lib()
        with lifecycle.using():
            clear_messages()
            b = cls._made(L.ggml_backend_cpu_init(), "ggml_backend_cpu_init", "could not make the CPU backend")
            if n_threads is not None:
                L.ggml_backend_cpu_set_n_threads(b.ptr, int(n_threads))
        return b

    @classmethod
    def by_name(cls, name, params=None):
        """The backend of the registry's device `name` (e.g. "CPU"), ggml_backend_init_by_name."""
        L = lib()
        f = L.require("ggml_backend_init_by_name", "Backend.by_name")
        with lifecycle.using():
            clear_messages()
            return cls._made(f(name.encode(), params.encode() if params else None), f"Backend.by_name({name!r})",
                             f"the registry has no device named {name!r}")

    @staticmethod
    def load_module(path):
        """Registers the backend module at `path` (a library with `ggml_backend_init`, e.g. the
        Rust CPU backend's libggml_rs_cpu.so) in ggml's registry; returns its device names.
        Loading the same library twice registers it once."""
        L = lib()
        load = L.require("ggml_backend_load", "Backend.load_module")
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise GgmlError(f"Backend.load_module: {path} is not a file")
        key = os.path.realpath(path)
        if key not in _MODULES:
            with lifecycle.using():
                clear_messages()
                reg = load(path.encode())
                if not reg:
                    raise failure("Backend.load_module", f"ggml_backend_load could not load {path} as a backend module")
                n = L.ggml_backend_reg_dev_count(reg)
                _MODULES[key] = (reg, [L.ggml_backend_dev_name(L.ggml_backend_reg_dev_get(reg, i)).decode() for i in range(n)])
        return list(_MODULES[key][1])

    @classmethod
    def rust_cpu(cls, path=None, n_threads=None):
        """ggml-rs's CPU backend written in Rust, loaded as a module beside upstream's CPU (its
        device is then named RSCPU). `path` defaults to $GGML_RS_CPU_LIBRARY (read, and made
        absolute, when the libraries load), else libggml_rs_cpu.so next to the libggml_rs in use.
        GgmlError, naming the path and how to set it, when that file is not there."""
        L = lib()
        if path is not None:
            path, how = os.path.abspath(os.fspath(path)), "the path given"
        elif L.cpu_library is not None:
            path, how = L.cpu_library, ENV_CPU_LIBRARY
        else:
            core = library_info()["ggml_rs"]
            if core is None:
                raise GgmlError(f"Backend.rust_cpu: no path given, {ENV_CPU_LIBRARY} unset, and the loaded ggml is not ggml-rs "
                                f"(nothing to look beside); loaded: {L.paths}")
            path, how = os.path.join(os.path.dirname(core), "libggml_rs_cpu.so"), f"beside {core} ({ENV_CPU_LIBRARY} unset)"
        if not os.path.isfile(path):
            raise GgmlError(f"Backend.rust_cpu: the Rust CPU backend's library is not at {path} ({how}). Build it with "
                            f"`cargo build --release -p ggml-rs-cpu` and pass its path, or set {ENV_CPU_LIBRARY} before "
                            "the first use of ggml_rs")
        names = cls.load_module(path)
        if not names:
            raise GgmlError(f"Backend.rust_cpu: {path} registered no device")
        b = cls.by_name(names[0])
        if n_threads is not None:
            # the registry's proc address, as llama.cpp sets the threads of any CPU-like backend
            reg = _MODULES[os.path.realpath(os.fspath(path))][0]
            get = lib().require("ggml_backend_reg_get_proc_address", "Backend.rust_cpu")
            fn = get(reg, b"ggml_backend_set_n_threads")
            if not fn:
                raise GgmlError(f"Backend.rust_cpu: {path} hands out no ggml_backend_set_n_threads")
            ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int)(fn)(b.ptr, int(n_threads))
        return b

    @classmethod
    def by_type(cls, kind="cpu", params=None):
        """The first registry device of `kind` ("cpu", "gpu", "igpu", "accel"), ggml_backend_init_by_type."""
        if kind not in _DEVICE_TYPES:
            raise ValueError(f"by_type: kind {kind!r} is not one of {sorted(_DEVICE_TYPES)}")
        f = lib().require("ggml_backend_init_by_type", "Backend.by_type")
        with lifecycle.using():
            clear_messages()
            return cls._made(f(_DEVICE_TYPES[kind], params.encode() if params else None), f"Backend.by_type({kind!r})",
                             f"the registry has no {kind} device")

    @classmethod
    def rpc(cls, endpoint, device=0, registry=True, timeout=5.0):
        """A backend on an rpc-server at `endpoint` ("host:port").

        registry=True goes through the registry's "RPC" entry and its proc address
        `ggml_backend_rpc_add_server` (as a program that loads backends dynamically does);
        registry=False calls ggml_backend_rpc_init of libggml-rpc. ggml-rpc aborts the process
        when it cannot connect, so the endpoint is probed first: ConnectionError if it does
        not accept connections within `timeout` seconds.
        """
        host, _, port = endpoint.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=timeout).close()
        except (OSError, ValueError) as e:
            raise ConnectionError(f"Backend.rpc: cannot connect to {endpoint!r}: {e}") from e
        L = lib()
        with lifecycle.using():
            clear_messages()
            if not registry:
                f = L.require("ggml_backend_rpc_init", "Backend.rpc")
                return cls._made(f(endpoint.encode(), int(device)), "ggml_backend_rpc_init", f"no backend for {endpoint}")
            reg = L.require("ggml_backend_reg_by_name", "Backend.rpc")(b"RPC")
            if not reg:
                raise GgmlError("Backend.rpc: the registry has no RPC backend (libggml built without GGML_RPC)")
            addr = L.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_rpc_add_server")
            if not addr:
                raise GgmlError("Backend.rpc: the RPC registry has no ggml_backend_rpc_add_server")
            server = RPC_ADD_SERVER(addr)(endpoint.encode())
            if not server:
                raise failure("ggml_backend_rpc_add_server", f"{endpoint} has no devices")
            n = L.ggml_backend_reg_dev_count(server)
            if not 0 <= device < n:
                raise ValueError(f"Backend.rpc: {endpoint} has {n} devices, no device {device}")
            dev = L.ggml_backend_reg_dev_get(server, device)
            return cls._made(L.ggml_backend_dev_init(dev, None), "ggml_backend_dev_init", f"could not start device {device} of {endpoint}")

    @property
    def is_cpu(self):
        """Whether its device is a CPU (the scheduler's last backend must be one)."""
        with lifecycle.using():
            L = lib()
            return L.ggml_backend_dev_type(L.ggml_backend_get_device(self.ptr)) == DEVICE_TYPE_CPU

    @property
    def buffer_type(self):
        """Its default buffer type."""
        with lifecycle.using():
            return BufferType(lib().ggml_backend_get_default_buffer_type(self.ptr), self)

    def supports(self, tensor):
        """Whether the backend can compute the op of `tensor` (ggml_backend_supports_op)."""
        with lifecycle.using():
            return lib().ggml_backend_supports_op(self.ptr, tensor.ptr)

    def compute(self, graph):
        """Computes an allocated graph on this backend alone (ggml_backend_graph_compute).

        Raises NotAllocatedError, naming the tensor, when a tensor has no live memory, and
        GgmlError when the backend cannot run a node or the compute fails."""
        L = lib()
        with lifecycle.using(), locked(self):
            graph.check("compute", (self,))
            clear_messages()
            status = L.ggml_backend_graph_compute(self.ptr, graph.ptr)
            if status != 0:
                raise failure("ggml_backend_graph_compute", STATUS.get(status, f"status {status}"))

    def synchronize(self):
        with lifecycle.using(), locked(self):
            lib().ggml_backend_synchronize(self.ptr)


class Buffer(Owner):
    """A backend buffer holding tensors of a Context (see `Context.alloc_tensors`)."""

    kind = "buffer"
    rank = 1

    def __init__(self, ptr, parents):
        super().__init__(ptr, lib().ggml_backend_buffer_free, parents, unregister=lambda: unregister_buffer(ptr))
        register_buffer(ptr, self)

    def describe(self):
        return "buffer"

    @property
    def name(self):
        with lifecycle.using():
            return lib().ggml_backend_buffer_name(self.ptr).decode()

    @property
    def size(self):
        with lifecycle.using():
            return lib().ggml_backend_buffer_get_size(self.ptr)

    def set_usage(self, usage):
        """"weights" (the scheduler runs ops next to them), "compute" or "any"."""
        if usage not in USAGE:
            raise ValueError(f"set_usage: {usage!r} is not one of {sorted(USAGE)}")
        with lifecycle.using():
            lib().ggml_backend_buffer_set_usage(self.ptr, USAGE[usage])
        return self
