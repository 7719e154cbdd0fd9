//! Delphi tests (below).
