//! A few connections, kept open and handed out one at a time: a
//! transaction needs a connection of its own.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use tokio_postgres::{Client, Config, NoTls};

/// The connections of one run log.
#[derive(Debug)]
pub(crate) struct Pool {
    config: Config,
    idle: Mutex<Vec<Client>>,
    max_idle: usize,
}

/// A connection out of the pool; back in when dropped, unless it closed.
pub(crate) struct Conn {
    client: Option<Client>,
    pool: Arc<Pool>,
}

impl Pool {
    pub(crate) fn new(config: Config, max_idle: usize) -> Arc<Self> {
        Arc::new(Self {
            config,
            idle: Mutex::new(Vec::new()),
            max_idle,
        })
    }

    /// An idle connection, or a new one.
    pub(crate) async fn get(self: &Arc<Self>) -> Result<Conn, tokio_postgres::Error> {
        let idle = self.idle.lock().expect("pool").pop();
        let client = match idle {
            Some(c) if !c.is_closed() => c,
            _ => {
                let (client, connection) = self.config.connect(NoTls).await?;
                tokio::spawn(async move {
                    // Ends when the client is dropped or the server goes away;
                    // the next use of the client reports the error.
                    let _ = connection.await;
                });
                client
            }
        };
        Ok(Conn {
            client: Some(client),
            pool: self.clone(),
        })
    }
}

impl Deref for Conn {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("held until dropped")
    }
}

impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("held until dropped")
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && !client.is_closed()
        {
            let mut idle = self.pool.idle.lock().expect("pool");
            if idle.len() < self.pool.max_idle {
                idle.push(client);
            }
        }
    }
}
