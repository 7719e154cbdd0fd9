//! Integration tests: a real server on an ephemeral port, a temporary SQLite file (or a fresh
//! PostgreSQL database), the sim models in-process and through the sim-server over HTTP, and
//! real HTTP, WebSocket and SSE clients. One binary keeps link times down.

mod access;
mod attachments;
mod bench;
mod blueprint;
mod brainstorm;
mod cancel;
mod chain;
mod cli;
mod confidence_weighted;
mod council;
mod crash;
mod dberrors;
mod decompose;
mod eval;
mod eval_modes;
mod export;
mod fact_check;
mod fallback;
mod faults;
mod helpers;
mod instances;
mod lists;
mod metrics;
mod modes;
mod openai;
mod page;
mod peer_review;
mod postgres;
mod real_model;
mod reasoning;
mod red_team;
mod registry;
mod rerun;
mod retry;
mod secrets;
mod specialist_panel;
mod spend;
mod stream;
mod structured;
mod tls;
mod tournament;
mod validation;
mod ws_abuse;
mod xss;
