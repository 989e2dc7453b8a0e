//! The crate's tables and functions in PostgreSQL, created and migrated on connect.
//!
//! Every migration runs in one transaction under an advisory lock, so that nodes starting
//! together apply each one exactly once; `idspace_schema` records the version reached.

/// The advisory lock key that serialises migrations ("idsp" in ASCII).
pub(crate) const MIGRATION_LOCK: i64 = 0x6964_7370;

/// Custom SQLSTATE raised when a space does not exist.
pub(crate) const UNKNOWN_SPACE: &str = "IDS01";
/// Custom SQLSTATE raised when a space has no ID left to lease.
pub(crate) const EXHAUSTED: &str = "IDS02";

/// The migrations, in order; version `n` is `MIGRATIONS[n - 1]`.
pub(crate) const MIGRATIONS: &[&str] = &[V1];

/// Version 1: spaces, leases, returned ranges, and the lease function.
const V1: &str = r#"
CREATE TABLE idspace_space (
    name text PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 200),
    min_id bigint NOT NULL CHECK (min_id >= 0),
    max_id bigint NOT NULL,
    cyclic boolean NOT NULL,
    -- The last ID ever leased: fresh leases start after it.
    leased_through bigint NOT NULL,
    -- Bumped by every grant or takeover; a lease's epoch is the value at its grant.
    epoch bigint NOT NULL DEFAULT 0,
    CHECK (min_id <= max_id)
);

CREATE TABLE idspace_lease (
    id bigserial PRIMARY KEY,
    space text NOT NULL REFERENCES idspace_space (name) ON DELETE CASCADE,
    node text NOT NULL,
    epoch bigint NOT NULL,
    first_id bigint NOT NULL,
    last_id bigint NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX idspace_lease_expiry ON idspace_lease (space, expires_at);

-- Ranges of cyclic spaces whose every ID was freed, leased again oldest first.
CREATE TABLE idspace_returned (
    seq bigserial PRIMARY KEY,
    space text NOT NULL REFERENCES idspace_space (name) ON DELETE CASCADE,
    first_id bigint NOT NULL,
    last_id bigint NOT NULL,
    returned_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idspace_returned_order ON idspace_returned (space, seq);

-- One lease in one statement (one transaction, one round trip): a returned range (cyclic),
-- else a fresh one, else (cyclic) the oldest expired lease, taken over. `p_retire` names the
-- caller's previous lease of a monotonic space, used up: its row is dropped.
CREATE FUNCTION idspace_lease(p_space text, p_node text, p_step bigint, p_ttl_ms bigint,
                              p_retire bigint)
RETURNS TABLE (o_lease bigint, o_epoch bigint, o_first bigint, o_last bigint)
LANGUAGE plpgsql AS $$
DECLARE
    s idspace_space%ROWTYPE;
    f bigint;
    l bigint;
    e bigint;
    lid bigint;
    expiry timestamptz := now() + p_ttl_ms * interval '1 millisecond';
BEGIN
    SELECT * INTO s FROM idspace_space WHERE name = p_space FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown space %', p_space USING ERRCODE = 'IDS01';
    END IF;
    IF p_retire IS NOT NULL AND NOT s.cyclic THEN
        DELETE FROM idspace_lease WHERE id = p_retire AND node = p_node;
    END IF;
    e := s.epoch + 1;
    IF s.cyclic THEN
        DELETE FROM idspace_returned r
        WHERE r.seq = (SELECT o.seq FROM idspace_returned o WHERE o.space = p_space
                       ORDER BY o.seq LIMIT 1)
        RETURNING r.first_id, r.last_id INTO f, l;
    END IF;
    IF f IS NULL AND s.leased_through < s.max_id THEN
        f := s.leased_through + 1;
        l := f + least(p_step - 1, s.max_id - f);
        UPDATE idspace_space SET leased_through = l WHERE name = p_space;
    END IF;
    IF f IS NULL AND s.cyclic THEN
        UPDATE idspace_lease x SET node = p_node, epoch = e, granted_at = now(),
                                   expires_at = expiry
        WHERE x.id = (SELECT o.id FROM idspace_lease o
                      WHERE o.space = p_space AND o.expires_at < now()
                      ORDER BY o.expires_at LIMIT 1)
          -- Checked again on the row itself: a renewal that won the row lock first wins.
          AND x.expires_at < now()
        RETURNING x.id, x.first_id, x.last_id INTO lid, f, l;
        IF lid IS NOT NULL THEN
            UPDATE idspace_space SET epoch = e WHERE name = p_space;
            RETURN QUERY SELECT lid, e, f, l;
            RETURN;
        END IF;
    END IF;
    IF f IS NULL THEN
        RAISE EXCEPTION 'space % exhausted', p_space USING ERRCODE = 'IDS02';
    END IF;
    UPDATE idspace_space SET epoch = e WHERE name = p_space;
    INSERT INTO idspace_lease (space, node, epoch, first_id, last_id, expires_at)
    VALUES (p_space, p_node, e, f, l, expiry) RETURNING id INTO lid;
    RETURN QUERY SELECT lid, e, f, l;
END $$;

-- A cyclic lease whose every ID was freed goes back, if the caller still holds it.
CREATE FUNCTION idspace_return(p_lease bigint, p_epoch bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    r idspace_lease%ROWTYPE;
BEGIN
    DELETE FROM idspace_lease WHERE id = p_lease AND epoch = p_epoch RETURNING * INTO r;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO idspace_returned (space, first_id, last_id) VALUES (r.space, r.first_id, r.last_id);
    RETURN true;
END $$;
"#;
