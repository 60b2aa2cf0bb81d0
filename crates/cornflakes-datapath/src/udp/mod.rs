//! UDP datapath (being written).
