//! Placeholder until built.
