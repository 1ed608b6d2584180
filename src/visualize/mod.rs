//! Visualization.
