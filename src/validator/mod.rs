//! The validator.
