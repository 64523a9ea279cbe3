//! The API against the real libraries (GGML_RS_LIB_DIR; each test skips, saying why, when they
//! cannot be loaded, and fails then with GGML_RS_API_REQUIRED=1).

mod common;

use common::rpc;
use ggml_rs_api::{Backend, Context, Error, GraphAllocator, Scheduler, SchedulerOptions, Type};

macro_rules! needs_libraries {
    () => {
        if ggml_rs_api::doctest_skip() {
            return;
        }
    };
}

/// The scheduler's seed scenario (c_tests/test_sched_scenarios.c): x -> n1 = 2x on the rpc-server
/// -> n2 = n1² on the CPU, reset + alloc + compute 12 times with new inputs. Upstream's scheduler
/// rewrites the graph on the first alloc and skips the copy of x afterwards: 4 instead of 16 in
/// round 2 ("stale results after reset + re-alloc").
fn reset_alloc_loop(parallel: bool) {
    needs_libraries!();
    let second = match rpc::rpc().unwrap() {
        Ok(s) => s,
        Err(why) => {
            assert!(std::env::var("GGML_RS_API_REQUIRED").is_err(), "GGML_RS_API_REQUIRED=1 but {why}");
            ggml_rs_api::skipped(&why);
            return;
        }
    };
    let cpu = Backend::cpu_with_threads(1).unwrap();
    let ctx = Context::new().unwrap();
    let x = ctx.new_f32(&[4]).unwrap().named("x").input();
    let n1 = ctx.scale(x, 2.0).unwrap().named("n1");
    let n2 = ctx.sqr(n1).unwrap().named("n2").output();
    let graph = ctx.graph(&[n2]).unwrap();
    let mut sched = Scheduler::with_options(&[&second.backend, &cpu], SchedulerOptions { parallel, ..Default::default() }).unwrap();
    assert_eq!(sched.n_copies(), if parallel { 4 } else { 1 });
    for round in 1..=12 {
        sched.set_tensor_backend(n1, &second.backend).unwrap();
        sched.set_tensor_backend(n2, &cpu).unwrap();
        let a = sched.alloc(&graph).unwrap();
        assert_eq!(a.n_splits(), 2, "round {round}");
        assert_eq!(a.tensor_backend(n1), Some(0));
        a.set(x, &[round as f32; 4]).unwrap();
        a.compute().unwrap();
        assert_eq!(a.to_vec::<f32>(n2).unwrap(), [(2.0 * round as f32).powi(2); 4], "round {round} ({})", second.what);
    }
}

#[test]
fn reset_alloc_loop_one_copy() {
    reset_alloc_loop(false);
}

#[test]
fn reset_alloc_loop_four_copies() {
    reset_alloc_loop(true);
}

/// Matmul + add + softmax on two backends against plain Rust, weights in a buffer of their own.
#[test]
fn two_backends_match_plain_rust() {
    needs_libraries!();
    let second = rpc::second().unwrap();
    let cpu = Backend::cpu().unwrap();
    let weights = Context::new().unwrap();
    let w = weights.new_f32(&[3, 2]).unwrap().named("w");
    let cpu_buft = cpu.default_buffer_type();
    let buf = cpu_buft.alloc_ctx_tensors(&weights).unwrap();
    buf.set(w, &[1.0f32, 2.0, 3.0, -1.0, 0.5, 0.0]).unwrap();
    let ctx = Context::new().unwrap();
    let x = ctx.new_f32(&[3, 2]).unwrap().named("x").input();
    let wx = ctx.mul_mat(w, x).unwrap();
    let y = ctx.soft_max(ctx.add(wx, wx).unwrap()).unwrap().output();
    let graph = ctx.graph(&[y]).unwrap();
    let mut sched = Scheduler::new(&[&second.backend, &cpu]).unwrap();
    sched.set_tensor_backend(wx, &second.backend).unwrap();
    sched.set_tensor_backend(y, &cpu).unwrap();
    let a = sched.alloc(&graph).unwrap();
    let xv = [0.5f32, 1.0, -1.0, 2.0, 0.0, 1.0];
    a.set(x, &xv).unwrap();
    a.compute().unwrap();
    let got = a.to_vec::<f32>(y).unwrap();
    let wv = [1.0f32, 2.0, 3.0, -1.0, 0.5, 0.0];
    for j in 0..2 {
        let r: Vec<f32> = (0..2).map(|i| 2.0 * (0..3).map(|k| wv[i * 3 + k] * xv[j * 3 + k]).sum::<f32>()).collect();
        let m = r[0].max(r[1]);
        let s: f32 = r.iter().map(|v| (v - m).exp()).sum();
        for i in 0..2 {
            assert!((got[j * 2 + i] - (r[i] - m).exp() / s).abs() < 1e-6, "{got:?} ({})", second.what);
        }
    }
}

/// A buffer dropped while an allocation that reads it lives: the compute is refused, naming the
/// tensor, instead of reading freed memory; allocating again places it anew.
#[test]
fn dropped_buffer_is_named_not_read() {
    needs_libraries!();
    let cpu = Backend::cpu().unwrap();
    let weights = Context::new().unwrap();
    let w = weights.new_f32(&[4]).unwrap().named("w");
    let buft = cpu.default_buffer_type();
    let buf = buft.alloc_ctx_tensors(&weights).unwrap();
    buf.set(w, &[1.0f32; 4]).unwrap();
    let ctx = Context::new().unwrap();
    let y = ctx.scale(w, 3.0).unwrap().output();
    let graph = ctx.graph(&[y]).unwrap();
    let mut galloc = GraphAllocator::new(&buft).unwrap();
    {
        let a = galloc.alloc(&graph).unwrap();
        a.compute(&cpu).unwrap();
        assert_eq!(a.to_vec::<f32>(y).unwrap(), [3.0; 4]);
        drop(buf);
        let e = a.compute(&cpu).unwrap_err();
        assert!(matches!(&e, Error::NotAllocated(m) if m.contains("'w'") && m.contains("freed")), "{e}");
        assert!(a.to_vec::<f32>(y).is_err());
    }
    // allocated again: w has no buffer now, the allocator places it (its old bytes are gone)
    let a = galloc.alloc(&graph).unwrap();
    a.set(w, &[2.0f32; 4]).unwrap();
    a.compute(&cpu).unwrap();
    assert_eq!(a.to_vec::<f32>(y).unwrap(), [6.0; 4]);
}

/// Tensors placed by a graph allocator that is gone are placed anew by the next one.
#[test]
fn graph_of_a_dropped_allocator_is_placed_anew() {
    needs_libraries!();
    let cpu = Backend::cpu().unwrap();
    let ctx = Context::new().unwrap();
    let x = ctx.new_f32(&[8]).unwrap().input();
    let y = ctx.sqr(x).unwrap().output();
    let graph = ctx.graph(&[y]).unwrap();
    let buft = cpu.default_buffer_type();
    for round in 1..=3 {
        let mut galloc = GraphAllocator::new(&buft).unwrap();
        let a = galloc.alloc(&graph).unwrap();
        a.set(x, &[round as f32; 8]).unwrap();
        a.compute(&cpu).unwrap();
        assert_eq!(a.to_vec::<f32>(y).unwrap(), [(round * round) as f32; 8]);
    }
    // and by a scheduler after an allocator
    let mut sched = Scheduler::new(&[&cpu]).unwrap();
    let a = sched.alloc(&graph).unwrap();
    a.set(x, &[5.0f32; 8]).unwrap();
    a.compute().unwrap();
    assert_eq!(a.to_vec::<f32>(y).unwrap(), [25.0; 8]);
}

/// What ggml aborts on comes back as an error.
#[test]
fn misuse_is_an_error() {
    needs_libraries!();
    let cpu = Backend::cpu().unwrap();
    let other = Backend::cpu().unwrap();
    let ctx = Context::new().unwrap();
    let a = ctx.new_f32(&[4, 3]).unwrap().named("a");
    let b = ctx.new_f32(&[5, 3]).unwrap().named("b");
    let e = ctx.mul_mat(a, b).unwrap_err();
    assert!(e.to_string().contains("ggml_mul_mat") && e.to_string().contains("'a'"), "{e}");
    assert!(ctx.add(a, b).is_err());
    assert!(ctx.new_tensor(Type::Q8_0, &[31]).is_err());
    assert!(ctx.new_tensor(Type::from_raw(4), &[32]).is_err()); // Q4_2: removed from ggml
    assert!(ctx.new_f32(&[1, 1, 1, 1, 1]).is_err());
    let t = ctx.transpose(a).unwrap();
    assert!(ctx.soft_max(t).is_err());
    assert!(ctx.mul_mat(t, b).is_err());

    // the scheduler: backends not its own, a last backend that is not a CPU, none at all
    let x = ctx.new_f32(&[4]).unwrap().input();
    let y = ctx.sqr(x).unwrap().output();
    let graph = ctx.graph(&[y]).unwrap();
    let mut sched = Scheduler::new(&[&cpu]).unwrap();
    let e = sched.set_tensor_backend(y, &other).unwrap_err();
    assert!(e.to_string().contains("not a backend of this scheduler"), "{e}");
    assert!(sched.buffer_size(&other).is_err());
    assert!(Scheduler::new(&[]).is_err());
    assert!(Scheduler::new(&[&cpu, &cpu]).is_err());
    if let Ok(Ok(second)) = rpc::rpc() {
        let e = Scheduler::new(&[&cpu, &second.backend]).unwrap_err();
        assert!(e.to_string().contains("must be a CPU backend"), "{e}");
    }
    let alloc = sched.alloc(&graph).unwrap();
    // a tensor of no graph; wrong element type; wrong length
    assert!(matches!(alloc.set(a, &[0.0f32; 12]), Err(Error::Invalid(_))));
    assert!(matches!(alloc.set(x, &[0i32; 4]), Err(Error::Invalid(_))));
    assert!(matches!(alloc.set(x, &[0.0f32; 5]), Err(Error::Invalid(_))));
    assert!(matches!(alloc.set_bytes(x, &[0u8; 15]), Err(Error::Invalid(_))));
    alloc.set(x, &[3.0f32; 4]).unwrap();
    alloc.compute().unwrap();
    assert_eq!(alloc.to_vec::<f32>(y).unwrap(), [9.0; 4]);
    alloc.reset();

    // a graph bigger than the scheduler was made for: upstream asserts, ggml-rs grows
    let mut t = x;
    for _ in 0..10 {
        t = ctx.sqr(t).unwrap();
    }
    let big = ctx.graph(&[t]).unwrap();
    let mut small = Scheduler::with_options(&[&cpu], SchedulerOptions { graph_size: 4, parallel: false }).unwrap();
    match (ggml_rs_api::load().unwrap(), small.alloc(&big)) {
        (Some(_), Ok(a)) => {
            a.set(x, &[1.0f32; 4]).unwrap();
            a.compute().unwrap();
        }
        (None, Err(e)) => assert!(e.to_string().contains("graph_size"), "{e}"),
        (v, r) => panic!("{v:?}: {:?}", r.err()),
    }

    // a graph allocator's memory on a backend that cannot use it
    if let Ok(Ok(second)) = rpc::rpc() {
        let rpc_buft = second.backend.default_buffer_type();
        let mut galloc = GraphAllocator::new(&rpc_buft).unwrap();
        let a = galloc.alloc(&graph).unwrap();
        let e = a.compute(&cpu).unwrap_err();
        assert!(e.to_string().contains("cannot use"), "{e}");
        a.set(x, &[2.0f32; 4]).unwrap();
        a.compute(&second.backend).unwrap();
        assert_eq!(a.to_vec::<f32>(y).unwrap(), [4.0; 4]);

        // weights in the rpc-server's memory, a graph computed on the CPU: refused, not read
        let weights = Context::new().unwrap();
        let w = weights.new_f32(&[4]).unwrap().named("w");
        let wbuf = rpc_buft.alloc_ctx_tensors(&weights).unwrap();
        wbuf.set(w, &[1.0f32; 4]).unwrap();
        let z = ctx.scale(w, 2.0).unwrap().output();
        let gz = ctx.graph(&[z]).unwrap();
        let cpu_buft = cpu.default_buffer_type();
        let mut galloc = GraphAllocator::new(&cpu_buft).unwrap();
        let a = galloc.alloc(&gz).unwrap();
        let e = a.compute(&cpu).unwrap_err();
        assert!(e.to_string().contains("cannot use") && e.to_string().contains("RPC"), "{e}");

        // the same graph through a scheduler of the CPU alone: ggml aborts, here it is an error
        let mut sched = Scheduler::new(&[&cpu]).unwrap();
        let e = sched.alloc(&gz).unwrap_err();
        assert!(e.to_string().contains("'w'") && e.to_string().contains("no backend of the scheduler"), "{e}");
        // with the rpc-server in the scheduler it runs
        let mut sched = Scheduler::new(&[&second.backend, &cpu]).unwrap();
        let a = sched.alloc(&gz).unwrap();
        a.compute().unwrap();
        assert_eq!(a.to_vec::<f32>(z).unwrap(), [2.0; 4]);
    }
}

/// An input of one graph that the next graph of the same scheduler computes from again, and
/// whose bytes the first graph's result took: ggml-rs refuses the compute, naming it, and the
/// message comes back in the error (upstream computes from whatever is there).
#[test]
fn library_message_in_the_error() {
    needs_libraries!();
    if ggml_rs_api::load().unwrap().is_none() {
        ggml_rs_api::skipped("upstream's libraries (the refusal is ggml-rs's)");
        return;
    }
    let cpu = Backend::cpu().unwrap();
    let ctx = Context::new().unwrap();
    let x = ctx.new_f32(&[16]).unwrap().named("x").input();
    let emb = ctx.scale(x, 3.0).unwrap().named("emb").output();
    let encoder = ctx.graph(&[emb]).unwrap();
    let y = ctx.new_f32(&[16]).unwrap().named("y").input();
    let dec = ctx.add(ctx.sqr(y).unwrap(), emb).unwrap().output();
    let decoder = ctx.graph_with_size(&[dec], 64).unwrap();
    let mut sched = Scheduler::new(&[&cpu]).unwrap();
    {
        let a = sched.alloc(&encoder).unwrap();
        a.set(x, &[1.0f32; 16]).unwrap();
        a.compute().unwrap();
    }
    let a = sched.alloc(&decoder).unwrap();
    a.set(y, &[2.0f32; 16]).unwrap();
    match a.compute() {
        Err(Error::Library { call, message, log }) => {
            assert_eq!(call, "ggml_backend_sched_graph_compute");
            assert!(message.contains("'x'") && message.contains("not been set"), "{message}");
            assert!(log.contains(&message), "{log:?}");
        }
        other => panic!("{other:?}"),
    }
    a.set(x, &[1.0f32; 16]).unwrap();
    a.compute().unwrap();
    assert_eq!(a.to_vec::<f32>(dec).unwrap(), [7.0; 16]);
}

/// ggml-rs's extensions: plan statistics, counters, the split plan as JSON and DOT.
#[test]
fn extensions() {
    needs_libraries!();
    let cpu = Backend::cpu().unwrap();
    let ctx = Context::new().unwrap();
    let x = ctx.new_f32(&[64]).unwrap().input();
    let y = ctx.sqr(ctx.scale(x, 2.0).unwrap()).unwrap().output();
    let graph = ctx.graph(&[y]).unwrap();
    // the same ops, in tensors of their own: a tensor placed by one allocator and then by
    // another is placed anew each time (not a replay)
    let x2 = ctx.new_f32(&[64]).unwrap().input();
    let y2 = ctx.sqr(ctx.scale(x2, 2.0).unwrap()).unwrap().output();
    let graph2 = ctx.graph(&[y2]).unwrap();
    let mut sched = Scheduler::new(&[&cpu]).unwrap();
    let buft = cpu.default_buffer_type();
    let mut galloc = GraphAllocator::new(&buft).unwrap();
    if ggml_rs_api::load().unwrap().is_none() {
        assert!(matches!(sched.counters(), Err(Error::Unsupported(_))));
        assert!(matches!(galloc.plan_stats(), Err(Error::Unsupported(_))));
        return;
    }
    assert_eq!(galloc.plan_stats().unwrap(), None);
    for _ in 0..3 {
        galloc.alloc(&graph).unwrap().compute(&cpu).unwrap();
        let a = sched.alloc(&graph2).unwrap();
        a.compute().unwrap();
        let json = a.plan_json().unwrap();
        assert!(json.starts_with('{') && json.contains("\"splits\"") && json.contains("\"CPU\""), "{json}");
        assert!(a.plan_dot().unwrap().starts_with("digraph"));
    }
    let s = galloc.plan_stats().unwrap().unwrap();
    assert!(s.lower_bound > 0 && s.planned >= s.lower_bound && galloc.buffer_size() >= s.planned, "{s:?}");
    assert_eq!(galloc.counters().unwrap(), (1, 2));
    let c = sched.counters().unwrap();
    assert_eq!((c.splits, c.repeats), (1, 2));
}

/// Two schedulers in two threads, each with its own backends, contexts and graphs (none of
/// these objects is `Send`: each thread makes its own).
#[test]
fn two_schedulers_in_two_threads() {
    needs_libraries!();
    std::thread::scope(|s| {
        let workers: Vec<_> = (1..=2)
            .map(|k| {
                s.spawn(move || {
                    let cpu = Backend::cpu_with_threads(1).unwrap();
                    let ctx = Context::new().unwrap();
                    let x = ctx.new_f32(&[256]).unwrap().input();
                    let y = ctx.scale(ctx.sqr(x).unwrap(), k as f32).unwrap().output();
                    let graph = ctx.graph(&[y]).unwrap();
                    let mut sched = Scheduler::new(&[&cpu]).unwrap();
                    for round in 1..=50 {
                        let a = sched.alloc(&graph).unwrap();
                        a.set(x, &vec![round as f32; 256]).unwrap();
                        a.compute().unwrap();
                        assert_eq!(a.to_vec::<f32>(y).unwrap(), vec![(round * round * k) as f32; 256], "thread {k} round {round}");
                    }
                    // a failure in one thread comes back in that thread's error
                    let e = ctx.mul_mat(x, ctx.new_f32(&[3]).unwrap()).unwrap_err();
                    assert!(matches!(e, Error::Invalid(_)));
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    });
}
