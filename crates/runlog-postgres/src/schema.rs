//! The schema, in versioned migrations applied at connect time under an
//! advisory lock (several hosts may start at once), and the checks that
//! keep this code off a database that is not a callai run log.

use callai_engine::RunLogError;
use tokio_postgres::Client;

/// `MIGRATIONS[n]` takes the schema from version `n` to `n + 1`.
pub(crate) const MIGRATIONS: [&str; 10] = [
    "
    CREATE TABLE callai_runs (
        run_id      TEXT PRIMARY KEY,
        node_id     TEXT NOT NULL,
        status      TEXT NOT NULL,
        output      TEXT,
        fence       BIGINT NOT NULL,
        seed        BIGINT NOT NULL,
        clock_ms    BIGINT NOT NULL,
        spec        TEXT,
        durable     BOOLEAN NOT NULL DEFAULT false,
        owner       TEXT,
        lease_until TIMESTAMPTZ
    );
    CREATE INDEX callai_runs_leased ON callai_runs (lease_until)
        WHERE durable AND status = 'running';
    CREATE TABLE callai_calls (
        run_id     TEXT NOT NULL REFERENCES callai_runs (run_id) ON DELETE CASCADE,
        call_index BIGINT NOT NULL,
        node_id    TEXT NOT NULL,
        entry      TEXT NOT NULL,
        request    TEXT NOT NULL,
        outcome    TEXT NOT NULL,
        events     TEXT NOT NULL,
        PRIMARY KEY (run_id, call_index)
    );
    CREATE TABLE callai_events (
        run_id TEXT NOT NULL REFERENCES callai_runs (run_id) ON DELETE CASCADE,
        seq    BIGINT NOT NULL,
        event  TEXT NOT NULL,
        at_ms  BIGINT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE callai_packs (
        sha256 TEXT PRIMARY KEY,
        bytes  BYTEA NOT NULL
    );
",
    // Bounded growth: each call's schema stored once by its hash, what each
    // run recorded (runlog.maxRunBytes), and when each run ended (for
    // runlog.keepDays; a run that ended before this was kept counts as
    // ending now).
    "
    CREATE TABLE callai_response_schemas (
        sha256 TEXT PRIMARY KEY,
        text   TEXT NOT NULL
    );
    ALTER TABLE callai_calls ADD COLUMN schema_sha256 TEXT;
    CREATE INDEX callai_calls_schema ON callai_calls (schema_sha256)
        WHERE schema_sha256 IS NOT NULL;
    ALTER TABLE callai_runs ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE callai_runs ADD COLUMN ended_at TIMESTAMPTZ;
    UPDATE callai_runs SET ended_at = now() WHERE status <> 'running';
    CREATE INDEX callai_runs_ended ON callai_runs (ended_at) WHERE status <> 'running';
",
    // Tenants' budgets (each window's spend and what calls in flight hold)
    // and idempotency keys with the answers they repeat.
    "
    CREATE TABLE callai_budget_windows (
        tenant            TEXT NOT NULL,
        window_ms         BIGINT NOT NULL,
        spent_requests    BIGINT NOT NULL DEFAULT 0,
        spent_output      BIGINT NOT NULL DEFAULT 0,
        spent_input       BIGINT NOT NULL DEFAULT 0,
        reserved_requests BIGINT NOT NULL DEFAULT 0,
        reserved_output   BIGINT NOT NULL DEFAULT 0,
        reserved_input    BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (tenant, window_ms)
    );
    CREATE TABLE callai_budget_reservations (
        id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant     TEXT NOT NULL,
        window_ms  BIGINT NOT NULL,
        requests   BIGINT NOT NULL,
        output     BIGINT NOT NULL,
        input      BIGINT NOT NULL,
        owner      TEXT NOT NULL,
        expires_ms BIGINT NOT NULL
    );
    CREATE INDEX callai_budget_reservations_lapse
        ON callai_budget_reservations (tenant, expires_ms);
    CREATE TABLE callai_idempotency_keys (
        tenant         TEXT NOT NULL,
        key            TEXT NOT NULL,
        request_sha256 TEXT NOT NULL,
        state          TEXT NOT NULL,
        owner          TEXT NOT NULL,
        until_ms       BIGINT NOT NULL,
        keep_ms        BIGINT NOT NULL,
        status         INTEGER,
        headers        TEXT,
        body           BYTEA,
        PRIMARY KEY (tenant, key)
    );
    CREATE INDEX callai_idempotency_keys_until ON callai_idempotency_keys (until_ms);
",
    // Every run has an owner, the tenant whose token made it, and run ids
    // are unique per owner: a `tenant` column in the keys of the runs, calls
    // and events. A run recorded before has the tenant its spec names (what
    // `callai serve` kept of a tenant's run), else the admin; a spec that is
    // not JSON names none.
    "
    CREATE FUNCTION pg_temp.callai_spec_tenant(spec TEXT) RETURNS TEXT
        LANGUAGE plpgsql IMMUTABLE AS $$
        BEGIN
            RETURN spec::jsonb ->> 'tenant';
        EXCEPTION WHEN others THEN
            RETURN NULL;
        END $$;
    ALTER TABLE callai_runs ADD COLUMN tenant TEXT NOT NULL DEFAULT 'admin';
    UPDATE callai_runs SET tenant = COALESCE(pg_temp.callai_spec_tenant(spec), 'admin')
        WHERE spec IS NOT NULL;
    ALTER TABLE callai_calls ADD COLUMN tenant TEXT NOT NULL DEFAULT 'admin';
    ALTER TABLE callai_events ADD COLUMN tenant TEXT NOT NULL DEFAULT 'admin';
    UPDATE callai_calls c SET tenant = r.tenant FROM callai_runs r
        WHERE r.run_id = c.run_id AND r.tenant <> 'admin';
    UPDATE callai_events e SET tenant = r.tenant FROM callai_runs r
        WHERE r.run_id = e.run_id AND r.tenant <> 'admin';
    ALTER TABLE callai_calls DROP CONSTRAINT callai_calls_run_id_fkey;
    ALTER TABLE callai_events DROP CONSTRAINT callai_events_run_id_fkey;
    ALTER TABLE callai_calls DROP CONSTRAINT callai_calls_pkey;
    ALTER TABLE callai_events DROP CONSTRAINT callai_events_pkey;
    ALTER TABLE callai_runs DROP CONSTRAINT callai_runs_pkey;
    ALTER TABLE callai_runs ADD PRIMARY KEY (tenant, run_id);
    ALTER TABLE callai_calls ADD PRIMARY KEY (tenant, run_id, call_index),
        ADD FOREIGN KEY (tenant, run_id) REFERENCES callai_runs (tenant, run_id) ON DELETE CASCADE;
    ALTER TABLE callai_events ADD PRIMARY KEY (tenant, run_id, seq),
        ADD FOREIGN KEY (tenant, run_id) REFERENCES callai_runs (tenant, run_id) ON DELETE CASCADE;
    ALTER TABLE callai_runs ALTER COLUMN tenant DROP DEFAULT;
    ALTER TABLE callai_calls ALTER COLUMN tenant DROP DEFAULT;
    ALTER TABLE callai_events ALTER COLUMN tenant DROP DEFAULT;
",
    // Budget reservations say how many calls' worst cases they were granted
    // (more than one: a host's chunk, which may hold room no call holds
    // yet) and whether they lapsed (their host died or stalled: what they
    // hold is then charged, not released).
    "
    ALTER TABLE callai_budget_reservations ADD COLUMN calls BIGINT NOT NULL DEFAULT 1;
    ALTER TABLE callai_budget_reservations ADD COLUMN lapsed BOOLEAN NOT NULL DEFAULT false;
    CREATE INDEX callai_budget_reservations_window
        ON callai_budget_reservations (tenant, window_ms) WHERE calls > 1 AND NOT lapsed;
",
    // Call traces (`GET /v1/calls`): each call's trace, numbered in the
    // order kept, and the tags a listing filters on, keyed for a range
    // read of one tag from the newest down.
    "
    CREATE TABLE callai_call_traces (
        seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id         TEXT NOT NULL UNIQUE,
        tenant     TEXT NOT NULL,
        started_ms BIGINT NOT NULL,
        ended_ms   BIGINT NOT NULL,
        attempts   BIGINT NOT NULL,
        trace      TEXT NOT NULL
    );
    CREATE TABLE callai_call_trace_tags (
        tag TEXT NOT NULL,
        seq BIGINT NOT NULL,
        PRIMARY KEY (tag, seq)
    );
",
    // Budgets in money (`[tenants.NAME.budget] cost`), in billionths of
    // the budget's currency.
    "
    ALTER TABLE callai_budget_windows ADD COLUMN spent_cost BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE callai_budget_windows ADD COLUMN reserved_cost BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE callai_budget_reservations ADD COLUMN cost BIGINT NOT NULL DEFAULT 0;
",
    // The kept calls summed per minute (`GET /v1/usage`), added to as
    // their traces are written: calls and their cost by tenant and
    // currency ('' for calls with no price), requests by tenant, provider
    // and reason; keyed by minute first, for a range read of the last ones.
    "
    CREATE TABLE callai_usage_calls (
        minute_ms  BIGINT NOT NULL,
        tenant     TEXT NOT NULL,
        currency   TEXT NOT NULL,
        calls      BIGINT NOT NULL,
        cost       BIGINT NOT NULL,
        incomplete BOOLEAN NOT NULL,
        PRIMARY KEY (minute_ms, tenant, currency)
    );
    CREATE TABLE callai_usage_requests (
        minute_ms BIGINT NOT NULL,
        tenant    TEXT NOT NULL,
        provider  TEXT NOT NULL,
        reason    TEXT NOT NULL,
        count     BIGINT NOT NULL,
        PRIMARY KEY (minute_ms, tenant, provider, reason)
    );
",
    // Responses kept because their caller asked (the Responses API's
    // `store`), each its tenant's.
    "
    CREATE TABLE callai_stored_responses (
        tenant       TEXT NOT NULL,
        id           TEXT NOT NULL,
        created_ms   BIGINT NOT NULL,
        conversation TEXT NOT NULL,
        input_items  TEXT NOT NULL,
        response     TEXT NOT NULL,
        PRIMARY KEY (tenant, id)
    );
    CREATE INDEX callai_stored_responses_created ON callai_stored_responses (created_ms);
",
    // API keys made while the host runs (`POST /v1/keys`), their audit
    // list, and the generation every change moves on (its row lock orders
    // the changes) with the pepper of their hashes.
    "
    CREATE TABLE callai_api_keys (
        id           TEXT PRIMARY KEY,
        tenant       TEXT NOT NULL,
        name         TEXT NOT NULL,
        hash         TEXT NOT NULL UNIQUE,
        hint         TEXT NOT NULL,
        settings     TEXT NOT NULL,
        expires_ms   BIGINT,
        created_ms   BIGINT NOT NULL,
        revoked_ms   BIGINT,
        last_used_ms BIGINT
    );
    CREATE TABLE callai_api_key_events (
        seq    BIGSERIAL PRIMARY KEY,
        key_id TEXT NOT NULL,
        at_ms  BIGINT NOT NULL,
        actor  TEXT NOT NULL,
        action TEXT NOT NULL,
        detail TEXT NOT NULL
    );
    CREATE INDEX callai_api_key_events_key ON callai_api_key_events (key_id, seq);
    CREATE TABLE callai_api_key_state (
        one        INTEGER PRIMARY KEY CHECK (one = 1),
        generation BIGINT NOT NULL,
        pepper     BYTEA NOT NULL
    );
",
];

/// The version this build writes.
pub(crate) const VERSION: i64 = MIGRATIONS.len() as i64;

/// The advisory lock migrations hold ("CAl0").
const LOCK: i64 = 0x4341_6c30;

/// Brings the database to [`VERSION`], or says why it will not: a newer
/// schema, or `callai_` tables without the version table (someone else's).
pub(crate) async fn migrate(client: &mut Client, shown: &str) -> Result<(), RunLogError> {
    let storage = |e: tokio_postgres::Error| {
        RunLogError::Storage(format!("{shown}: {}", crate::store::said(&e)))
    };
    let tx = client.transaction().await.map_err(storage)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK])
        .await
        .map_err(storage)?;
    let has = |name: &'static str| {
        let tx = &tx;
        async move {
            tx.query_one("SELECT to_regclass($1) IS NOT NULL", &[&name])
                .await
                .map(|row| row.get::<_, bool>(0))
        }
    };
    let version: i64 = if has("callai_schema").await.map_err(storage)? {
        let row = tx
            .query_opt("SELECT version FROM callai_schema", &[])
            .await
            .map_err(storage)?;
        match row {
            Some(row) => row.get(0),
            None => {
                return Err(RunLogError::Corrupt {
                    path: shown.into(),
                    reason: "callai_schema holds no version".into(),
                });
            }
        }
    } else if has("callai_runs").await.map_err(storage)? {
        return Err(RunLogError::Foreign {
            path: shown.into(),
            reason: "it has a callai_runs table but no callai_schema: not a callai run log".into(),
        });
    } else {
        tx.batch_execute("CREATE TABLE callai_schema (version BIGINT NOT NULL); INSERT INTO callai_schema VALUES (0);")
            .await
            .map_err(storage)?;
        0
    };
    if version > VERSION {
        return Err(RunLogError::Newer {
            path: shown.into(),
            found: version,
            known: VERSION,
        });
    }
    for (n, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.batch_execute(sql).await.map_err(storage)?;
        tx.execute("UPDATE callai_schema SET version = $1", &[&(n as i64 + 1)])
            .await
            .map_err(storage)?;
    }
    tx.commit().await.map_err(storage)
}
