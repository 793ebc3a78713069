//! Waiting for a Redisson unlock message: the subscription a contended acquire makes to the
//! lock's channel, and the wait for a message or a time limit. Waiting is only faster with
//! it, never more correct, so any trouble with the subscription just falls back to sleeping.
//! `reentrant`, `rw-lock` and `fair-lock` wait this way. On a Redis Cluster the subscription
//! is on one node (PUBLISH reaches every node); that node down means sleeping.

use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use redis::aio::PubSub;

use super::conn::Conn;

/// The waiters' subscription connection, made on first contention and kept.
#[derive(Default)]
pub(crate) struct Waiter {
    pubsub: Option<PubSub>,
}

impl Waiter {
    /// Subscribes to `channel` (through `conn`'s server, within its time limit).
    pub(crate) async fn subscribe(&mut self, conn: &mut Conn, channel: &str) {
        let limit = conn.timeout();
        if self.pubsub.is_none() {
            let Ok(client) = conn.client().await else {
                return;
            };
            if let Ok(Ok(p)) = tokio::time::timeout(limit, client.get_async_pubsub()).await {
                self.pubsub = Some(p);
            }
        }
        if let Some(p) = self.pubsub.as_mut() {
            if !matches!(
                tokio::time::timeout(limit, p.subscribe(channel)).await,
                Ok(Ok(()))
            ) {
                self.pubsub = None;
                return;
            }
            // Messages left over from an earlier wait must not end this one early.
            let mut stale = p.on_message();
            while let Some(Some(_)) = stale.next().now_or_never() {}
        }
    }

    /// Unsubscribes from `channel` within `limit`; trouble forgets the connection.
    pub(crate) async fn unsubscribe(&mut self, limit: Duration, channel: &str) {
        if let Some(p) = self.pubsub.as_mut() {
            if !matches!(
                tokio::time::timeout(limit, p.unsubscribe(channel)).await,
                Ok(Ok(()))
            ) {
                self.pubsub = None;
            }
        }
    }

    /// Waits for a message or `limit`, whichever comes first.
    pub(crate) async fn wait(&mut self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        if let Some(p) = self.pubsub.as_mut() {
            let message = tokio::time::timeout_at(deadline, p.on_message().next()).await;
            match message {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => {}
            }
            // The subscription connection died: forget it, sleep out the rest.
            self.pubsub = None;
        }
        tokio::time::sleep_until(deadline).await;
    }
}
