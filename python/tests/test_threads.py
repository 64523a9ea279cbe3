"""Two schedulers in two threads at once, each with its own backends: every round of each gives
numpy's result. ctypes releases the GIL during each call, so the computes really overlap."""

import threading

import numpy as np

import ggml_rs as g

ROUNDS = 40


def worker(seed, n, barrier, results, errors, backends):
    try:
        rng = np.random.default_rng(seed)
        wv = rng.standard_normal((n, n)).astype(np.float32)
        with g.Context() as wctx, g.Context() as ctx:
            w = wctx.tensor((n, n), name=f"w{seed}")
            with wctx.alloc_tensors(backends[0]) as wbuf:
                wbuf.set_usage("weights")
                w.set(wv)
                x = ctx.tensor((4, n), name="x").set_input()
                h = ctx.sqr(ctx.mul_mat(w, x), name="h")
                out = ctx.add(ctx.scale(h, 0.25), x, name="out").set_output()
                graph = ctx.graph(out)
                with g.Scheduler(backends) as sched:
                    barrier.wait()
                    for round in range(ROUNDS):
                        sched.reset()
                        sched.alloc(graph)
                        xv = rng.standard_normal((4, n)).astype(np.float32)
                        x.set(xv)
                        sched.compute(graph)
                        want = 0.25 * (xv @ wv.T) ** 2 + xv
                        np.testing.assert_allclose(out.get(), want, rtol=1e-4, atol=1e-4, err_msg=f"thread {seed} round {round}")
                        results[seed] += 1
    except BaseException as e:  # reported by the main thread
        errors.append(e)
        barrier.abort()


def run_two(make_backends):
    barrier = threading.Barrier(2)
    results, errors = {1: 0, 2: 0}, []
    backends = {s: make_backends() for s in (1, 2)}
    threads = [threading.Thread(target=worker, args=(s, 48, barrier, results, errors, backends[s])) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for bs in backends.values():
        for b in bs:
            b.close()
    if errors:
        raise errors[0]
    assert results == {1: ROUNDS, 2: ROUNDS}


def test_two_cpu_schedulers_in_two_threads():
    run_two(lambda: [g.Backend.cpu(n_threads=1)])


def test_two_schedulers_over_rpc_and_cpu_in_two_threads(rpc_endpoint):
    run_two(lambda: [g.Backend.rpc(rpc_endpoint), g.Backend.cpu(n_threads=1)])


def test_close_while_another_thread_computes():
    # the close waits for the running compute; the next use in the other thread raises
    cpu = g.Backend.cpu(n_threads=1)
    ctx = g.Context()
    x = ctx.tensor((256, 256), name="x").set_input()
    y = ctx.mul_mat(x, x, name="y").set_output()
    graph = ctx.graph(y)
    sched = g.Scheduler([cpu])
    started, outcome = threading.Event(), []

    def loop():
        try:
            while True:
                sched.reset()
                sched.alloc(graph)
                x.set(np.ones((256, 256), np.float32))
                sched.compute(graph)
                assert y.get()[0, 0] == 256.0
                started.set()
        except (g.ClosedError, g.NotAllocatedError) as e:
            # the close lands anywhere in the loop: on a call into the closed scheduler
            # (ClosedError), or between alloc and x.set, where x lost the memory the closed
            # scheduler gave it (NotAllocatedError); either way a raise, never a crash
            outcome.append(e)
        except BaseException as e:
            outcome.append(e)
            started.set()

    t = threading.Thread(target=loop)
    t.start()
    assert started.wait(60)
    cpu.close()  # closes the scheduler first
    ctx.close()
    t.join(60)
    assert len(outcome) == 1 and isinstance(outcome[0], (g.ClosedError, g.NotAllocatedError)), outcome
