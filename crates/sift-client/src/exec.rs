//! Sending the commands of one request to a server or a cluster, sync or async.
//!
//! Every operation of the crate is written once, as an `async fn` over [`Exec`]: it builds
//! [`Group`]s of commands (each group's commands touch one key, hence one cluster slot), runs
//! them, and reads the replies. The sync connections run a request to completion inside
//! [`Exec::run`], so the operation's future is ready at its first poll and [`block_on_ready`]
//! drives it without a runtime; the async connections send the groups concurrently.
//!
//! What a failure tells, per connection:
//! * [`redis::Connection`]: all groups go out in one write; the replies are read one by one,
//!   so when the connection fails midway, every group answered before is kept and the others
//!   are `Err`.
//! * the async connections (multiplexed, connection manager, async cluster): each group is its
//!   own request, so each group succeeds or fails on its own.
//! * [`redis::cluster::ClusterConnection`] (sync cluster): the crate's cluster pipeline sends
//!   the groups to their nodes in parallel, but reports one error for the whole pipeline: then
//!   every group is `Err`.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use redis::{Cmd, Value};

use crate::error::Error;

/// Commands that touch one key (so one slot of a cluster), sent together.
#[derive(Clone)]
pub struct Group {
    /// The key the commands touch (routes the group in a cluster).
    pub key: Vec<u8>,
    /// The commands, in order.
    pub cmds: Vec<Cmd>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("key", &String::from_utf8_lossy(&self.key))
            .field("cmds", &self.cmds.len())
            .finish()
    }
}

impl Group {
    /// A group of commands on `key`.
    pub fn new(key: Vec<u8>) -> Group {
        Group { key, cmds: Vec::new() }
    }

    /// Bytes these commands take on the wire (RESP).
    pub fn wire_bytes(&self) -> usize {
        self.cmds.iter().map(|c| c.get_packed_command().len()).sum()
    }
}

/// The replies of one group (one per command, server errors included as
/// [`Value::ServerError`]), or why there are none.
pub type Replies = Result<Vec<Value>, Error>;

pub(crate) mod sealed {
    use super::{Group, Replies};

    /// How a sync connection runs groups (not implementable outside the crate).
    pub trait RunSync {
        /// Runs `groups`; one result per group, in order.
        fn run_groups(&mut self, groups: &[Group]) -> Vec<Replies>;

        /// Whether a failure of one command fails every group (so a `NOSCRIPT` could not be
        /// repaired command by command: send scripts with `EVAL`).
        fn coarse(&self) -> bool {
            false
        }
    }

    /// How an async connection runs groups (not implementable outside the crate).
    #[cfg(feature = "tokio")]
    pub trait RunAsync {
        /// Runs `groups` concurrently; one result per group, in order.
        fn run_groups(&self, groups: Vec<Group>) -> futures_util::future::BoxFuture<'static, Vec<Replies>>;
    }
}

/// A blocking connection a filter can use: [`redis::Connection`] (one server) or
/// [`redis::cluster::ClusterConnection`] (Redis Cluster).
pub trait Connection: sealed::RunSync {}

/// An async connection a filter can use (tokio): [`redis::aio::MultiplexedConnection`],
/// [`redis::aio::ConnectionManager`] (one server) or [`redis::cluster_async::ClusterConnection`]
/// (Redis Cluster). Cheap to clone; the groups of one request are sent concurrently on clones.
#[cfg(feature = "tokio")]
pub trait AsyncConnection: sealed::RunAsync + Clone + Send + Sync + 'static {}

/// Reads one reply, skipping RESP3 push messages (not replies to our commands).
fn recv_reply(conn: &mut redis::Connection) -> redis::RedisResult<Value> {
    loop {
        match conn.recv_response()? {
            Value::Push { .. } => continue,
            v => return Ok(v),
        }
    }
}

impl sealed::RunSync for redis::Connection {
    fn run_groups(&mut self, groups: &[Group]) -> Vec<Replies> {
        let mut packed = Vec::new();
        for g in groups {
            for c in &g.cmds {
                c.write_packed_command(&mut packed);
            }
        }
        if let Err(e) = self.send_packed_command(&packed) {
            let msg = e.to_string();
            return groups.iter().map(|_| Err(Error::Connection(msg.clone()))).collect();
        }
        let mut out = Vec::with_capacity(groups.len());
        let mut broken: Option<String> = None;
        for g in groups {
            if let Some(msg) = &broken {
                out.push(Err(Error::Connection(format!("no reply (the connection failed earlier: {msg})"))));
                continue;
            }
            let mut replies = Vec::with_capacity(g.cmds.len());
            for _ in &g.cmds {
                match recv_reply(self) {
                    Ok(v) => replies.push(v),
                    Err(e) => {
                        broken = Some(e.to_string());
                        break;
                    }
                }
            }
            match &broken {
                None => out.push(Ok(replies)),
                Some(msg) => out.push(Err(Error::Connection(msg.clone()))),
            }
        }
        out
    }
}
impl Connection for redis::Connection {}

impl sealed::RunSync for redis::cluster::ClusterConnection {
    fn coarse(&self) -> bool {
        true
    }

    fn run_groups(&mut self, groups: &[Group]) -> Vec<Replies> {
        let mut pipe = redis::cluster::ClusterPipeline::new();
        for g in groups {
            for c in &g.cmds {
                pipe.add_command(c.clone());
            }
        }
        match pipe.query::<Vec<Value>>(self) {
            Ok(values) => {
                let mut it = values.into_iter();
                groups.iter().map(|g| Ok(it.by_ref().take(g.cmds.len()).collect())).collect()
            }
            Err(e) => {
                // One error for the whole pipeline: which commands ran is unknown.
                let key = (groups.len() == 1).then(|| groups[0].key.as_slice());
                let err = Error::from_redis(key, e);
                groups.iter().map(|_| Err(err.dup())).collect()
            }
        }
    }
}
impl Connection for redis::cluster::ClusterConnection {}

#[cfg(feature = "tokio")]
mod aio_impls {
    use futures_util::future::{join_all, BoxFuture, FutureExt};
    use redis::aio::ConnectionLike;

    use super::{sealed, AsyncConnection, Group, Replies};
    use crate::error::Error;

    /// Sends each group as its own pipeline on a clone of `conn`, all at once.
    fn run_concurrently<C>(conn: &C, groups: Vec<Group>) -> BoxFuture<'static, Vec<Replies>>
    where
        C: ConnectionLike + Clone + Send + Sync + 'static,
    {
        let futs: Vec<_> = groups
            .into_iter()
            .map(|g| {
                let mut c = conn.clone();
                async move {
                    let mut pipe = redis::pipe();
                    for cmd in &g.cmds {
                        pipe.add_command(cmd.clone());
                    }
                    match c.req_packed_commands(&pipe, 0, g.cmds.len()).await {
                        Ok(v) if v.len() == g.cmds.len() => Ok(v),
                        Ok(v) => Err(Error::Protocol {
                            command: "pipeline".into(),
                            reply: format!("{} replies to {} commands", v.len(), g.cmds.len()),
                        }),
                        Err(e) => Err(Error::from_redis(Some(&g.key), e)),
                    }
                }
            })
            .collect();
        join_all(futs).boxed()
    }

    impl sealed::RunAsync for redis::aio::MultiplexedConnection {
        fn run_groups(&self, groups: Vec<Group>) -> BoxFuture<'static, Vec<Replies>> {
            run_concurrently(self, groups)
        }
    }
    impl AsyncConnection for redis::aio::MultiplexedConnection {}

    impl sealed::RunAsync for redis::aio::ConnectionManager {
        fn run_groups(&self, groups: Vec<Group>) -> BoxFuture<'static, Vec<Replies>> {
            run_concurrently(self, groups)
        }
    }
    impl AsyncConnection for redis::aio::ConnectionManager {}

    impl sealed::RunAsync for redis::cluster_async::ClusterConnection {
        fn run_groups(&self, groups: Vec<Group>) -> BoxFuture<'static, Vec<Replies>> {
            run_concurrently(self, groups)
        }
    }
    impl AsyncConnection for redis::cluster_async::ClusterConnection {}
}

/// What the operations run their requests on.
pub(crate) trait Exec: Send {
    /// Runs `groups`; one result per group, in order.
    fn run(&mut self, groups: Vec<Group>) -> impl Future<Output = Vec<Replies>> + Send;

    /// Whether scripts must be sent whole (`EVAL`), see [`sealed::RunSync::coarse`].
    fn eval_only(&self) -> bool {
        false
    }
}

/// A sync connection as an [`Exec`]: every request is complete when `run` returns.
pub(crate) struct SyncExec<'c, C: ?Sized>(pub &'c mut C);

impl<C: Connection + Send + ?Sized> Exec for SyncExec<'_, C> {
    fn run(&mut self, groups: Vec<Group>) -> impl Future<Output = Vec<Replies>> + Send {
        std::future::ready(self.0.run_groups(&groups))
    }

    fn eval_only(&self) -> bool {
        self.0.coarse()
    }
}

/// An async connection as an [`Exec`].
#[cfg(feature = "tokio")]
pub(crate) struct AsyncExec<'c, C>(pub &'c C);

#[cfg(feature = "tokio")]
impl<C: AsyncConnection> Exec for AsyncExec<'_, C> {
    fn run(&mut self, groups: Vec<Group>) -> impl Future<Output = Vec<Replies>> + Send {
        self.0.run_groups(groups)
    }
}

/// Drives a future whose every await is on a [`SyncExec`]: it is ready at the first poll. (If
/// it were not, polling again would only spin: nothing here waits on a timer or a socket.)
pub(crate) fn block_on_ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}
