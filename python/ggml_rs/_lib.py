"""Loading the libraries, the C prototypes, the two struct layouts we read, and ggml's log.

The only module that knows C: everything else calls the functions of `lib()` and reads tensors
through `tensor_struct()`. The layouts are checked once, at load time, against what the library
reports (`ggml_rs_abi_describe`), or against `ggml_tensor_overhead()` for upstream's library.
"""

import ctypes
import logging
import os
import threading
import warnings
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p, c_float, c_int,
                    c_int32, c_int64, c_size_t, c_uint32, c_uint64, c_void_p)

ENV_LIB_DIR = "GGML_RS_LIB_DIR"
ENV_LIBRARY = "GGML_RS_LIBRARY"
ENV_CPU_LIBRARY = "GGML_RS_CPU_LIBRARY"

GGML_MAX_DIMS = 4
GGML_MAX_SRC = 10
GGML_OBJECT_SIZE = 32  # struct ggml_object on 64-bit targets

FLAG_INPUT, FLAG_OUTPUT, FLAG_COMPUTE = 1, 2, 16
STATUS = {0: "GGML_STATUS_SUCCESS", -1: "GGML_STATUS_FAILED", -2: "GGML_STATUS_ALLOC_FAILED", 1: "GGML_STATUS_ABORTED"}
LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_CONT = 1, 2, 3, 4, 5
DEVICE_TYPE_CPU = 0

log = logging.getLogger("ggml_rs")


class GgmlError(RuntimeError):
    """A call into ggml failed; the message is what the library logged (its last error line).

    `messages` holds every warning and error the library logged during the call.
    """

    def __init__(self, message, messages=()):
        super().__init__(message)
        self.messages = list(messages)


class ClosedError(GgmlError, ValueError):
    """The object (or the one it belongs to) was closed: its C memory is gone."""


class NotAllocatedError(GgmlError):
    """A tensor has no memory (yet, or any more): allocate its graph first."""


class init_params(Structure):
    _fields_ = [("mem_size", c_size_t), ("mem_buffer", c_void_p), ("no_alloc", c_bool)]


class tensor_struct(Structure):
    """`struct ggml_tensor`, read-only here except `flags` (there is no setter for COMPUTE)."""

    _fields_ = [
        ("type", c_int),
        ("buffer", c_void_p),
        ("ne", c_int64 * GGML_MAX_DIMS),
        ("nb", c_size_t * GGML_MAX_DIMS),
        ("op", c_int),
        ("op_params", c_int32 * 16),
        ("flags", c_int32),
        ("src", c_void_p * GGML_MAX_SRC),
        ("view_src", c_void_p),
        ("view_offs", c_size_t),
        ("data", c_void_p),
        ("name", c_char * 64),
        ("extra", c_void_p),
        ("padding", c_char * 8),
    ]


class cgraph_struct(Structure):
    """The first fields of `struct ggml_cgraph` (ggml-impl.h): `Context.graph_of` lists leafs,
    which ggml has no function for."""

    _fields_ = [
        ("size", c_int),
        ("n_nodes", c_int),
        ("n_leafs", c_int),
        ("nodes", POINTER(c_void_p)),
        ("grads", POINTER(c_void_p)),
        ("grad_accs", POINTER(c_void_p)),
        ("leafs", POINTER(c_void_p)),
    ]


class abi_entry(Structure):
    _fields_ = [("type_name", c_char_p), ("field", c_char_p), ("value", c_int64), ("align", c_int64)]


P = c_void_p  # every ggml handle is opaque here
LOG_CALLBACK = CFUNCTYPE(None, c_int, c_char_p, c_void_p)
RPC_ADD_SERVER = CFUNCTYPE(c_void_p, c_char_p)

# name: (restype, argtypes); looked up in libggml_rs first, then in the ggml libraries
_CORE = {
    "ggml_init": (P, [init_params]),
    "ggml_free": (None, [P]),
    "ggml_tensor_overhead": (c_size_t, []),
    "ggml_graph_overhead_custom": (c_size_t, [c_size_t, c_bool]),
    "ggml_used_mem": (c_size_t, [P]),
    "ggml_get_mem_size": (c_size_t, [P]),
    "ggml_get_mem_buffer": (P, [P]),
    "ggml_new_tensor": (P, [P, c_int, c_int, POINTER(c_int64)]),
    "ggml_set_name": (P, [P, c_char_p]),
    "ggml_set_input": (None, [P]),
    "ggml_set_output": (None, [P]),
    "ggml_n_dims": (c_int, [P]),
    "ggml_nbytes": (c_size_t, [P]),
    "ggml_nelements": (c_int64, [P]),
    "ggml_is_contiguous": (c_bool, [P]),
    "ggml_is_transposed": (c_bool, [P]),
    "ggml_can_repeat": (c_bool, [P, P]),
    "ggml_type_size": (c_size_t, [c_int]),
    "ggml_blck_size": (c_int64, [c_int]),
    "ggml_type_name": (c_char_p, [c_int]),
    "ggml_op_desc": (c_char_p, [P]),
    "ggml_add": (P, [P, P, P]),
    "ggml_mul": (P, [P, P, P]),
    "ggml_scale": (P, [P, P, c_float]),
    "ggml_sqr": (P, [P, P]),
    "ggml_sum": (P, [P, P]),
    "ggml_repeat": (P, [P, P, P]),
    "ggml_mul_mat": (P, [P, P, P]),
    "ggml_cpy": (P, [P, P, P]),
    "ggml_cont": (P, [P, P]),
    "ggml_transpose": (P, [P, P]),
    "ggml_reshape_4d": (P, [P, P, c_int64, c_int64, c_int64, c_int64]),
    "ggml_view_4d": (P, [P, P, c_int64, c_int64, c_int64, c_int64, c_size_t, c_size_t, c_size_t, c_size_t]),
    "ggml_new_graph_custom": (P, [P, c_size_t, c_bool]),
    "ggml_build_forward_expand": (None, [P, P]),
    "ggml_graph_add_node": (None, [P, P]),
    "ggml_graph_n_nodes": (c_int, [P]),
    "ggml_graph_node": (P, [P, c_int]),
    "ggml_graph_size": (c_int, [P]),
    "ggml_log_set": (None, [LOG_CALLBACK, c_void_p]),
    # ggml-backend.h / ggml-alloc.h: ours (libggml_rs) or upstream's (libggml-base)
    "ggml_backend_free": (None, [P]),
    "ggml_backend_name": (c_char_p, [P]),
    "ggml_backend_get_device": (P, [P]),
    "ggml_backend_dev_type": (c_int, [P]),
    "ggml_backend_dev_name": (c_char_p, [P]),
    "ggml_backend_get_default_buffer_type": (P, [P]),
    "ggml_backend_supports_op": (c_bool, [P, P]),
    "ggml_backend_supports_buft": (c_bool, [P, P]),
    "ggml_backend_graph_compute": (c_int, [P, P]),
    "ggml_backend_synchronize": (None, [P]),
    "ggml_backend_buft_name": (c_char_p, [P]),
    "ggml_backend_buft_get_alignment": (c_size_t, [P]),
    "ggml_backend_buft_is_host": (c_bool, [P]),
    "ggml_backend_buffer_free": (None, [P]),
    "ggml_backend_buffer_name": (c_char_p, [P]),
    "ggml_backend_buffer_get_size": (c_size_t, [P]),
    "ggml_backend_buffer_get_base": (P, [P]),
    "ggml_backend_buffer_get_type": (P, [P]),
    "ggml_backend_buffer_set_usage": (None, [P, c_int]),
    "ggml_backend_alloc_ctx_tensors_from_buft": (P, [P, P]),
    "ggml_backend_tensor_set": (None, [P, c_void_p, c_size_t, c_size_t]),
    "ggml_backend_tensor_get": (None, [P, c_void_p, c_size_t, c_size_t]),
    "ggml_gallocr_new_n": (P, [POINTER(P), c_int]),
    "ggml_gallocr_free": (None, [P]),
    "ggml_gallocr_reserve": (c_bool, [P, P]),
    "ggml_gallocr_alloc_graph": (c_bool, [P, P]),
    "ggml_gallocr_get_buffer_size": (c_size_t, [P, c_int]),
    "ggml_backend_sched_new": (P, [POINTER(P), POINTER(P), c_int, c_size_t, c_bool, c_bool]),
    "ggml_backend_sched_free": (None, [P]),
    "ggml_backend_sched_reserve": (c_bool, [P, P]),
    "ggml_backend_sched_alloc_graph": (c_bool, [P, P]),
    "ggml_backend_sched_graph_compute": (c_int, [P, P]),
    "ggml_backend_sched_reset": (None, [P]),
    "ggml_backend_sched_get_n_splits": (c_int, [P]),
    "ggml_backend_sched_get_n_copies": (c_int, [P]),
    "ggml_backend_sched_get_buffer_size": (c_size_t, [P, P]),
    "ggml_backend_sched_set_tensor_backend": (None, [P, P, P]),
    "ggml_backend_sched_get_tensor_backend": (P, [P, P]),
    # libggml-cpu
    "ggml_backend_cpu_init": (P, []),
    "ggml_backend_cpu_set_n_threads": (None, [P, c_int]),
}

_OPTIONAL = {
    # libggml (the registry)
    "ggml_backend_init_by_name": (P, [c_char_p, c_char_p]),
    "ggml_backend_init_by_type": (P, [c_int, c_char_p]),
    "ggml_backend_reg_by_name": (P, [c_char_p]),
    "ggml_backend_reg_get_proc_address": (P, [P, c_char_p]),
    "ggml_backend_reg_dev_count": (c_size_t, [P]),
    "ggml_backend_reg_dev_get": (P, [P, c_size_t]),
    "ggml_backend_dev_init": (P, [P, c_char_p]),
    "ggml_backend_load": (P, [c_char_p]),
    "ggml_backend_reg_name": (c_char_p, [P]),
    "ggml_backend_dev_name": (c_char_p, [P]),
    # libggml-rpc
    "ggml_backend_rpc_init": (P, [c_char_p, c_uint32]),
    # ggml-rs extensions (include/ggml-rs.h)
    "ggml_rs_version": (c_char_p, []),
    "ggml_rs_abi_describe": (POINTER(abi_entry), [POINTER(c_size_t)]),
    "ggml_rs_gallocr_plan_stats": (c_bool, [P, c_int, POINTER(c_size_t), POINTER(c_size_t)]),
    "ggml_rs_gallocr_counters": (None, [P, POINTER(c_uint64), POINTER(c_uint64)]),
    "ggml_rs_sched_counters": (None, [P, POINTER(c_uint64), POINTER(c_uint64)]),
    "ggml_rs_sched_dump_plan": (c_size_t, [P, P, c_int, c_char_p, c_size_t]),
    "ggml_rs_gallocr_write_report": (c_bool, [P, c_char_p, c_int]),
    "ggml_rs_sched_write_report": (c_bool, [P, c_char_p, c_int]),
}


# the op constructors of ggml.h beyond the few above (ggml_rs/ops.py); all in ggml 0.25.3, looked
# up like _OPTIONAL so that a missing one is an error of the op that needs it, not of the load
UNARY_OPS = ("abs", "sgn", "neg", "step", "tanh", "elu", "relu", "sigmoid", "gelu", "gelu_quick", "gelu_erf", "silu",
             "hardswish", "hardsigmoid", "exp", "expm1", "softplus", "floor", "ceil", "round", "trunc",
             "sqrt", "log", "sin", "cos")
GLU_OPS = ("reglu", "geglu", "swiglu", "geglu_erf", "geglu_quick")
_OPS = {f"ggml_{n}": (P, [P, P]) for n in UNARY_OPS}
_OPS.update({f"ggml_{n}{tail}": (P, [P, P]) for n in GLU_OPS for tail in ("", "_swapped")})
_OPS.update({f"ggml_{n}_split": (P, [P, P, P]) for n in GLU_OPS})
_OPS.update({
    "ggml_leaky_relu": (P, [P, P, c_float, c_bool]),
    "ggml_clamp": (P, [P, P, c_float, c_float]),
    "ggml_swiglu_oai": (P, [P, P, P, c_float, c_float]),
    "ggml_soft_max": (P, [P, P]),
    "ggml_soft_max_ext": (P, [P, P, P, c_float, c_float]),
    "ggml_norm": (P, [P, P, c_float]),
    "ggml_rms_norm": (P, [P, P, c_float]),
    "ggml_get_rows": (P, [P, P, P]),
    "ggml_set_rows": (P, [P, P, P, P]),
    "ggml_rope_ext": (P, [P, P, P, P, c_int, c_int, c_int, c_float, c_float, c_float, c_float, c_float, c_float]),
    "ggml_concat": (P, [P, P, P, c_int]),
    "ggml_permute": (P, [P, P, c_int, c_int, c_int, c_int]),
    "ggml_is_contiguous_1": (c_bool, [P]),
    "ggml_is_contiguous_rows": (c_bool, [P]),
    "ggml_are_same_shape": (c_bool, [P, P]),
    "ggml_is_vector": (c_bool, [P]),
})


class Library:
    """The loaded libraries; each C function is an attribute (`lib().ggml_add`)."""

    def __init__(self, handles, paths):
        self.paths = paths
        self.missing = set()
        self._handles = handles
        for table, required in ((_CORE, True), (_OPTIONAL, False), (_OPS, False)):
            for name, (restype, argtypes) in table.items():
                fn = _lookup(handles, name)
                if fn is None:
                    if required:
                        raise OSError(f"ggml_rs: {name} is in none of {paths}")
                    self.missing.add(name)
                    continue
                fn.restype, fn.argtypes = restype, argtypes
                setattr(self, name, fn)
        self.is_ggml_rs = "ggml_rs_version" not in self.missing
        self.tensor_overhead = self.ggml_tensor_overhead()
        _check_layouts(self)

    def function(self, name):
        """A new, untyped ctypes function for the exported symbol `name` (the first library that
        has it), or None: for `Context.op`, which sets its own types."""
        for h in self._handles:
            try:
                return h[name]
            except AttributeError:
                pass
        return None

    def require(self, name, what):
        """The function `name`, or a GgmlError saying which library lacks it."""
        if name in self.missing:
            where = "ggml-rs (the loaded library is upstream's ggml)" if name.startswith("ggml_rs_") else "a library that is not loaded"
            raise GgmlError(f"{what}: {name} needs {where}; loaded: {self.paths}")
        return getattr(self, name)


def _lookup(handles, name):
    for h in handles:
        try:
            return getattr(h, name)
        except AttributeError:
            pass
    return None


def _check_layouts(lib):
    """Our two struct mirrors against the library's own description (or the tensor overhead)."""
    if lib.is_ggml_rs:
        n = c_size_t(0)
        entries = lib.ggml_rs_abi_describe(ctypes.byref(n))
        mirrors = {b"ggml_tensor": tensor_struct, b"ggml_init_params": init_params, b"ggml_cgraph": cgraph_struct}
        for i in range(n.value):
            e = entries[i]
            mirror = mirrors.get(e.type_name)
            if mirror not in (None, cgraph_struct) and e.field is None and e.value != ctypes.sizeof(mirror):
                raise OSError(f"ggml_rs: struct {e.type_name.decode()} is {e.value} bytes in the library, {ctypes.sizeof(mirror)} here")
            if mirror is not None and e.field is not None:
                ours = getattr(mirror, e.field.decode(), None)
                if ours is not None and ours.offset != e.value:
                    raise OSError(f"ggml_rs: {e.type_name.decode()}.{e.field.decode()} is at {e.value} in the library, {ours.offset} here")
            if e.type_name == b"const":
                want = {b"GGML_MAX_SRC": GGML_MAX_SRC, b"GGML_MAX_DIMS": GGML_MAX_DIMS, b"GGML_TENSOR_FLAG_INPUT": FLAG_INPUT,
                        b"GGML_TENSOR_FLAG_OUTPUT": FLAG_OUTPUT, b"GGML_TENSOR_FLAG_COMPUTE": FLAG_COMPUTE,
                        b"GGML_LOG_LEVEL_ERROR": LOG_ERROR, b"GGML_LOG_LEVEL_CONT": LOG_CONT}.get(e.field)
                if want is not None and want != e.value:
                    raise OSError(f"ggml_rs: {e.field.decode()} is {e.value} in the library, {want} here")
    elif (lib.tensor_overhead != ctypes.sizeof(tensor_struct) + GGML_OBJECT_SIZE
          or lib.ggml_graph_overhead_custom(1, False) <= ctypes.sizeof(cgraph_struct)):
        raise OSError(f"ggml_rs: ggml_tensor_overhead() is {lib.tensor_overhead}, "
                      f"expected {ctypes.sizeof(tensor_struct) + GGML_OBJECT_SIZE}: not the ggml this package knows (0.25.3)")


# ---- loading --------------------------------------------------------------------------------

_lock = threading.Lock()
_lib = None


class LoadWarning(UserWarning):
    """The libraries loaded, but not as this package is meant to run: stock ggml without ggml-rs."""


def _absolute(value, what):
    """A path setting made absolute once, against the current directory of this call; None stays."""
    if value is None:
        return None
    value = os.fspath(value)
    if not value:
        return None
    path = os.path.abspath(os.path.expanduser(value))
    if path != value:
        log.debug("%s=%s is %s", what, value, path)
    return path


def _candidates(lib_dir, stem):
    return [os.path.join(lib_dir, f"{stem}{ext}") for ext in (".so", ".so.0")]


def _find(lib_dir, stem):
    """`<lib_dir>/<stem>.so` (or .so.0), or None."""
    return next((p for p in _candidates(lib_dir, stem) if os.path.exists(p)), None)


class _DlInfo(Structure):
    _fields_ = [("fname", c_char_p), ("fbase", c_void_p), ("sname", c_char_p), ("saddr", c_void_p)]


def _origin(fn):
    """The file the dynamic linker took the function `fn` from (dladdr), or None."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except (OSError, AttributeError):
        return None
    dladdr.argtypes, dladdr.restype = [c_void_p, POINTER(_DlInfo)], c_int
    info = _DlInfo()
    if not dladdr(ctypes.cast(fn, c_void_p), ctypes.byref(info)) or not info.fname:
        return None
    return os.path.abspath(info.fname.decode())


def load(lib_dir=None, library=None):
    """Loads ggml and ggml-rs once per process and returns the `Library`.

    lib_dir: the folder of libggml-base.so, libggml-cpu.so, libggml.so and libggml-rpc.so
        (default: $GGML_RS_LIB_DIR, else the dynamic linker's search path).
    library: libggml_rs.so to use (default: $GGML_RS_LIBRARY, else one already in the process,
        e.g. through LD_PRELOAD, else <lib_dir>/libggml_rs.so, else the one libggml-base needs).

    A relative lib_dir or library (argument or variable) is taken from the current directory of
    this first call, once; `library_info()` reports the absolute paths. A folder or file that is
    not there raises OSError naming every path tried. When the libraries turn out to be stock
    ggml without ggml-rs, a `LoadWarning` says so (the package still works; its ggml-rs
    extensions raise).

    Every library is opened with RTLD_GLOBAL, libggml_rs first: libggml-base of a build on
    ggml-rs needs it by its soname, and the one loaded first is the one every library binds to.
    """
    global _lib
    with _lock:
        if _lib is not None:
            if lib_dir is not None or library is not None:
                wanted = (_absolute(lib_dir, "lib_dir") or _lib._wanted[0], _absolute(library, "library") or _lib._wanted[1])
                if wanted != _lib._wanted:
                    raise GgmlError(f"ggml_rs is already loaded from {_lib.paths}; a process loads it once")
            return _lib
        lib_dir = _absolute(lib_dir if lib_dir is not None else os.environ.get(ENV_LIB_DIR), ENV_LIB_DIR)
        library = _absolute(library if library is not None else os.environ.get(ENV_LIBRARY), ENV_LIBRARY)
        cpu_library = _absolute(os.environ.get(ENV_CPU_LIBRARY), ENV_CPU_LIBRARY)
        if lib_dir is not None and not os.path.isdir(lib_dir):
            raise OSError(f"ggml_rs: {ENV_LIB_DIR} (or lib_dir) is {lib_dir}, which is not a folder")
        if library is not None and not os.path.isfile(library):
            raise OSError(f"ggml_rs: {ENV_LIBRARY} (or library) is {library}, which is not a file")
        mode = os.RTLD_GLOBAL | os.RTLD_NOW
        handles, paths = [], []

        def open_(path):
            h = ctypes.CDLL(path, mode=mode)
            handles.append(h)
            paths.append(path)
            return h

        if library is not None:
            open_(library)
        else:
            try:  # already in the process (LD_PRELOAD): its definitions are the ones in use
                handles.append(ctypes.CDLL("libggml_rs.so", mode=mode | os.RTLD_NOLOAD))
                paths.append("libggml_rs.so (already loaded)")
            except OSError:
                own = _find(lib_dir, "libggml_rs") if lib_dir is not None else None
                if own is not None:
                    open_(own)
        for stem, required in (("libggml-base", True), ("libggml-cpu", True), ("libggml-rpc", False), ("libggml", False)):
            path = _find(lib_dir, stem) if lib_dir is not None else f"{stem}.so"
            try:
                if path is None:
                    raise OSError(f"none of {', '.join(_candidates(lib_dir, stem))} exists")
                open_(path)
            except OSError as e:
                if required:
                    where = lib_dir if lib_dir is not None else (f"the dynamic linker's search path ({ENV_LIB_DIR} is unset; "
                                                                 f"LD_LIBRARY_PATH={os.environ.get('LD_LIBRARY_PATH', '')!r})")
                    raise OSError(f"ggml_rs: cannot load {stem}: {e}. Looked in {where}. Set {ENV_LIB_DIR} to the folder of "
                                  f"the ggml libraries (e.g. <llama.cpp build>/bin) or pass it to ggml_rs.load()") from e
        _lib = Library(handles, paths)
        _lib._wanted = (lib_dir, library)
        _lib.lib_dir, _lib.cpu_library = lib_dir, cpu_library
        _install_log(_lib)
        if not _lib.is_ggml_rs:
            warnings.warn(f"ggml_rs: the loaded ggml ({', '.join(paths)}) is stock ggml, not ggml-rs: the allocator and the "
                          f"scheduler are upstream's and the ggml-rs extensions raise. Set {ENV_LIBRARY} to libggml_rs.so "
                          f"(and {ENV_LIB_DIR} to a ggml build on it) to use ggml-rs", LoadWarning, stacklevel=3)
        return _lib


def library_info():
    """Which libraries this process uses (loading them first if needed), as a dict:

    is_ggml_rs: whether ggml-rs is loaded (False: stock ggml); version: ggml_rs_version() or None;
    ggml_rs: the file libggml_rs was taken from, or None; allocator: the file that defines
    ggml_gallocr_new_n (libggml_rs, or stock libggml-base); opened: the paths this package opened
    (a library can also come in as a dependency, as libggml_rs does for a ggml build on it);
    lib_dir, library, cpu_library: the absolute paths of the settings ($GGML_RS_LIB_DIR,
    $GGML_RS_LIBRARY, $GGML_RS_CPU_LIBRARY or load()'s arguments), None where unset."""
    L = lib()
    return {
        "is_ggml_rs": L.is_ggml_rs,
        "version": L.ggml_rs_version().decode() if L.is_ggml_rs else None,
        "ggml_rs": _origin(L.ggml_rs_version) if L.is_ggml_rs else None,
        "allocator": _origin(L.ggml_gallocr_new_n),
        "opened": list(L.paths),
        "lib_dir": L.lib_dir,
        "library": L._wanted[1],
        "cpu_library": L.cpu_library,
    }


def lib():
    """The loaded `Library` (loads it from the environment on first use)."""
    return _lib if _lib is not None else load()


# ---- ggml's log: forwarded to `logging`, warnings and errors kept per thread for exceptions --

_tls = threading.local()
_LEVELS = {LOG_DEBUG: logging.DEBUG, LOG_INFO: logging.INFO, LOG_WARN: logging.WARNING, LOG_ERROR: logging.ERROR}


def _on_log(level, text, _user_data):
    try:
        text = (text or b"").decode("utf-8", "replace")
        cont = level == LOG_CONT
        if cont:
            level = getattr(_tls, "level", LOG_INFO)
        else:
            _tls.level = level
        if level >= LOG_WARN:
            msgs = _messages()
            if cont and getattr(_tls, "open", False) and msgs:
                msgs[-1][1] += text
            else:
                msgs.append([level, text])
            _tls.open = not text.endswith("\n")
        if text.strip():
            log.log(_LEVELS.get(level, logging.INFO), "%s", text.rstrip("\n"))
    except Exception:  # never let an exception into C
        pass


_log_callback = LOG_CALLBACK(_on_log)  # kept alive for as long as ggml may call it


def _install_log(library):
    library.ggml_log_set(_log_callback, None)


def _messages():
    msgs = getattr(_tls, "messages", None)
    if msgs is None:
        msgs = _tls.messages = []
    return msgs


def clear_messages():
    """Forgets this thread's logged warnings and errors (before a call that may fail)."""
    _tls.messages = []
    _tls.open = False


def failure(what, fallback, cls=GgmlError):
    """An exception for a failed call: the last error (or warning) the library logged on this thread."""
    msgs = [(level, m.strip()) for level, m in _messages() if m.strip()]
    errors = [m for level, m in msgs if level >= LOG_ERROR] or [m for _, m in msgs]
    text = errors[-1] if errors else fallback
    msgs = [m for _, m in msgs]
    return cls(f"{what}: {text}" if not text.startswith(what) else text, msgs)
