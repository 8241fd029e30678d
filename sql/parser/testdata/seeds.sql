-- Every SQL statement of /work/shared/seeds/, as users will type it.
-- seeds_test.go parses the whole file and checks each rewritten statement
-- with CheckDeparse. Left out, because they are not SQL: the psql
-- meta-command \COPY (its server-side COPY is here instead), the RFC's
-- "..." placeholders, and "ALTER TABLE <table> ADD INDEX" (prose).

-- hash-sharded-indexes.txt

CREATE TABLE events (
    device_id
        UUID,
    event_id
        UUID,
    ts
        TIMESTAMP,
    data
        JSONB,
    PRIMARY KEY (device_id, ts, event_id),
    INDEX (ts)
);

CREATE TABLE events (
    device_id
        UUID,
    shard
        INT8
        AS (fnv32(device_id) % 8) STORED
        CHECK (shard IN (0, 1, 2, 3, 4, 5, 6, 7)),
    event_id
        UUID,
    ts
        TIMESTAMP,
    data
        JSONB,
    PRIMARY KEY (device_id, ts, event_id),
    INDEX (shard, ts)
);

CREATE TABLE events (
    product_id
        INT8,
    owner
        UUID,
    serial_number
        VARCHAR,
    event_id
        UUID,
    ts
        TIMESTAMP,
    data
        JSONB,
    PRIMARY KEY (product_id, owner, serial_number, ts, event_id),
    INDEX (ts)
);

CREATE TABLE events (
    product_id
        INT8,
    owner
        UUID,
    serial_number
        VARCHAR,
    shard
        INT8
        AS (
            fnv32(
                concat(hex(product_id)),
                owner::STRING,
                serial_number
            )
            % 8
        ) STORED
        CHECK (shard IN (0, 1, 2, 3, 4, 5, 6, 7)),
    event_id
        UUID,
    ts
        TIMESTAMP,
    data
        JSONB,
    PRIMARY KEY (
        product_id,
        owner,
        serial_number,
        ts,
        event_id
    ),
    INDEX (shard, ts)
);

CREATE TABLE events (
    product_id
        INT8,
    owner
        UUID,
    serial_number
        VARCHAR,
    event_id
        UUID,
    ts 
        TIMESTAMP,
    data
        JSONB,
    -- Creates a primary index on (shard, product_id, owner, serial_number)
    -- with a check constraint for `shard in (0...7)`
    PRIMARY KEY (product_id, owner, serial_number) USING HASH WITH BUCKET_COUNT=8
);

-- The seed elides the other columns with "..."; product_id stands in.
CREATE TABLE events (
    ts 
        DECIMAL PRIMARY KEY USING HASH WITH BUCKET_COUNT=8,
    product_id
        INT8
);

CREATE TABLE events (
    product_id
        INT8,
    owner
        UUID,
    serial_number
        VARCHAR,
    event_id
        UUID,
    ts
        TIMESTAMP,
    data
        JSONB,
    PRIMARY KEY (product_id, owner, serial_number, ts, event_id),
    -- Creates a secondary index on (shard, ts)
    -- with a check constraint for `shard in (0...7)`
    INDEX (ts) USING HASH WITH BUCKET_COUNT=8
);

-- "CREATE [UNIQUE] INDEX foo on events (ts) USING HASH WITH BUCKET_COUNT=8"
CREATE INDEX foo on events (ts) USING HASH WITH BUCKET_COUNT=8;
CREATE UNIQUE INDEX foo on events (ts) USING HASH WITH BUCKET_COUNT=8;

CREATE TABLE kv (
    k INT8 NOT NULL,
    v bytes NOT NULL,
    shard 
        INT8 AS (k % 10) STORED
        CHECK (shard IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)), 
    PRIMARY KEY (shard, k)
);

CREATE TABLE kv (
    k INT8 NOT NULL,
    v BYTES NOT NULL,
    PRIMARY KEY (k)
);

CREATE TABLE kv (
    k INT8 NOT NULL,
    v BYTES NOT NULL,
    shard 
        INT4 AS (k % 10) STORED
        CHECK (shard IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)),
    PRIMARY KEY (shard, k),
    INDEX (v)
);

-- The seed's schema (4) lacks the opening parenthesis after "kv"; this is
-- the statement it means (the typo itself is an error case in
-- seeds_test.go).
CREATE TABLE kv (
    k INT8 NOT NULL,
    v BYTES NOT NULL,
    PRIMARY KEY (k),
    INDEX (v)
);

explain select * from kv where k = 10;

SELECT * FROM kv ORDER BY k LIMIT 5;

CREATE TABLE abc (a INT PRIMARY KEY USING HASH WITH BUCKET_COUNT=4);

CREATE TABLE abc (a INT, a_shard INT AS MOD(hash(a), 4)
    STORED
    CHECK (a_shard IN (0,1,2,3)));

-- colocated-tables.txt

CREATE DATABASE colocation_demo WITH colocated = true;

CREATE TABLE opt_in_1(a int, b int, PRIMARY KEY(a));
CREATE INDEX ON opt_in_1(b);
CREATE TABLE opt_in_2(a int, b int, PRIMARY KEY(a));

CREATE TABLE opt_out_1(a int, b int, PRIMARY KEY(a)) WITH (colocated = false);
CREATE INDEX ON opt_out_1(b);
CREATE TABLE opt_out_2(a int, b int, PRIMARY KEY(a)) WITH (colocated = false);

INSERT INTO opt_in_1
     SELECT a, a%10 FROM generate_series(1,100000) AS a;
INSERT INTO opt_in_2
     SELECT a, a%10 FROM generate_series(1,100000) AS a;
INSERT INTO opt_out_1
     SELECT a, a%10 FROM generate_series(1,100000) AS a;
INSERT INTO opt_out_1
     SELECT a, a%10 FROM generate_series(1,100000) AS a;

select * from opt_in_1 where b=6;
explain (analyze, costs off) select * from opt_in_1 where b=6;
explain (analyze, costs off) select * from opt_out_1 where b=6;

update opt_in_1 set b=100 where b=4;
explain (analyze, costs off) update opt_in_1 set b=100 where b=4;
explain (analyze, costs off) update opt_out_1 set b=100 where b=4;

update opt_in_1 set b=100 where a<2;
explain (analyze, costs off) update opt_in_1 set b=100 where a<2;
explain (analyze, costs off) update opt_out_1 set b=100 where a<2;

explain (analyze, costs off) select *
from opt_in_1, opt_in_2
where opt_in_1.a=opt_in_2.a and opt_in_1.b=6;

explain (analyze, costs off) select *
from opt_out_1, opt_out_2
where opt_out_1.a=opt_out_2.a and opt_out_1.b=6;

SELECT 
     t.tableoid, t.oid, t.relname AS indexname,
     inh.inhparent AS parentidx,
     pg_catalog.pg_get_indexdef(i.indexrelid) AS indexdef,
     i.indnkeyatts AS indnkeyatts, i.indnatts AS indnatts,
     i.indkey, i.indisclustered, 
     i.indisreplident, i.indoption,
     t.relpages,
     c.contype, c.conname, c.condeferrable, c.condeferred,
     c.tableoid AS contableoid,
     c.oid AS conoid,
     pg_catalog.pg_get_constraintdef(c.oid, $1) AS condef,
     (SELECT spcname
           FROM pg_catalog.pg_tablespace s
           WHERE s.oid = t.reltablespace) AS tablespace,
     t.reloptions AS indreloptions,
     (SELECT pg_catalog.array_agg(attnum ORDER BY attnum)  
           FROM pg_catalog.pg_attribute  
           WHERE attrelid = i.indexrelid AND attstattarget >= $2)
           AS indstatcols,
     (SELECT pg_catalog.array_agg(attstattarget ORDER BY attnum)  
           FROM pg_catalog.pg_attribute  
           WHERE attrelid = i.indexrelid AND     attstattarget >= $3)
           AS indstatvals
FROM pg_catalog.pg_index i 
     JOIN pg_catalog.pg_class t ON (t.oid = i.indexrelid)
     JOIN pg_catalog.pg_class t2 ON (t2.oid = i.indrelid) 
     LEFT JOIN pg_catalog.pg_constraint c
           ON (i.indrelid = c.conrelid
                AND i.indexrelid = c.conindid
                AND c.contype IN ($4,$5,$6)) 
     LEFT JOIN pg_catalog.pg_inherits inh
           ON (inh.inhrelid = indexrelid)
WHERE i.indrelid = $7::pg_catalog.oid
     AND (i.indisvalid OR t2.relkind = $8)
     AND i.indisready ORDER BY indexname;

-- parallel-indexing.txt

CREATE TABLE github_events (
    event_id bigint,
    event_type text,
    event_public boolean,
    repo_id bigint,
    payload jsonb,
    repo jsonb,
    actor jsonb,
    org jsonb,
    created_at timestamp
);

-- (distributed table only) Shard the table by repo_id
SELECT create_distributed_table('github_events', 'repo_id');

-- Initial data load; the seed's \COPY ... FROM PROGRAM is psql's client-side
-- wrapper around this.
COPY github_events FROM STDIN WITH (FORMAT CSV);

CREATE INDEX github_events_payload_idx ON github_events USING GIN (payload);

-- Get all commits by test@gmail.com from all repos
SELECT repo_id, jsonb_array_elements(payload->'commits')
  FROM github_events
 WHERE event_type = 'PushEvent' AND
       payload @> '{"commits":[{"author":{"email":"test@gmail.com"}}]}';

-- Get all commits by test@gmail.com from a single repo
SELECT repo_id, jsonb_array_elements(payload->'commits')
  FROM github_events
 WHERE event_type = 'PushEvent' AND
       payload @> '{"commits":[{"author":{"email":"test@gmail.com"}}]}' AND
       repo_id = 17330407;

-- read-planning.txt

select count(hostname) from dns;

-- DESIGN.md names these alongside the seeds.

SELECT create_distributed_table('github_events', 'repo_id', shard_count => 32, colocate_with => 'none');
CREATE TABLE tracking (abc varchar, PRIMARY KEY ((abc) HASH)) SPLIT INTO 10 TABLETS;
CREATE TABLE ordered (a int, b int, PRIMARY KEY (a ASC, b DESC));
