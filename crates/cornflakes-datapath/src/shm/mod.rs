//! Shared-memory datapath (being written).
