//! `ops/enums.rs` against the pinned `ggml/include/ggml.h`: every value of `enum ggml_op`,
//! `enum ggml_unary_op` and `enum ggml_glu_op` has the Rust variant of the same name at the same
//! number, and the counts agree. The header is read from the tree in `GGML_RS_UPSTREAM_TREE`
//! (the llama.cpp folder of the pin); unset, the test prints why and passes, unless
//! `GGML_RS_UPSTREAM_REQUIRED=1` (the test suite sets both), where it fails.
//!
//! Names are compared without underscores and case (`ConvTranspose1d` ~ `CONV_TRANSPOSE_1D`,
//! `L2Norm` ~ `L2_NORM`), which is how the Rust names were made from upstream's.

use ggml_rs_cpu::ops::{GluOp, Op, UnaryOp};

/// the pinned ggml.h, or None (skip) / a panic (required)
fn header() -> Option<String> {
    let required = std::env::var("GGML_RS_UPSTREAM_REQUIRED").is_ok_and(|v| v == "1");
    let why = match std::env::var("GGML_RS_UPSTREAM_TREE") {
        Ok(tree) => {
            let path = std::path::Path::new(&tree).join("ggml/include/ggml.h");
            match std::fs::read_to_string(&path) {
                Ok(text) => return Some(text),
                Err(e) => format!("cannot read {}: {e}", path.display()),
            }
        }
        Err(_) => "GGML_RS_UPSTREAM_TREE is not set (the pinned llama.cpp tree)".to_string(),
    };
    assert!(!required, "the pinned ggml.h is required (GGML_RS_UPSTREAM_REQUIRED=1): {why}");
    println!("SKIPPED: {why}");
    None
}

/// The enumerators of `enum <name> { ... };` with their values (C's rules: from 0, each one more
/// than the one before unless given).
fn enumerators(text: &str, name: &str) -> Vec<(String, i64)> {
    let start = text.find(&format!("enum {name} {{")).unwrap_or_else(|| panic!("enum {name} not found in ggml.h"));
    let body = &text[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find("};").unwrap_or_else(|| panic!("end of enum {name}"))];
    // comments out
    let mut clean = String::new();
    for line in body.lines() {
        clean.push_str(line.split("//").next().unwrap());
        clean.push('\n');
    }
    let mut out = Vec::new();
    let mut next = 0i64;
    for item in clean.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (ident, value) = match item.split_once('=') {
            Some((i, v)) => (i.trim(), v.trim().parse::<i64>().unwrap_or_else(|_| panic!("enum {name}: value of {i} is not a number: {v}"))),
            None => (item, next),
        };
        assert!(ident.bytes().all(|b| b == b'_' || b.is_ascii_alphanumeric()), "enum {name}: odd enumerator `{ident}`");
        out.push((ident.to_string(), value));
        next = value + 1;
    }
    out
}

fn norm(s: &str) -> String {
    s.chars().filter(|c| *c != '_').flat_map(char::to_uppercase).collect()
}

/// checks one enum: (prefix-stripped header name, value) against the Rust variants' (name, value)
fn compare(header: &[(String, i64)], prefix: &str, ours: &[(String, i64)], what: &str) {
    let count = header.iter().find(|(n, _)| n == &format!("{prefix}COUNT")).unwrap_or_else(|| panic!("{what}: no {prefix}COUNT")).1;
    let theirs: Vec<(String, i64)> = header
        .iter()
        .filter(|(n, _)| !n.ends_with("_COUNT"))
        .map(|(n, v)| (n.strip_prefix(prefix).unwrap_or_else(|| panic!("{what}: {n} lacks {prefix}")).to_string(), *v))
        .collect();
    assert_eq!(theirs.len() as i64, count, "{what}: the header's enumerators are not 0..COUNT");
    assert_eq!(ours.len(), theirs.len(), "{what}: {} Rust variants, {} in ggml.h", ours.len(), theirs.len());
    for (name, value) in &theirs {
        let mine = ours.iter().find(|(n, _)| norm(n) == norm(name));
        match mine {
            Some((n, v)) => assert_eq!(v, value, "{what}: {prefix}{name} is {value} upstream, {n} is {v} here"),
            None => panic!("{what}: {prefix}{name} = {value} has no Rust variant"),
        }
    }
}

#[test]
fn op_enums_equal_the_pinned_header() {
    let Some(text) = header() else { return };
    let ops: Vec<(String, i64)> = Op::ALL.iter().map(|o| (format!("{o:?}"), *o as i64)).collect();
    compare(&enumerators(&text, "ggml_op"), "GGML_OP_", &ops, "enum ggml_op");
    let unary: Vec<(String, i64)> = UnaryOp::ALL.iter().map(|o| (format!("{o:?}"), *o as i64)).collect();
    compare(&enumerators(&text, "ggml_unary_op"), "GGML_UNARY_OP_", &unary, "enum ggml_unary_op");
    let glu: Vec<(String, i64)> = GluOp::ALL.iter().map(|o| (format!("{o:?}"), *o as i64)).collect();
    compare(&enumerators(&text, "ggml_glu_op"), "GGML_GLU_OP_", &glu, "enum ggml_glu_op");
}

#[test]
fn the_parser_reads_c_enums() {
    // a self-check of `enumerators`, which the comparison above relies on
    let text = "enum e {\n  E_A, // first\n  E_B = 5,\n  E_C,\n\n  E_COUNT,\n};";
    assert_eq!(enumerators(text, "e"), vec![("E_A".into(), 0), ("E_B".into(), 5), ("E_C".into(), 6), ("E_COUNT".into(), 7)]);
    assert_eq!(norm("ConvTranspose1d"), norm("CONV_TRANSPOSE_1D"));
}
