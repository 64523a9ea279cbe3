//! Greedy generation through the `llama-cpp-2` crate, printing every token and a fingerprint of
//! every logits row, so that two runs (stock ggml 0.26.0 and ggml-rs's abi-0-26-0 profile) can be
//! compared line by line; `--logits FILE` also writes the raw rows (f32, native endian).
//!
//!   llama-cpp-2-generate MODEL.gguf [-p PROMPT] [-n N_PREDICT] [-t THREADS] [--logits FILE]
//!
//! Output: one `pos` line per evaluated position (the prompt's, then each generated token's):
//! the token there, FNV-1a 64 of the logits row's bytes, the greedy pick and its logit; then
//! `text:` with the generated text and `tokens:` with the generated ids.

use std::io::Write;
use std::num::NonZeroU32;
use std::process::ExitCode;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;

struct Args {
    model: String,
    prompt: String,
    n_predict: usize,
    threads: i32,
    logits: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut args = Args {
        model: String::new(),
        prompt: "Once upon a time there was a little model that generated random text".into(),
        n_predict: 16,
        threads: 2,
        logits: None,
    };
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "-p" => args.prompt = value("-p")?,
            "-n" => args.n_predict = value("-n")?.parse().map_err(|e| format!("-n: {e}"))?,
            "-t" => args.threads = value("-t")?.parse().map_err(|e| format!("-t: {e}"))?,
            "--logits" => args.logits = Some(value("--logits")?),
            _ if a.starts_with('-') => return Err(format!("unknown option {a}")),
            _ => args.model = a,
        }
    }
    if args.model.is_empty() {
        return Err("usage: llama-cpp-2-generate MODEL.gguf [-p PROMPT] [-n N_PREDICT] [-t THREADS] [--logits FILE]".into());
    }
    Ok(args)
}

/// FNV-1a 64 of the row's raw bytes: equal fingerprints mean bit-identical rows (in practice).
fn fnv1a64(row: &[f32]) -> u64 {
    row.iter().flat_map(|x| x.to_ne_bytes()).fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The greedy pick: the first index of the largest logit (as llama.cpp's greedy sampler).
fn argmax(row: &[f32]) -> (usize, f32) {
    row.iter().enumerate().fold((0, f32::NEG_INFINITY), |best, (i, &x)| if x > best.1 { (i, x) } else { best })
}

fn run(args: &Args) -> Result<(), String> {
    let mut backend = LlamaBackend::init().map_err(|e| format!("backend: {e}"))?;
    if std::env::var_os("GENERATE_VERBOSE").is_none() {
        backend.void_logs();
    }
    let model = LlamaModel::load_from_file(&backend, &args.model, &LlamaModelParams::default()).map_err(|e| format!("model {}: {e}", args.model))?;
    let vocab = model.vocab();
    // BOS as the model asks (add_special), no special-token parsing of the prompt
    let prompt = vocab.tokenize(args.prompt.as_bytes(), true, false);
    let n_ctx = prompt.len() + args.n_predict + 1;
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(u32::try_from(n_ctx).map_err(|e| format!("n_ctx: {e}"))?))
        .with_n_batch(u32::try_from(prompt.len().max(1)).map_err(|e| format!("n_batch: {e}"))?)
        .with_n_threads(args.threads)
        .with_n_threads_batch(args.threads);
    let mut ctx = model.new_context(&backend, params).map_err(|e| format!("context: {e}"))?;
    let mut dump = match &args.logits {
        Some(path) => Some(std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?)),
        None => None,
    };
    let out = std::io::stdout();
    let mut out = out.lock();
    let mut row_out = |pos: usize, token: LlamaToken, row: &[f32]| -> Result<LlamaToken, String> {
        let (best, logit) = argmax(row);
        writeln!(out, "pos {pos:4} token {:6} logits_fnv1a64 {:016x} next {best:6} logit {logit:.9e}", token.0, fnv1a64(row)).map_err(|e| e.to_string())?;
        if let Some(d) = dump.as_mut() {
            d.write_all(&row.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>()).map_err(|e| e.to_string())?;
        }
        Ok(LlamaToken::new(i32::try_from(best).map_err(|e| e.to_string())?))
    };

    // the prompt in one batch, logits of every position
    let mut batch = LlamaBatch::new(prompt.len().max(1), 1);
    for (i, &t) in prompt.iter().enumerate() {
        batch.add(t, i32::try_from(i).map_err(|e| e.to_string())?, &[0], true).map_err(|e| format!("batch: {e}"))?;
    }
    ctx.decode(&mut batch).map_err(|e| format!("decode (prompt): {e}"))?;
    let mut next = LlamaToken::new(0);
    for (i, &t) in prompt.iter().enumerate() {
        next = row_out(i, t, ctx.get_logits_ith(i32::try_from(i).map_err(|e| e.to_string())?))?;
    }

    // greedy generation, one token a step
    let mut generated = Vec::new();
    let mut text = Vec::new();
    for step in 0..args.n_predict {
        if vocab.is_eog(next) {
            break;
        }
        generated.push(next.0);
        text.extend(vocab.token_to_piece(next, false, None));
        let pos = prompt.len() + step;
        batch.clear();
        batch.add(next, i32::try_from(pos).map_err(|e| e.to_string())?, &[0], true).map_err(|e| format!("batch: {e}"))?;
        ctx.decode(&mut batch).map_err(|e| format!("decode (step {step}): {e}"))?;
        next = row_out(pos, next, ctx.get_logits_ith(0))?;
    }
    writeln!(out, "text: {}", String::from_utf8_lossy(&text)).map_err(|e| e.to_string())?;
    writeln!(out, "tokens: {generated:?}").map_err(|e| e.to_string())?;
    Ok(())
}

fn main() -> ExitCode {
    match parse_args().and_then(|a| run(&a)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("llama-cpp-2-generate: {e}");
            ExitCode::FAILURE
        }
    }
}
