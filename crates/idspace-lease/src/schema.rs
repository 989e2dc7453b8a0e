//! The crate's tables and functions in PostgreSQL, created and migrated on connect.
//!
//! Every migration runs in one transaction under an advisory lock, so that nodes starting
//! together apply each one exactly once; `idspace_schema` records the version reached.
//!
//! Version 2 adds parked ranges: the unused tails of a monotonic node's leases, recorded at a
//! graceful stop under the node's identity and leased to that identity first when it asks
//! again, so that a restart discards nothing but the few IDs its CPUs had carved.

/// The advisory lock key that serialises migrations ("idsp" in ASCII).
pub(crate) const MIGRATION_LOCK: i64 = 0x6964_7370;

/// Custom SQLSTATE raised when a space does not exist.
pub(crate) const UNKNOWN_SPACE: &str = "IDS01";
/// Custom SQLSTATE raised when a space has no ID left to lease.
pub(crate) const EXHAUSTED: &str = "IDS02";

/// The migrations, in order; version `n` is `MIGRATIONS[n - 1]`.
pub(crate) const MIGRATIONS: &[&str] = &[V1, V2];

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

/// Version 2: parked ranges, leased first to the node that parked them, and the park function.
const V2: &str = r#"
-- Unused tails of monotonic leases, parked by a node at a graceful stop for its next start.
CREATE TABLE idspace_parked (
    seq bigserial PRIMARY KEY,
    space text NOT NULL REFERENCES idspace_space (name) ON DELETE CASCADE,
    node text NOT NULL,
    first_id bigint NOT NULL,
    last_id bigint NOT NULL,
    CHECK (first_id <= last_id)
);
CREATE INDEX idspace_parked_node ON idspace_parked (space, node, seq);

-- As version 1, except that the caller's parked ranges are leased before anything else.
CREATE OR REPLACE FUNCTION idspace_lease(p_space text, p_node text, p_step bigint, p_ttl_ms bigint,
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
    -- The caller's own parked tails first (monotonic spaces park nothing else).
    DELETE FROM idspace_parked r
    WHERE r.seq = (SELECT o.seq FROM idspace_parked o WHERE o.space = p_space
                   AND o.node = p_node ORDER BY o.seq LIMIT 1)
    RETURNING r.first_id, r.last_id INTO f, l;
    IF f IS NULL AND s.cyclic THEN
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

-- A graceful stop of a monotonic node: the tails [first, last_id] of the leases named by
-- (id, epoch, first) are parked for `p_node`, if the leases are still its own; then every
-- lease row of the node in the space is dropped. Returns the IDs parked.
CREATE FUNCTION idspace_park(p_space text, p_node text, p_ids bigint[], p_epochs bigint[],
                             p_firsts bigint[])
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    parked bigint;
BEGIN
    PERFORM 1 FROM idspace_space WHERE name = p_space AND NOT cyclic FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    WITH tails AS (
        INSERT INTO idspace_parked (space, node, first_id, last_id)
        SELECT p_space, p_node, greatest(h.first, l.first_id), l.last_id
        FROM unnest(p_ids, p_epochs, p_firsts) AS h(id, epoch, first)
        JOIN idspace_lease l ON l.id = h.id AND l.epoch = h.epoch
        WHERE l.space = p_space AND l.node = p_node AND h.first <= l.last_id
        ORDER BY l.first_id
        RETURNING last_id - first_id + 1 AS n
    )
    SELECT coalesce(sum(n), 0) INTO parked FROM tails;
    DELETE FROM idspace_lease WHERE space = p_space AND node = p_node;
    RETURN parked;
END $$;
"#;
