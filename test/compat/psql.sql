-- Run by test/compat/run.sh through psql with ON_ERROR_STOP: every statement
-- and meta-command here must succeed against Cairn.
\set ON_ERROR_STOP on
SELECT version();
SHOW server_version;
CREATE TABLE compat_users (
  id serial PRIMARY KEY,
  email varchar(100) NOT NULL UNIQUE,
  name text,
  created timestamptz NOT NULL DEFAULT now(),
  profile jsonb
);
CREATE INDEX compat_users_name_idx ON compat_users (name);
INSERT INTO compat_users (email, name, profile) VALUES
  ('a@example.com', 'Ann', '{"plan": "pro"}'),
  ('b@example.com', 'Bob', NULL);
\copy compat_users (email, name) FROM stdin
c@example.com	Cy
d@example.com	\N
\.
SELECT id, email, name, profile->>'plan' AS plan FROM compat_users ORDER BY id;
SELECT count(*) FROM compat_users WHERE name IS NULL;
\d compat_users
\dt
\di
\l
\dn
\df nextval
BEGIN;
UPDATE compat_users SET name = 'Dee' WHERE email = 'd@example.com' RETURNING id, name;
SAVEPOINT s1;
DELETE FROM compat_users WHERE id = 1;
ROLLBACK TO SAVEPOINT s1;
COMMIT;
SELECT name FROM compat_users ORDER BY id;
\copy (SELECT id, email FROM compat_users ORDER BY id) TO stdout WITH (FORMAT csv, HEADER)
EXPLAIN SELECT * FROM compat_users WHERE id = 2;
DROP TABLE compat_users;
