//! The TCP datapath between two network namespaces joined by a veth pair,
//! at MTU 1500 and 9000, made by `scripts/netns.sh`: an echo server in
//! namespace B (this test binary re-executed there with
//! `CF_TCP_NETNS_ROLE=server`), the client on a thread that enters
//! namespace A. Messages of 0 B to the largest round-trip, checked byte by
//! byte. A guard stops the server and removes the namespaces, even when the
//! test fails. Without root or `ip`, it prints why and skips.

/// The receive mode these tests run with.
const RECV_MODE: cornflakes_datapath::tcp::RecvMode = cornflakes_datapath::tcp::RecvMode::Single;

include!("tcp_common/tcp_netns.rs");
