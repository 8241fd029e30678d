-- psql against Cairn, compared line by line with what PostgreSQL 15 prints
-- for the same script (psql.expected; regenerate it with
-- `test/compat/run.sh --regen`). Only differences that are Cairn's by
-- nature (OIDs) are normalized, by test/compat/normalize.sed. A section
-- that must fail says so and turns ON_ERROR_STOP off around it.
\set ON_ERROR_STOP on
\pset pager off
SELECT version() LIKE 'PostgreSQL 15.%' AS pg15;
SHOW server_version_num;

-- A schema with every kind of constraint, default and index \d shows.
CREATE TABLE compat_orgs (
  id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text NOT NULL UNIQUE
);
CREATE TABLE compat_users (
  id serial PRIMARY KEY,
  org_id int REFERENCES compat_orgs (id) ON DELETE CASCADE,
  email varchar(100) NOT NULL UNIQUE,
  name text,
  age int CHECK (age >= 0),
  score numeric(10,2) DEFAULT 0,
  created timestamptz NOT NULL DEFAULT now(),
  profile jsonb,
  tags text[],
  CONSTRAINT compat_users_name_len CHECK (length(name) < 50)
);
CREATE INDEX compat_users_name_idx ON compat_users (name);
CREATE UNIQUE INDEX compat_users_org_email_idx ON compat_users (org_id, lower(email));
CREATE INDEX compat_users_age_idx ON compat_users (age DESC) WHERE age IS NOT NULL;
CREATE SEQUENCE compat_seq START 10 INCREMENT 5;
CREATE VIEW compat_adults AS SELECT id, name FROM compat_users WHERE age >= 18;
CREATE SCHEMA compat_s;
CREATE TABLE compat_s.items (k bigint PRIMARY KEY, v text DEFAULT 'x');

\d compat_users
\d compat_orgs
\d+ compat_users
\d compat_adults
\d+ compat_adults
\d compat_seq
\d compat_users_pkey
\d compat_users_age_idx
\d compat_s.items
\d
\dt
\dt compat_s.*
\di
\dv
\ds
\dx
\dn
\du
\l postgres
\df nextval
\df now
\df gen_random_uuid
\df abs
\sf lower(text)
\dt+ compat_orgs
\dv+
\ds+
\di+ compat_users_pkey
\dn+ compat_s
\dp compat_orgs
\z compat_orgs
\db
\dg
\dL
\dE
\dm
\dD
\dP
\dc
\dO
\dX
\dy
\des
\dew
\det
\dRp
\dRs
\drds
\dl
\dconfig search_path

-- Enum types: \dT and \dT+ (labels in declaration order, one added in
-- the middle), a table using them, a type in another schema.
CREATE TYPE compat_mood AS ENUM ('sad', 'ok', 'happy');
ALTER TYPE compat_mood ADD VALUE 'meh' BEFORE 'ok';
CREATE TYPE compat_s.color AS ENUM ('red', 'green');
COMMENT ON TYPE compat_mood IS 'how it feels';
CREATE TABLE compat_feelings (id int PRIMARY KEY, m compat_mood NOT NULL DEFAULT 'ok',
  c compat_s.color DEFAULT 'red', ms compat_mood[]);
INSERT INTO compat_feelings VALUES (1, 'happy', 'green', '{sad,meh}'), (2, 'sad', NULL, NULL), (3, 'meh', 'red', '{}');
INSERT INTO compat_feelings (id) VALUES (4);
SELECT * FROM compat_feelings ORDER BY m, id;
\d compat_feelings
\dT
\dT+
\dT compat_s.*
\dT+ compat_s.color
DROP TABLE compat_feelings;
DROP TYPE compat_mood, compat_s.color;
\dT

-- Domains: \dD, \dD+, a table using them, \copy checking them.
CREATE DOMAIN compat_pos AS numeric(8,2) CHECK (VALUE > 0);
CREATE DOMAIN compat_s.code AS varchar(4) NOT NULL DEFAULT 'NONE' CONSTRAINT code_upper CHECK (VALUE = upper(VALUE));
CREATE TABLE compat_prices (id int PRIMARY KEY, price compat_pos, code compat_s.code);
\copy compat_prices (id, price, code) FROM stdin
1	9.99	AB
2	0.50	CD
\.
\copy compat_prices (id, price) FROM stdin
3	1.25
\.
SELECT * FROM compat_prices ORDER BY id;
\d compat_prices
\dD
\dD+
\dD compat_s.*
\set ON_ERROR_STOP off
\copy compat_prices (id, price, code) FROM stdin
4	-1.00	X
\.
\copy compat_prices (id, price, code) FROM stdin
4	1.00	\N
\.
INSERT INTO compat_prices VALUES (5, 2, 'lower');
INSERT INTO compat_prices VALUES (5, 2, 'low');
\set ON_ERROR_STOP on
DROP TABLE compat_prices;
DROP DOMAIN compat_pos, compat_s.code;
\dD

-- SQL functions: \df, \df+ and \sf of user functions (overloads, a
-- default, STRICT, SETOF, RETURNS TABLE, another schema), then dropped.
CREATE FUNCTION compat_add(a integer, b integer DEFAULT 1) RETURNS integer LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT a + b $$;
CREATE FUNCTION compat_add(a text, b text) RETURNS text LANGUAGE sql AS $$ SELECT a || b $$;
CREATE FUNCTION compat_s.evens(n int) RETURNS SETOF int LANGUAGE sql STABLE AS 'SELECT g FROM generate_series(2, n, 2) g';
CREATE FUNCTION compat_s.pairs(n int) RETURNS TABLE(i int, sq bigint) LANGUAGE sql AS 'SELECT g, g::bigint * g FROM generate_series(1, n) g';
COMMENT ON FUNCTION compat_add(text, text) IS 'joins two texts';
SELECT compat_add(1, 2), compat_add(5), compat_add('a', 'b');
SELECT * FROM compat_s.evens(6);
SELECT * FROM compat_s.pairs(3);
\df compat_*
\df+ compat_add
\df compat_s.*
\sf compat_add(integer, integer)
\sf compat_s.pairs
\sf+ compat_add(text, text)
DROP FUNCTION compat_add(int, int), compat_add(text, text);
DROP FUNCTION compat_s.evens, compat_s.pairs;
\df compat_*

-- pg_dump 15's index query (as quoted in the colocated-tables seed), with
-- the parameters pg_dump binds.
PREPARE dump_indexes AS SELECT
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
\x on
EXECUTE dump_indexes(false, 0, 0, 'p', 'u', 'x', 'compat_users'::regclass, 'p');
\x off
-- The OIDs it returns (normalized above) are those of the index and its
-- constraint.
EXECUTE dump_indexes(false, 0, 0, 'p', 'u', 'x', 'compat_s.items'::regclass, 'p') \gset item_
SELECT :item_oid = 'compat_s.items_pkey'::regclass::oid AS index_oid,
  :item_conoid = (SELECT oid FROM pg_constraint WHERE conname = 'items_pkey') AS constraint_oid;
DEALLOCATE dump_indexes;

-- Data: INSERT, \copy, RETURNING, transactions and savepoints.
INSERT INTO compat_orgs (name) VALUES ('acme'), ('globex') RETURNING id, name;
INSERT INTO compat_users (org_id, email, name, age, score, profile, tags) VALUES
  (1, 'a@example.com', 'Ann', 34, 12.5, '{"plan": "pro", "seats": [1, 2]}', '{x,y}'),
  (2, 'b@example.com', 'Bob', 17, NULL, NULL, '{}');
\copy compat_users (email, name, age) FROM stdin
c@example.com	Cy	\N
d@example.com	\N	40
\.
SELECT id, org_id, email, name, age, score, profile->>'plan' AS plan, profile, tags
FROM compat_users ORDER BY id;
SELECT * FROM compat_adults ORDER BY id;
SELECT count(*) FILTER (WHERE name IS NULL) AS unnamed, sum(score), avg(age)::numeric(6,2) FROM compat_users;
BEGIN;
UPDATE compat_users SET name = 'Dee' WHERE email = 'd@example.com' RETURNING id, name;
SAVEPOINT s1;
DELETE FROM compat_users WHERE id = 1;
ROLLBACK TO SAVEPOINT s1;
COMMIT;
SELECT name FROM compat_users ORDER BY id;
SELECT nextval('compat_seq'), nextval('compat_seq');
\copy (SELECT id, email, tags FROM compat_users ORDER BY id) TO stdout WITH (FORMAT csv, HEADER)

-- Errors: the SQLSTATE, message, DETAIL, HINT, CONTEXT, position and the
-- schema, table, column and constraint they name are PostgreSQL's.
\set ON_ERROR_STOP off
\set VERBOSITY verbose
INSERT INTO compat_users (email) VALUES ('a@example.com');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO compat_users (email, age, created) VALUES ('e@example.com', -1, '2026-01-02 03:04:05+00');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO compat_users (email, org_id) VALUES ('e@example.com', 99);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO compat_users (name, created) VALUES ('nomail', '2026-01-02 03:04:05+00');
\echo :LAST_ERROR_SQLSTATE
DELETE FROM compat_orgs WHERE id = 1;
INSERT INTO compat_orgs (id, name) VALUES (7, 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT nosuch FROM compat_users;
\echo :LAST_ERROR_SQLSTATE
SELECT 1/0;
\echo :LAST_ERROR_SQLSTATE
\copy compat_users (email, age) FROM stdin
f@example.com	41
g@example.com	forty-two
\.
BEGIN;
SELECT 1/0;
SELECT 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
\set VERBOSITY default
\set ON_ERROR_STOP on
-- ON DELETE CASCADE removed Ann with acme.
SELECT email FROM compat_users ORDER BY id;

DROP VIEW compat_adults;
DROP TABLE compat_users, compat_orgs, compat_s.items;
DROP SCHEMA compat_s;
DROP SEQUENCE compat_seq;
\dt
