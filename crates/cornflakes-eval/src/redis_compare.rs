//! `cf redis-compare` (work in progress).
