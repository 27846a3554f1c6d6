//! The SQLite run log's schema: each version's migration, in order.

/// The migrations, in order: `MIGRATIONS[n]` takes schema version `n` to
/// `n + 1`. The version a file is at is its `PRAGMA user_version`.
pub(crate) const MIGRATIONS: [&str; 14] = [
    "CREATE TABLE runs (
        run_id   TEXT PRIMARY KEY,
        node_id  TEXT NOT NULL,
        status   TEXT NOT NULL,
        output   TEXT
    );
    CREATE TABLE calls (
        run_id     TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        node_id    TEXT NOT NULL,
        call_index INTEGER NOT NULL,
        entry      TEXT NOT NULL,
        request    TEXT NOT NULL,
        outcome    TEXT NOT NULL,
        events     TEXT NOT NULL,
        PRIMARY KEY (run_id, node_id, call_index)
    );
    CREATE TABLE events (
        run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        seq    INTEGER NOT NULL,
        event  TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );",
    // The fence of the recorder that owns each run.
    "ALTER TABLE runs ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;",
    // The seed and clock of each run's sandbox.
    "ALTER TABLE runs ADD COLUMN seed INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE runs ADD COLUMN clock_ms INTEGER NOT NULL DEFAULT 0;",
    // When each event was committed, in ms since the Unix epoch (0: before
    // this was kept).
    "ALTER TABLE events ADD COLUMN at_ms INTEGER NOT NULL DEFAULT 0;",
    // Durable runs: what each run was started with, its lease, and the
    // components of the packs they run.
    "ALTER TABLE runs ADD COLUMN spec TEXT;
     ALTER TABLE runs ADD COLUMN durable INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE runs ADD COLUMN owner TEXT;
     ALTER TABLE runs ADD COLUMN lease_until_ms INTEGER NOT NULL DEFAULT 0;
     CREATE TABLE packs (
         sha256 TEXT PRIMARY KEY,
         bytes  BLOB NOT NULL
     );",
    // Bounded growth: each call's schema stored once by its hash, what each
    // run recorded (runlog.maxRunBytes), and when each run ended (for
    // runlog.keepDays; a run that ended before this was kept counts as
    // ending now).
    "CREATE TABLE schemas (
         sha256 TEXT PRIMARY KEY,
         text   TEXT NOT NULL
     );
     ALTER TABLE calls ADD COLUMN schema_sha256 TEXT;
     CREATE INDEX calls_schema ON calls (schema_sha256) WHERE schema_sha256 IS NOT NULL;
     ALTER TABLE runs ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE runs ADD COLUMN ended_ms INTEGER NOT NULL DEFAULT 0;
     UPDATE runs SET ended_ms = CAST(strftime('%s', 'now') AS INTEGER) * 1000
         WHERE status <> 'running';
     CREATE INDEX runs_ended ON runs (ended_ms) WHERE status <> 'running';",
    // Tenants' budgets (each window's spend and what calls in flight hold)
    // and idempotency keys with the answers they repeat.
    "CREATE TABLE budget_windows (
         tenant            TEXT NOT NULL,
         window_ms         INTEGER NOT NULL,
         spent_requests    INTEGER NOT NULL DEFAULT 0,
         spent_output      INTEGER NOT NULL DEFAULT 0,
         spent_input       INTEGER NOT NULL DEFAULT 0,
         reserved_requests INTEGER NOT NULL DEFAULT 0,
         reserved_output   INTEGER NOT NULL DEFAULT 0,
         reserved_input    INTEGER NOT NULL DEFAULT 0,
         PRIMARY KEY (tenant, window_ms)
     );
     CREATE TABLE budget_reservations (
         id         INTEGER PRIMARY KEY AUTOINCREMENT,
         tenant     TEXT NOT NULL,
         window_ms  INTEGER NOT NULL,
         requests   INTEGER NOT NULL,
         output     INTEGER NOT NULL,
         input      INTEGER NOT NULL,
         owner      TEXT NOT NULL,
         expires_ms INTEGER NOT NULL
     );
     CREATE INDEX budget_reservations_lapse ON budget_reservations (tenant, expires_ms);
     CREATE TABLE idempotency_keys (
         tenant         TEXT NOT NULL,
         key            TEXT NOT NULL,
         request_sha256 TEXT NOT NULL,
         state          TEXT NOT NULL,
         owner          TEXT NOT NULL,
         until_ms       INTEGER NOT NULL,
         keep_ms        INTEGER NOT NULL,
         status         INTEGER,
         headers        TEXT,
         body           BLOB,
         PRIMARY KEY (tenant, key)
     );
     CREATE INDEX idempotency_keys_until ON idempotency_keys (until_ms);",
    // Every run has an owner, the tenant whose token made it, and run ids
    // are unique per owner: the runs, calls and events tables are rebuilt
    // with a `tenant` column in their keys (SQLite cannot change a primary
    // key in place). A run recorded before has the tenant its spec names
    // (what `callai serve` kept of a tenant's run), else the admin.
    "CREATE TABLE new_runs (
         tenant         TEXT NOT NULL,
         run_id         TEXT NOT NULL,
         node_id        TEXT NOT NULL,
         status         TEXT NOT NULL,
         output         TEXT,
         fence          INTEGER NOT NULL DEFAULT 0,
         seed           INTEGER NOT NULL DEFAULT 0,
         clock_ms       INTEGER NOT NULL DEFAULT 0,
         spec           TEXT,
         durable        INTEGER NOT NULL DEFAULT 0,
         owner          TEXT,
         lease_until_ms INTEGER NOT NULL DEFAULT 0,
         bytes          INTEGER NOT NULL DEFAULT 0,
         ended_ms       INTEGER NOT NULL DEFAULT 0,
         PRIMARY KEY (tenant, run_id)
     );
     INSERT INTO new_runs
         SELECT CASE WHEN json_valid(spec) AND json_type(spec, '$.tenant') = 'text'
                     THEN json_extract(spec, '$.tenant') ELSE 'admin' END,
                run_id, node_id, status, output, fence, seed, clock_ms, spec, durable, owner,
                lease_until_ms, bytes, ended_ms
         FROM runs;
     CREATE TABLE new_calls (
         tenant        TEXT NOT NULL,
         run_id        TEXT NOT NULL,
         node_id       TEXT NOT NULL,
         call_index    INTEGER NOT NULL,
         entry         TEXT NOT NULL,
         request       TEXT NOT NULL,
         outcome       TEXT NOT NULL,
         events        TEXT NOT NULL,
         schema_sha256 TEXT,
         PRIMARY KEY (tenant, run_id, node_id, call_index),
         FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, run_id) ON DELETE CASCADE
     );
     INSERT INTO new_calls
         SELECT r.tenant, c.run_id, c.node_id, c.call_index, c.entry, c.request, c.outcome,
                c.events, c.schema_sha256
         FROM calls c JOIN new_runs r ON r.run_id = c.run_id;
     CREATE TABLE new_events (
         tenant TEXT NOT NULL,
         run_id TEXT NOT NULL,
         seq    INTEGER NOT NULL,
         event  TEXT NOT NULL,
         at_ms  INTEGER NOT NULL DEFAULT 0,
         PRIMARY KEY (tenant, run_id, seq),
         FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, run_id) ON DELETE CASCADE
     );
     INSERT INTO new_events
         SELECT r.tenant, e.run_id, e.seq, e.event, e.at_ms
         FROM events e JOIN new_runs r ON r.run_id = e.run_id;
     DROP TABLE calls;
     DROP TABLE events;
     DROP TABLE runs;
     ALTER TABLE new_runs RENAME TO runs;
     ALTER TABLE new_calls RENAME TO calls;
     ALTER TABLE new_events RENAME TO events;
     CREATE INDEX calls_schema ON calls (schema_sha256) WHERE schema_sha256 IS NOT NULL;
     CREATE INDEX runs_ended ON runs (ended_ms) WHERE status <> 'running';
     CREATE INDEX runs_leased ON runs (lease_until_ms) WHERE durable = 1 AND status = 'running';",
    // Budget reservations say how many calls' worst cases they were granted
    // (more than one: a host's chunk, which may hold room no call holds
    // yet) and whether they lapsed (their host died or stalled: what they
    // hold is then charged, not released).
    "ALTER TABLE budget_reservations ADD COLUMN calls INTEGER NOT NULL DEFAULT 1;
     ALTER TABLE budget_reservations ADD COLUMN lapsed INTEGER NOT NULL DEFAULT 0;
     CREATE INDEX budget_reservations_window ON budget_reservations (tenant, window_ms)
         WHERE calls > 1 AND lapsed = 0;",
    // Call traces (`GET /v1/calls`): each call's trace, numbered in the
    // order kept, and the tags a listing filters on, keyed for a range
    // read of one tag from the newest down.
    "CREATE TABLE call_traces (
         seq        INTEGER PRIMARY KEY,
         id         TEXT NOT NULL UNIQUE,
         tenant     TEXT NOT NULL,
         started_ms INTEGER NOT NULL,
         ended_ms   INTEGER NOT NULL,
         attempts   INTEGER NOT NULL,
         trace      TEXT NOT NULL
     );
     CREATE TABLE call_trace_tags (
         tag TEXT NOT NULL,
         seq INTEGER NOT NULL,
         PRIMARY KEY (tag, seq)
     ) WITHOUT ROWID;",
    // Budgets in money (`[tenants.NAME.budget] cost`), in billionths of
    // the budget's currency.
    "ALTER TABLE budget_windows ADD COLUMN spent_cost INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE budget_windows ADD COLUMN reserved_cost INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE budget_reservations ADD COLUMN cost INTEGER NOT NULL DEFAULT 0;",
    // The kept calls summed per minute (`GET /v1/usage`), added to as
    // their traces are written: calls and their cost by tenant and
    // currency ('' for calls with no price), requests by tenant, provider
    // and reason; keyed by minute first, for a range read of the last ones.
    "CREATE TABLE usage_calls (
         minute_ms  INTEGER NOT NULL,
         tenant     TEXT NOT NULL,
         currency   TEXT NOT NULL,
         calls      INTEGER NOT NULL,
         cost       INTEGER NOT NULL,
         incomplete INTEGER NOT NULL,
         PRIMARY KEY (minute_ms, tenant, currency)
     ) WITHOUT ROWID;
     CREATE TABLE usage_requests (
         minute_ms INTEGER NOT NULL,
         tenant    TEXT NOT NULL,
         provider  TEXT NOT NULL,
         reason    TEXT NOT NULL,
         count     INTEGER NOT NULL,
         PRIMARY KEY (minute_ms, tenant, provider, reason)
     ) WITHOUT ROWID;",
    // Responses kept because their caller asked (the Responses API's
    // `store`), each its tenant's.
    "CREATE TABLE stored_responses (
         tenant       TEXT NOT NULL,
         id           TEXT NOT NULL,
         created_ms   INTEGER NOT NULL,
         conversation TEXT NOT NULL,
         input_items  TEXT NOT NULL,
         response     TEXT NOT NULL,
         PRIMARY KEY (tenant, id)
     );
     CREATE INDEX stored_responses_created ON stored_responses (created_ms);",
    // API keys made while the host runs (`POST /v1/keys`), their audit
    // list, and the generation every change moves on with the pepper of
    // their hashes.
    "CREATE TABLE api_keys (
         id           TEXT PRIMARY KEY,
         tenant       TEXT NOT NULL,
         name         TEXT NOT NULL,
         hash         TEXT NOT NULL UNIQUE,
         hint         TEXT NOT NULL,
         settings     TEXT NOT NULL,
         expires_ms   INTEGER,
         created_ms   INTEGER NOT NULL,
         revoked_ms   INTEGER,
         last_used_ms INTEGER
     );
     CREATE TABLE api_key_events (
         seq    INTEGER PRIMARY KEY AUTOINCREMENT,
         key_id TEXT NOT NULL,
         at_ms  INTEGER NOT NULL,
         actor  TEXT NOT NULL,
         action TEXT NOT NULL,
         detail TEXT NOT NULL
     );
     CREATE INDEX api_key_events_key ON api_key_events (key_id, seq);
     CREATE TABLE api_key_state (
         one        INTEGER PRIMARY KEY CHECK (one = 1),
         generation INTEGER NOT NULL,
         pepper     BLOB NOT NULL
     );",
];

/// The version this build writes.
pub(crate) const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;
