//! A throwaway PostgreSQL cluster for tests: `initdb` into a temporary
//! folder, a server on a free loopback port, a fresh database per test,
//! stopped when the last test holding it is done.
//!
//! `initdb` refuses to run as root: as root, the cluster runs as the
//! `postgres` user (`runuser`). When PostgreSQL is not installed a test
//! says so loudly and does nothing, unless `CI` is set: then it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// A running cluster.
#[derive(Debug)]
pub struct PgCluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    as_postgres: bool,
    next_db: AtomicU32,
}

/// Where the server binaries are: `$CALLAI_PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin`, else `pg_config --bindir`.
fn find_bin() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CALLAI_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    versions.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok())
            .unwrap_or(0)
    });
    if let Some(best) = versions.pop() {
        return Some(best);
    }
    let out = Command::new("pg_config").arg("--bindir").output().ok()?;
    let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    dir.join("initdb").exists().then_some(dir)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl PgCluster {
    /// The cluster the running tests share, started if none is running;
    /// `None` (said loudly) when PostgreSQL is not installed outside CI.
    pub fn shared() -> Option<Arc<Self>> {
        static SHARED: Mutex<Weak<PgCluster>> = Mutex::new(Weak::new());
        let mut shared = SHARED.lock().unwrap();
        if let Some(c) = shared.upgrade() {
            return Some(c);
        }
        let cluster = Arc::new(Self::start()?);
        *shared = Arc::downgrade(&cluster);
        Some(cluster)
    }

    /// Starts a cluster of its own.
    pub fn start() -> Option<Self> {
        let Some(bin) = find_bin() else {
            let message = "PostgreSQL was not found (no /usr/lib/postgresql/*/bin, no pg_config, \
                           no CALLAI_PG_BIN): this PostgreSQL test did not run";
            assert!(
                std::env::var_os("CI").is_none(),
                "{message}; under CI it must"
            );
            eprintln!("\n*** SKIPPED: {message} ***\n");
            return None;
        };
        let as_postgres = is_root();
        let dir = tempfile::Builder::new()
            .prefix("callai-pg-")
            .tempdir()
            .unwrap();
        if as_postgres {
            let ok = Command::new("chown")
                .args(["postgres:", dir.path().to_str().unwrap()])
                .status()
                .unwrap();
            assert!(
                ok.success(),
                "cannot give {} to postgres",
                dir.path().display()
            );
        }
        let mut cluster = Self {
            bin,
            dir,
            port: 0,
            as_postgres,
            next_db: AtomicU32::new(0),
        };
        let data = cluster.data();
        cluster.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        // A port can be taken between our probe and the server's bind: retry.
        for attempt in 0..5 {
            cluster.port = free_port();
            let options = format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
                cluster.port,
                cluster.dir.path().display()
            );
            let log = cluster.dir.path().join("server.log");
            let started = cluster.try_run(
                "pg_ctl",
                &[
                    "-D",
                    &data,
                    "-l",
                    log.to_str().unwrap(),
                    "-o",
                    &options,
                    "-w",
                    "start",
                ],
            );
            if started {
                return Some(cluster);
            }
            eprintln!(
                "pg_ctl start failed (attempt {attempt}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        panic!("PostgreSQL did not start");
    }

    fn data(&self) -> String {
        self.dir.path().join("data").to_str().unwrap().to_owned()
    }

    fn command(&self, tool: &str, args: &[&str]) -> Command {
        let path = self.bin.join(tool);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        };
        cmd.args(args).stdin(Stdio::null());
        cmd
    }

    fn try_run(&self, tool: &str, args: &[&str]) -> bool {
        let out = self.command(tool, args).output().unwrap();
        if !out.status.success() {
            eprintln!("{tool}: {}", String::from_utf8_lossy(&out.stderr));
        }
        out.status.success()
    }

    fn run(&self, tool: &str, args: &[&str]) {
        assert!(self.try_run(tool, args), "{tool} failed");
    }

    /// The folder holding the cluster.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The URL of database `db`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// A new, empty database; its URL.
    pub fn database(&self) -> String {
        let n = self.next_db.fetch_add(1, Ordering::Relaxed);
        let name = format!("t{}_{n}", std::process::id());
        self.run(
            "psql",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-q",
                "-c",
                &format!("CREATE DATABASE {name}"),
            ],
        );
        self.url(&name)
    }

    /// Runs `sql` in the database of `url` with psql.
    pub fn psql(&self, url: &str, sql: &str) -> String {
        let out = self
            .command("psql", &[url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let data = self.data();
        self.try_run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
    }
}
