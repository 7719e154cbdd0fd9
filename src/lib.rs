//! Conclave: a self-hosted server in which a panel of LLMs deliberates.
//!
//! # Layout
//! - [`modes`]: pure deliberation logic (prompts, parsers, aggregation); no I/O.
//! - [`providers`]: OpenAI-compatible HTTP client and the sim models.

pub mod modes;
pub mod providers;
