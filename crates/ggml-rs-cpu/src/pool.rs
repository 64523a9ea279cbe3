//! A persistent thread pool for the backend's ops: `n - 1` workers started once, the calling
//! thread as the n-th; a job is a number of chunks and a function of the chunk index, the chunks
//! handed out through one shared counter. No thread is spawned or joined per op (a fork-join per
//! op costs 10-34 µs, issue 14); between jobs the workers spin for a while on the job state
//! (the next op of a graph usually follows within microseconds), then park until woken.
//!
//! Protocol, per job: the caller publishes the job and the chunk count and opens the job
//! (`state` = epoch · 2 + 1), unparking the workers that went to sleep; everyone takes chunks from
//! `next_chunk` and counts each finished chunk in `done`. The caller returns once every chunk is
//! done, without waiting for workers that have not come yet (on a shared machine a worker may be
//! waiting for a core: it must not hold up the job): it closes the job (`state` even again) and
//! waits only for the workers inside it. A worker enters by incrementing `inside` and then
//! checking that the job it woke for is still open; both steps are sequentially consistent, so
//! either the caller sees it inside and waits for it, or it sees the job closed and leaves
//! without touching it. So the job, which borrows the caller's data, is never used after `run`
//! returns. A panicking chunk is caught and counted; `run` panics once the job is over.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

/// a job as the workers see it: a function of the chunk index, its borrow erased (see `run`)
type Job = &'static (dyn Fn(usize) + Sync);

struct Shared {
    /// epoch · 2 + (1 while a job is open); workers wait for it to change
    state: AtomicU64,
    job: Mutex<Option<Job>>,
    n_chunks: AtomicUsize,
    next_chunk: AtomicUsize,
    /// chunks finished (or panicked) in the open job
    done: AtomicUsize,
    /// workers between entering a job and leaving it
    inside: AtomicUsize,
    /// a chunk panicked in this job
    panicked: AtomicBool,
    shutdown: AtomicBool,
    /// per worker: it is parked or about to park, and needs an unpark to see a new state
    sleeping: Vec<AtomicBool>,
    /// how many times a waiting worker polls the state before it parks
    spin: u32,
}

impl Shared {
    /// takes chunks until none are left, counting each in `done`
    fn run_chunks(&self, job: Job) {
        let n = self.n_chunks.load(Acquire);
        loop {
            let c = self.next_chunk.fetch_add(1, Relaxed);
            if c >= n {
                break;
            }
            if catch_unwind(AssertUnwindSafe(|| job(c))).is_err() {
                self.panicked.store(true, Release);
            }
            // Release: the chunk's writes are visible to the caller once it sees the count
            self.done.fetch_add(1, Release);
        }
    }
}

pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<(JoinHandle<()>, Thread)>,
    /// jobs run (calls of `run` with chunks), for the profiler
    jobs: u64,
    /// with `Some`, the time the caller waits for the other threads at the end of each job is
    /// added up (the profiler's barrier figure); `None` costs one branch per job
    wait: Option<Duration>,
}

/// polls before a worker parks: about 50-100 µs on this machine
pub const DEFAULT_SPIN: u32 = 1 << 14;

impl ThreadPool {
    /// a pool running jobs on `n_threads` threads (the caller and `n_threads - 1` workers)
    pub fn new(n_threads: usize) -> ThreadPool {
        ThreadPool::with_spin(n_threads, DEFAULT_SPIN)
    }

    /// as [`ThreadPool::new`], the workers polling `spin` times before they park (0: park at once)
    pub fn with_spin(n_threads: usize, spin: u32) -> ThreadPool {
        let n_workers = n_threads.max(1) - 1;
        let shared = Arc::new(Shared {
            state: AtomicU64::new(0),
            job: Mutex::new(None),
            n_chunks: AtomicUsize::new(0),
            next_chunk: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            inside: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            sleeping: (0..n_workers).map(|_| AtomicBool::new(false)).collect(),
            spin,
        });
        let workers = (0..n_workers)
            .map(|i| {
                let s = Arc::clone(&shared);
                let h = thread::Builder::new()
                    .name(format!("ggml-rs-cpu-{}", i + 1))
                    .spawn(move || worker(&s, i))
                    .expect("ggml-rs-cpu: could not start a pool thread");
                let t = h.thread().clone();
                (h, t)
            })
            .collect();
        ThreadPool { shared, workers, jobs: 0, wait: None }
    }

    /// starts (or stops) adding up the caller's wait at the end of each job
    pub fn set_measure_wait(&mut self, on: bool) {
        self.wait = on.then_some(self.wait.unwrap_or_default());
    }

    /// jobs run so far
    pub fn jobs(&self) -> u64 {
        self.jobs
    }

    /// the caller's total wait for the other threads at the end of its jobs, while measured
    pub fn waited(&self) -> Duration {
        self.wait.unwrap_or_default()
    }

    /// threads a job runs on, the caller included
    pub fn n_threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `f(chunk)` for every chunk in `0..n_chunks`, each exactly once, spread over the
    /// pool's threads; returns when all have run. A panic in `f` panics here (after every thread
    /// has left the job).
    pub fn run<F: Fn(usize) + Sync>(&mut self, n_chunks: usize, f: F) {
        if n_chunks == 0 {
            return;
        }
        self.jobs += 1;
        if self.workers.is_empty() || n_chunks == 1 {
            (0..n_chunks).for_each(f);
            return;
        }
        let s = &*self.shared;
        let job: &(dyn Fn(usize) + Sync) = &f;
        // SAFETY: only the lifetime is changed. A worker uses `job` only while it is counted in
        // `inside` and saw this job open; this function closes the job and waits until `inside`
        // is zero before it returns (it cannot unwind earlier: chunks run inside catch_unwind),
        // and clears the slot, so `f` outlives every use (see the module docs).
        let job: Job = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(job) };
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(job);
        s.n_chunks.store(n_chunks, Release);
        s.next_chunk.store(0, Relaxed);
        s.done.store(0, Relaxed);
        let closed = s.state.load(Relaxed) + 2;
        s.state.store(closed | 1, SeqCst);
        for (i, (_, t)) in self.workers.iter().enumerate() {
            if s.sleeping[i].swap(false, SeqCst) {
                t.unpark();
            }
        }
        s.run_chunks(job);
        let t0 = self.wait.map(|_| Instant::now());
        // chunks the workers took are being computed now: wait for them
        wait_until(|| s.done.load(Acquire) == n_chunks);
        s.state.store(closed, SeqCst);
        // a worker that entered just before the close leaves at once (or finds no chunk)
        wait_until(|| s.inside.load(SeqCst) == 0);
        if let (Some(w), Some(t0)) = (self.wait.as_mut(), t0) {
            *w += t0.elapsed();
        }
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if s.panicked.swap(false, AcqRel) {
            resume_unwind(Box::new("ggml-rs-cpu: a chunk of a thread-pool job panicked"));
        }
    }

    #[cfg(test)]
    fn shared_weak(&self) -> std::sync::Weak<Shared> {
        Arc::downgrade(&self.shared)
    }
}

/// spins, then yields (on 2 shared cores the thread we wait for may need ours)
fn wait_until(cond: impl Fn() -> bool) {
    let mut polls = 0u32;
    while !cond() {
        polls += 1;
        if polls < 1 << 12 {
            std::hint::spin_loop();
        } else {
            thread::yield_now();
        }
    }
}

fn worker(s: &Shared, index: usize) {
    let mut seen = 0u64;
    loop {
        // wait for the state to change: poll, then park
        let mut polls = 0u32;
        loop {
            let st = s.state.load(SeqCst);
            if st != seen {
                seen = st;
                break;
            }
            if polls < s.spin {
                polls += 1;
                std::hint::spin_loop();
                continue;
            }
            s.sleeping[index].store(true, SeqCst);
            // the caller changes the state before it looks at `sleeping`: either it sees our
            // flag and unparks us, or we see its state here (park's token covers an unpark that
            // comes first)
            if s.state.load(SeqCst) == seen {
                thread::park();
            }
            s.sleeping[index].store(false, SeqCst);
        }
        if s.shutdown.load(Acquire) {
            return;
        }
        if seen & 1 == 0 {
            // a job closed: nothing to do
            continue;
        }
        s.inside.fetch_add(1, SeqCst);
        if s.state.load(SeqCst) == seen {
            let job = *s.job.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(job) = job {
                s.run_chunks(job);
            }
        }
        s.inside.fetch_sub(1, Release);
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Release);
        // an even state no worker has seen: every worker wakes and finds `shutdown`
        self.shared.state.fetch_add(2, SeqCst);
        for (h, t) in self.workers.drain(..) {
            t.unpark();
            // a worker that panicked outside a chunk has nothing to report here
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
    use std::time::Duration;

    use super::*;

    /// every chunk runs exactly once, for many jobs in a row, with and without parking between
    #[test]
    fn every_chunk_runs_exactly_once() {
        for (threads, spin) in [
            (1, DEFAULT_SPIN),
            (2, DEFAULT_SPIN),
            (4, DEFAULT_SPIN),
            (3, 0),
            // more threads than cores: workers often come late to a job
            (8, 1 << 8),
        ] {
            let mut pool = ThreadPool::with_spin(threads, spin);
            let counts: Vec<AtomicUsize> = (0..1000).map(|_| AtomicUsize::new(0)).collect();
            for round in 0..1200usize {
                let n = [0, 1, 2, 3, 7, 64, 1000][round % 7];
                pool.run(n, |c| {
                    counts[c].fetch_add(1, Relaxed);
                });
                for (c, k) in counts.iter().enumerate() {
                    assert_eq!(k.swap(0, Relaxed), (c < n) as usize, "{threads} threads, round {round}: chunk {c} of {n}");
                }
            }
        }
    }

    /// results written by the workers are visible to the caller when run returns; the job
    /// borrows the caller's data
    #[test]
    fn results_are_visible_after_run() {
        let mut pool = ThreadPool::new(3);
        let input: Vec<u64> = (0..10_000).collect();
        let out: Vec<Mutex<u64>> = (0..100).map(|_| Mutex::new(0)).collect();
        for _ in 0..200 {
            pool.run(100, |c| {
                *out[c].lock().unwrap() = input[c * 100..c * 100 + 100].iter().sum();
            });
            let total: u64 = out.iter().map(|m| *m.lock().unwrap()).sum();
            assert_eq!(total, 10_000 * 9_999 / 2);
        }
    }

    /// parked workers wake up and take chunks
    #[test]
    fn parked_workers_take_part() {
        let mut pool = ThreadPool::with_spin(3, 0);
        thread::sleep(Duration::from_millis(20));
        let ids = Mutex::new(std::collections::HashSet::new());
        pool.run(30, |_| {
            ids.lock().unwrap().insert(thread::current().id());
            thread::sleep(Duration::from_millis(2));
        });
        assert_eq!(ids.lock().unwrap().len(), 3, "every thread took chunks");
    }

    /// a panicking chunk panics in the caller, and the pool keeps working
    #[test]
    fn a_panic_reaches_the_caller_and_the_pool_survives() {
        let mut pool = ThreadPool::new(3);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(64, |c| {
                if c == 40 {
                    panic!("chunk 40");
                }
            })
        }));
        assert!(r.is_err());
        let sum = AtomicU64::new(0);
        pool.run(64, |c| {
            sum.fetch_add(c as u64, Relaxed);
        });
        assert_eq!(sum.load(Relaxed), 63 * 64 / 2);
    }

    /// dropping the pool stops and joins its workers (they hold the shared state until they end)
    #[test]
    fn drop_joins_the_workers() {
        for spin in [0, DEFAULT_SPIN] {
            let pool = ThreadPool::with_spin(4, spin);
            let weak = pool.shared_weak();
            thread::sleep(Duration::from_millis(5));
            drop(pool);
            assert!(weak.upgrade().is_none(), "a worker still holds the pool after drop (spin {spin})");
        }
    }
}
