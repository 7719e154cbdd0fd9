//! Helpers shared by modes: seeds and label shuffles, history truncation, titles.
