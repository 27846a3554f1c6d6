//! The run log's connections: a bounded deadpool pool, each connection
//! handed out to one transaction at a time. A write that finds every
//! connection busy waits for one, up to [`WAIT`], then fails naming the
//! pool (never an unbounded pile of connections to the server).

use deadpool_postgres::{Manager, ManagerConfig, Object, RecyclingMethod, Runtime};
use std::ops::{Deref, DerefMut};
use std::time::Duration;
use tokio_postgres::{Client, Config, NoTls};

/// The most connections one run log holds to its database.
pub(crate) const MAX_CONNECTIONS: usize = 16;
/// How long a write waits for a free connection, or to connect.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// The connections of one run log.
pub(crate) type Pool = deadpool_postgres::Pool;

/// A pool of at most [`MAX_CONNECTIONS`] to the database of `config`.
pub(crate) fn new(config: Config) -> Pool {
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            // A connection that was closed under us is noticed by the next
            // query, which reports it; no test query before every use.
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(MAX_CONNECTIONS)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(WAIT))
        .create_timeout(Some(WAIT))
        .build()
        .expect("a pool with a runtime for its timeouts")
}

/// A connection out of the pool, seen as the client it is; back in the
/// pool when dropped.
pub(crate) struct Conn(pub(crate) Object);

impl Deref for Conn {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.0
    }
}

impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.0
    }
}
