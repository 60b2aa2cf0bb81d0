//! Publish/subscribe (SUBSCRIBE, PSUBSCRIBE, PUBLISH, PUBSUB), as Redis's
//! RESP2 form: a connection with subscriptions only (un)subscribes, pings
//! and quits; PUBLISH encodes each message once and leaves it for the
//! serving loop to deliver ([`RespDb::take_messages`]), which bounds what
//! a subscriber that reads nothing may hold, as Redis's
//! `client-output-buffer-limit pubsub` does.

use std::borrow::Cow;
use std::rc::Rc;

use cornflakes::RcBuf;
use cornflakes_resp::Reply;
use hashbrown::{HashMap, HashSet};

use super::{glob_match, RespDb};

/// What one connection is subscribed to.
#[derive(Debug, Default)]
pub(super) struct Subscriptions {
    channels: HashSet<Box<[u8]>>,
    patterns: HashSet<Box<[u8]>>,
}

impl Subscriptions {
    fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }
}

/// Every connection's subscriptions, by channel, by pattern and by
/// connection, and the messages waiting to be delivered.
#[derive(Debug, Default)]
pub(super) struct PubSub {
    channels: HashMap<Box<[u8]>, Vec<u64>>,
    patterns: HashMap<Box<[u8]>, Vec<u64>>,
    by_session: HashMap<u64, Subscriptions>,
    /// (connection id, the encoded message) in publishing order.
    outgoing: Vec<(u64, Rc<[u8]>)>,
}

/// The commands a connection with subscriptions may run (RESP2).
pub(super) const ALLOWED_WHEN_SUBSCRIBED: &[&str] =
    &["subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ping", "quit", "reset"];

/// `items` as a RESP array of bulk strings, written once (by the reply
/// writer every reply uses) for every subscriber it goes to.
fn encode(items: &[&[u8]]) -> Vec<u8> {
    let mut reply: Reply<RcBuf> = Reply::new(usize::MAX);
    reply.array(items.len());
    for item in items {
        reply.bulk(item);
    }
    reply.to_vec()
}

impl RespDb {
    /// Whether connection `id` has subscriptions (and so is in subscribed
    /// mode).
    pub(super) fn subscribed(&self, id: u64) -> bool {
        !self.pubsub.by_session.is_empty() && self.pubsub.by_session.get(&id).is_some_and(|s| s.count() > 0)
    }

    /// The messages published since the last call, each with the id
    /// ([`Session::id`](super::Session)) of the connection to deliver it
    /// to, in order.
    pub fn take_messages(&mut self) -> Vec<(u64, Rc<[u8]>)> {
        std::mem::take(&mut self.pubsub.outgoing)
    }

    /// Forgets the subscriptions of connection `id`, what it waited on,
    /// whether it monitors, and what CLIENT LIST knows of it (it has gone).
    pub fn end_session(&mut self, id: u64) {
        self.end_blocking(id);
        self.clients.remove(id);
        self.stop_monitor(id);
        self.unsubscribe_all(id);
    }

    /// Leaves `message` for connection `id` (the serving loop delivers it
    /// as a published one: MONITOR's lines).
    pub(super) fn queue_message(&mut self, id: u64, message: Rc<[u8]>) {
        self.pubsub.outgoing.push((id, message));
    }

    /// How many channels and patterns connection `id` is subscribed to.
    pub(super) fn subscription_counts(&self, id: u64) -> (usize, usize) {
        self.pubsub.by_session.get(&id).map_or((0, 0), |s| (s.channels.len(), s.patterns.len()))
    }

    /// Ends every subscription of connection `id` (RESET).
    pub(super) fn unsubscribe_all(&mut self, id: u64) {
        let Some(subs) = self.pubsub.by_session.remove(&id) else { return };
        for c in &subs.channels {
            remove_id(&mut self.pubsub.channels, c, id);
        }
        for p in &subs.patterns {
            remove_id(&mut self.pubsub.patterns, p, id);
        }
    }

    /// The connections with subscriptions, to check which have gone.
    pub fn subscriber_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.pubsub.by_session.keys().copied()
    }

    /// Runs a pub/sub command for connection `id`.
    pub(super) fn pubsub_command(&mut self, name: &str, id: u64, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        match name {
            "subscribe" | "psubscribe" => {
                let pattern = name == "psubscribe";
                for target in args {
                    let subs = self.pubsub.by_session.entry(id).or_default();
                    let set = if pattern { &mut subs.patterns } else { &mut subs.channels };
                    if set.insert(target[..].into()) {
                        let index = if pattern { &mut self.pubsub.patterns } else { &mut self.pubsub.channels };
                        index.entry_ref(&target[..]).or_default().push(id);
                    }
                    let count = self.pubsub.by_session.get(&id).map_or(0, Subscriptions::count);
                    reply.array(3);
                    reply.bulk(name.as_bytes());
                    reply.bulk(target);
                    reply.integer(count as i64);
                }
            }
            "unsubscribe" | "punsubscribe" => {
                let pattern = name == "punsubscribe";
                let targets: Vec<Box<[u8]>> = match args {
                    [] => self
                        .pubsub
                        .by_session
                        .get(&id)
                        .map(|s| if pattern { &s.patterns } else { &s.channels })
                        .map(|set| set.iter().cloned().collect())
                        .unwrap_or_default(),
                    _ => args.iter().map(|a| a[..].into()).collect(),
                };
                if targets.is_empty() {
                    // Nothing to leave: one reply with a nil target, as Redis.
                    reply.array(3);
                    reply.bulk(name.as_bytes());
                    reply.null();
                    reply.integer(self.pubsub.by_session.get(&id).map_or(0, Subscriptions::count) as i64);
                }
                for target in targets {
                    if let Some(subs) = self.pubsub.by_session.get_mut(&id) {
                        let set = if pattern { &mut subs.patterns } else { &mut subs.channels };
                        if set.remove(&target) {
                            let index = if pattern { &mut self.pubsub.patterns } else { &mut self.pubsub.channels };
                            remove_id(index, &target, id);
                        }
                    }
                    let count = self.pubsub.by_session.get(&id).map_or(0, Subscriptions::count);
                    if count == 0 {
                        self.pubsub.by_session.remove(&id);
                    }
                    reply.array(3);
                    reply.bulk(name.as_bytes());
                    reply.bulk(&target);
                    reply.integer(count as i64);
                }
            }
            "publish" => {
                let (channel, message) = (&args[0][..], &args[1][..]);
                let mut n = 0;
                if let Some(ids) = self.pubsub.channels.get(channel) {
                    let encoded: Rc<[u8]> = encode(&[b"message", channel, message]).into();
                    for &to in ids {
                        self.pubsub.outgoing.push((to, encoded.clone()));
                    }
                    n += ids.len();
                }
                for (pattern, ids) in &self.pubsub.patterns {
                    if glob_match(pattern, channel) {
                        let encoded: Rc<[u8]> = encode(&[b"pmessage", pattern, channel, message]).into();
                        for &to in ids {
                            self.pubsub.outgoing.push((to, encoded.clone()));
                        }
                        n += ids.len();
                    }
                }
                reply.integer(n as i64);
            }
            "pubsub" => self.pubsub_introspect(args, reply),
            _ => unreachable!("not a pub/sub command: {name}"),
        }
    }

    /// `PUBSUB CHANNELS [pattern]`, `PUBSUB NUMSUB [channel ...]`,
    /// `PUBSUB NUMPAT`.
    fn pubsub_introspect(&self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let sub = args[0].to_ascii_lowercase();
        match (sub.as_slice(), &args[1..]) {
            (b"channels", rest) if rest.len() <= 1 => {
                let found: Vec<&Box<[u8]>> =
                    self.pubsub.channels.keys().filter(|c| rest.first().is_none_or(|p| glob_match(p, c))).collect();
                reply.array(found.len());
                for c in found {
                    reply.bulk(c);
                }
            }
            (b"numsub", channels) => {
                reply.array(2 * channels.len());
                for c in channels {
                    reply.bulk(c);
                    reply.integer(self.pubsub.channels.get(&c[..]).map_or(0, Vec::len) as i64);
                }
            }
            (b"numpat", []) => reply.integer(self.pubsub.patterns.len() as i64),
            _ => reply.error(&super::unknown_subcommand("pubsub", &args[0])),
        }
    }
}

/// Removes `id` from `key`'s list, and the key with its last one.
fn remove_id(index: &mut HashMap<Box<[u8]>, Vec<u64>>, key: &[u8], id: u64) {
    if let Some(ids) = index.get_mut(key) {
        ids.retain(|&i| i != id);
        if ids.is_empty() {
            index.remove(key);
        }
    }
}
