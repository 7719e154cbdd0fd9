//! Runs an eval through the engine.
