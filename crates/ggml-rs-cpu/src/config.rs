//! The Rust CPU backend's settings: every environment variable it reads, parsed once into one
//! [`Config`] ([`get`]). The README's "Environment variables" table documents them.
//!
//! | variable | values | field |
//! |---|---|---|
//! | `GGML_RS_CPU_SIMD` | this architecture's kernel sets ([`crate::simd::Level::name`]) | `simd` |
//! | `GGML_RS_CPU_ORDER` | `upstream` (default), `fast` | `order` |
//! | `GGML_RS_CPU_REPACK` | `0`/`off`/..., `1`/`on`/..., `plain` ([`crate::backend::repack`]) | `repack` |
//! | `GGML_RS_CPU_PROFILE` | unset, empty or `0`: off | `profile` |
//! | `GGML_RS_CPU_NAME` | a registry / device name | `name` |
//! | `GGML_CPU_DISABLE_FUSION` | `1` (upstream's switch) | `disable_fusion` |
//!
//! The five switches that each chose a faster summation order for one kernel family
//! (`GGML_RS_CPU_Q8_0_TILES`, `_F16_TILES`, `_F32_TILES`, `_FA_ORDER`, `_Q4_ORDER`) are one
//! setting now, `GGML_RS_CPU_ORDER`; a process that still sets one of them is told so on stderr.

use std::sync::OnceLock;

/// the summation orders the kernels follow
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SumOrder {
    /// upstream's CPU backend's, bit for bit, on the kernel set's upstream build (the default)
    Upstream,
    /// the fastest forms, in other orders: Q8_0 / F16 / F32 prompt tiles in their one-lane forms,
    /// flash attention's earlier paths (tiles for decode, a KV split by idle threads), Q4_0 / Q4_K
    /// in `vec_dot`'s order whatever the shape (no repacked orders) with the per-block tiles
    Fast,
}

/// the settings of this process
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// `GGML_RS_CPU_SIMD`: the kernel-set cap as given (checked by [`crate::simd::active`])
    pub simd: Option<String>,
    /// `GGML_RS_CPU_ORDER`
    pub order: SumOrder,
    /// `GGML_RS_CPU_REPACK` as given (checked by [`crate::backend::repack::mode`])
    pub repack: Option<String>,
    /// `GGML_RS_CPU_PROFILE`
    pub profile: bool,
    /// `GGML_RS_CPU_NAME` (non-empty)
    pub name: Option<String>,
    /// `GGML_CPU_DISABLE_FUSION=1`
    pub disable_fusion: bool,
}

/// the variables [`SumOrder`] replaced
const RETIRED: [&str; 5] = ["GGML_RS_CPU_Q8_0_TILES", "GGML_RS_CPU_F16_TILES", "GGML_RS_CPU_F32_TILES", "GGML_RS_CPU_FA_ORDER", "GGML_RS_CPU_Q4_ORDER"];

impl Config {
    /// the settings `var` gives (a lookup of the environment), and the warnings to print
    pub fn parse(var: impl Fn(&str) -> Option<String>) -> (Config, Vec<String>) {
        let mut warnings = Vec::new();
        let order = match var("GGML_RS_CPU_ORDER").as_deref().map(str::trim) {
            None | Some("") | Some("upstream") => SumOrder::Upstream,
            Some("fast") => SumOrder::Fast,
            Some(other) => {
                warnings.push(format!("GGML_RS_CPU_ORDER={other} is not one of upstream, fast; using upstream"));
                SumOrder::Upstream
            }
        };
        for old in RETIRED {
            if let Some(v) = var(old) {
                warnings.push(format!("{old}={v} is no longer read: GGML_RS_CPU_ORDER=fast chooses every fast order, upstream (the default) none"));
            }
        }
        let config = Config {
            simd: var("GGML_RS_CPU_SIMD"),
            order,
            repack: var("GGML_RS_CPU_REPACK"),
            profile: var("GGML_RS_CPU_PROFILE").is_some_and(|v| !v.is_empty() && v != "0"),
            name: var("GGML_RS_CPU_NAME").filter(|n| !n.is_empty()),
            disable_fusion: var("GGML_CPU_DISABLE_FUSION").is_some_and(|v| v.trim().parse::<i32>() == Ok(1)),
        };
        (config, warnings)
    }

    /// whether the fast orders are chosen
    pub fn fast(&self) -> bool {
        self.order == SumOrder::Fast
    }
}

/// this process's settings, read from the environment on first use (warnings to stderr, once)
pub fn get() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let (config, warnings) = Config::parse(|k| std::env::var(k).ok());
        for w in warnings {
            eprintln!("ggml-rs-cpu: {w}");
        }
        config
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(vars: &[(&str, &str)]) -> (Config, Vec<String>) {
        Config::parse(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn one_setting_chooses_the_orders_and_the_retired_ones_are_named() {
        let (c, w) = parse(&[]);
        assert_eq!((c.order, c.profile, c.disable_fusion, c.name.clone(), w.len()), (SumOrder::Upstream, false, false, None, 0));
        let (c, w) = parse(&[("GGML_RS_CPU_ORDER", "fast"), ("GGML_RS_CPU_PROFILE", "1"), ("GGML_CPU_DISABLE_FUSION", "1"), ("GGML_RS_CPU_NAME", "X")]);
        assert!(c.fast() && c.profile && c.disable_fusion && w.is_empty());
        assert_eq!(c.name.as_deref(), Some("X"));
        let (c, w) = parse(&[("GGML_RS_CPU_ORDER", "fastest"), ("GGML_RS_CPU_FA_ORDER", "fast"), ("GGML_RS_CPU_NAME", ""), ("GGML_RS_CPU_PROFILE", "0")]);
        assert!(!c.fast() && !c.profile && c.name.is_none());
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("GGML_RS_CPU_ORDER=fastest") && w[1].contains("GGML_RS_CPU_FA_ORDER=fast is no longer read"), "{w:?}");
    }
}
