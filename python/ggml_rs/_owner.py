"""Ownership of C objects: who frees what, in which order, and never while it is in use.

Every C object this package creates (context, backend, buffer, graph allocator, scheduler) is an
`Owner`. Three rules make double frees and use after free impossible from Python:

- An owner holds strong references to the owners it depends on (a scheduler to its backends, a
  buffer to its backend and context), and they hold only weak references back. So the garbage
  collector frees a scheduler before its backends; at exit `weakref.finalize` runs the remaining
  finalizers newest first, which is the same order.
- `close()` closes the dependents first, then frees; afterwards every use raises `ClosedError`.
- Every call into the library runs inside `using()`; a free waits until no call is in flight in
  any thread (a finalizer that the garbage collector runs inside such a call is deferred to its
  end), so another thread cannot free what a running call reads.

The registries map raw pointers back to live owners: the memory range of each context (a tensor
pointer belongs to exactly one) and each buffer the package knows (a tensor is readable only
while its buffer is one of them).
"""

import atexit
import bisect
import contextlib
import itertools
import threading
import weakref

from ._lib import ClosedError


class _Lifecycle:
    def __init__(self):
        self._cv = threading.Condition(threading.RLock())
        self._active = 0
        self._closers = 0
        self._pending = []
        self._tls = threading.local()
        self.generation = 0  # bumped by every free and every new buffer: cached checks expire

    def _depth(self):
        return getattr(self._tls, "depth", 0)

    @contextlib.contextmanager
    def using(self):
        """A section that calls into the library: nothing is freed while one runs."""
        with self._cv:
            if self._depth() == 0:
                while self._closers:
                    self._cv.wait()
            self._active += 1
        self._tls.depth = self._depth() + 1
        try:
            yield
        finally:
            self._tls.depth -= 1
            with self._cv:
                self._active -= 1
                if self._active == 0 and self._pending:
                    self._drain()
                self._cv.notify_all()

    def _drain(self):
        pending, self._pending = self._pending, []
        for fn in pending:
            fn()

    def free(self, fn):
        """Runs fn (which frees C memory) once no call is in flight."""
        with self._cv:
            self.generation += 1
            if self._depth() > 0:  # the GC ran a finalizer inside a call of this thread
                self._pending.append(fn)
                return
            self._closers += 1
            try:
                while self._active:
                    self._cv.wait()
                self._drain()
                fn()
            finally:
                self._closers -= 1
                self._cv.notify_all()

    def bump(self):
        with self._cv:
            self.generation += 1


lifecycle = _Lifecycle()
_serial = itertools.count()
_live = weakref.WeakSet()


def _close_all_at_exit():
    for o in sorted(list(_live), key=lambda o: (o.rank, -o.serial)):
        try:
            o.close()
        except Exception:
            pass


# weakref.finalize registers its own exit hook on first use; make that happen now, so that ours
# (registered after it) runs before it
weakref.finalize(_close_all_at_exit, lambda: None)
atexit.register(_close_all_at_exit)


def _release(free, ptr, unregister, _keep_alive):
    def run():
        unregister()
        free(ptr)
    lifecycle.free(run)


class Owner:
    """A C object this package must free, with the owners it depends on (`parents`).

    `rank` orders the frees at interpreter exit: schedulers and graph allocators (0), buffers
    (1), backends (2), contexts (3); newest first within a rank.
    """

    kind = "object"
    rank = 0

    def __init__(self, ptr, free, parents=(), unregister=lambda: None):
        self._ptr = ptr
        self._closed = False
        self._lock = threading.RLock()  # one call at a time on this object
        self.serial = next(_serial)
        self._dependents = weakref.WeakSet()
        self._parents = tuple(parents)
        for p in self._parents:
            p._dependents.add(self)
        # the finalizer keeps the parents alive until this object is freed
        self._finalizer = weakref.finalize(self, _release, free, ptr, unregister, self._parents)
        _live.add(self)

    @property
    def closed(self):
        return self._closed or not self._finalizer.alive

    @property
    def ptr(self):
        """The C pointer; raises ClosedError once closed. Use inside `lifecycle.using()`."""
        if self.closed:
            raise ClosedError(f"{self.describe()} is closed")
        return self._ptr

    def describe(self):
        return self.kind

    def close(self):
        """Frees the C object, after closing everything that depends on it. Idempotent."""
        with lifecycle._cv:
            if self._closed:
                return
            self._closed = True
        for d in sorted(list(self._dependents), key=lambda o: -o.serial):
            d.close()
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<{self.describe()}{' (closed)' if self.closed else ''}>"


def locked(*owners):
    """Holds the locks of `owners` (in creation order, so two calls never deadlock)."""
    stack = contextlib.ExitStack()
    for o in sorted({id(o): o for o in owners}.values(), key=lambda o: o.serial):
        stack.enter_context(o._lock)
    return stack


# ---- pointer registries ---------------------------------------------------------------------

_reg_lock = threading.Lock()
_ctx_starts = []   # sorted start addresses of live contexts' memory
_ctx_by_start = {}  # start -> (end, weakref to Context)
_buffers = {}       # buffer pointer -> weakref to its owner (Buffer, GraphAllocator, Scheduler)


def register_context(start, end, ctx):
    with _reg_lock:
        bisect.insort(_ctx_starts, start)
        _ctx_by_start[start] = (end, weakref.ref(ctx))


def unregister_context(start):
    with _reg_lock:
        if _ctx_by_start.pop(start, None) is not None:
            _ctx_starts.remove(start)


def context_of(ptr):
    """The live Context whose memory holds `ptr`, or None."""
    with _reg_lock:
        i = bisect.bisect_right(_ctx_starts, ptr) - 1
        if i < 0:
            return None
        end, ref = _ctx_by_start[_ctx_starts[i]]
        ctx = ref() if ptr < end else None
    return ctx if ctx is not None and not ctx.closed else None


def register_buffer(ptr, owner):
    with _reg_lock:
        _buffers[ptr] = weakref.ref(owner)
    lifecycle.bump()


def unregister_buffer(ptr):
    with _reg_lock:
        _buffers.pop(ptr, None)


def buffer_owner(ptr):
    """The live owner of buffer `ptr`, or None (unknown, or freed)."""
    with _reg_lock:
        ref = _buffers.get(ptr)
    owner = ref() if ref is not None else None
    return owner if owner is not None and not owner.closed else None
