//! Synthetic histories (being written).
