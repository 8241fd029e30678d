-- What test/compat/run.sh compares between the database pg_dump read and
-- its restored copies (in Cairn and in PostgreSQL 15): the objects, their
-- definitions as the catalog functions print them, every row (as md5s of
-- the rows in key order), and the sequences' positions. Run with psql -qAt;
-- the last statements advance the sequences, so run it once per database.
SELECT table_schema, table_name, table_type FROM information_schema.tables
  WHERE table_schema IN ('public', 'dump_extra') ORDER BY 1, 2;
SELECT table_schema, table_name, column_name, data_type, is_nullable, column_default
  FROM information_schema.columns WHERE table_schema IN ('public', 'dump_extra') ORDER BY 1, 2, ordinal_position;
SELECT schemaname, tablename, indexname, indexdef FROM pg_indexes
  WHERE schemaname IN ('public', 'dump_extra') ORDER BY 1, 2, 3;
SELECT n.nspname, c.conname, c.contype, pg_get_constraintdef(c.oid) FROM pg_constraint c
  JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname IN ('public', 'dump_extra') ORDER BY 1, 2;
SELECT schemaname, viewname, definition FROM pg_views WHERE schemaname IN ('public', 'dump_extra') ORDER BY 1, 2;
SELECT table_schema, table_name, check_option FROM information_schema.views WHERE table_schema IN ('public', 'dump_extra') ORDER BY 1, 2;
SELECT schemaname, sequencename, data_type, start_value, increment_by, max_value, last_value
  FROM pg_sequences WHERE schemaname IN ('public', 'dump_extra') ORDER BY 1, 2;
SELECT obj_description('dump_types'::regclass, 'pg_class'), col_description('dump_types'::regclass, 2);
SELECT 'dump_parent', count(*), md5(string_agg(id || '|' || code, ',' ORDER BY id)) FROM dump_parent;
SELECT 'dump_child', count(*), md5(string_agg(id || '|' || parent_id || '|' || qty || '|' || coalesce(note, 'NULL'), ',' ORDER BY id)) FROM dump_child;
SELECT 'dump_view', count(*), md5(string_agg(id || '|' || code, ',' ORDER BY id)) FROM dump_view;
SELECT 'dump_types', k, ident, b, i2, i8, f8, n, t, c, by, d, ts, tz, iv, u, j, arr FROM dump_types ORDER BY k;
SELECT 'a_ticketed', ticket, what FROM a_ticketed ORDER BY ticket;
SELECT 'audit', count(*), md5(string_agg(id || '|' || parent_id || '|' || at || '|' || what, ',' ORDER BY id)) FROM dump_extra.audit;
SELECT 'recent', count(*), md5(string_agg(id || '|' || what || '|' || code, ',' ORDER BY id)) FROM dump_extra.recent;
SELECT column_name, is_generated, generation_expression FROM information_schema.columns
  WHERE table_schema = 'dump_extra' AND table_name = 'shapes' ORDER BY ordinal_position;
SELECT 'shapes', count(*), md5(string_agg(id || '|' || parent_id || '|' || w || '|' || h || '|' || area || '|' || name, ',' ORDER BY id))
  FROM dump_extra.shapes;
SELECT 'orders', no, item FROM orders ORDER BY no;
SELECT n.nspname, t.typname, t.typtype, string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder), obj_description(t.oid, 'pg_type')
  FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace JOIN pg_enum e ON e.enumtypid = t.oid
  WHERE n.nspname IN ('public', 'dump_extra') GROUP BY 1, 2, 3, t.oid ORDER BY 1, 2;
SELECT 'tickets', id, st, moods, format_type(pg_typeof(st), NULL) FROM tickets ORDER BY st, id;
SELECT n.nspname, t.typname, format_type(t.typbasetype, t.typtypmod), t.typnotnull, t.typdefault,
  (SELECT string_agg(c.conname || ' ' || pg_get_constraintdef(c.oid), ', ' ORDER BY c.conname) FROM pg_constraint c WHERE c.contypid = t.oid)
  FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
  WHERE t.typtype = 'd' AND n.nspname IN ('public', 'dump_extra') ORDER BY 1, 2;
SELECT 'contacts', id, mail, n, format_type(a.atttypid, a.atttypmod) FROM contacts, pg_attribute a
  WHERE a.attrelid = 'contacts'::regclass AND a.attname = 'n' ORDER BY id;
SELECT n.nspname, p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid), p.provolatile, p.proisstrict,
  obj_description(p.oid, 'pg_proc')
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname IN ('public', 'dump_extra')
  -- PostgreSQL's pgcrypto puts its functions in public (Cairn has them
  -- built in): members of an extension are not the database's own.
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
  ORDER BY 1, 2, 3;
SELECT 'functions', parent_code(3), add_tax(10.00), add_tax(10.00, 0.5), add_tax(10), child_count(1),
  (SELECT count(*) FROM dump_extra.shapes_over(100)), (SELECT sum(area) FROM dump_extra.shapes_over(100));
SELECT e.extname, e.extversion, n.nspname, obj_description(e.oid, 'pg_extension')
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname <> 'plpgsql' ORDER BY 1;
SELECT n.nspname, c.relname, c.relacl FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname IN ('public', 'dump_extra') AND c.relacl IS NOT NULL ORDER BY 1, 2;
SELECT 'docs', count(*), md5(string_agg(id || '|' || body::text || '|' || tags::text, ',' ORDER BY id)) FROM docs;
SELECT 'docs by gin', count(*) FROM docs WHERE body @> '{"n": 7}' AND tags @> ARRAY['t1'];
SELECT 'batches', no, label FROM dump_extra.batches ORDER BY no;
SELECT nextval('order_no'), nextval('dump_extra.batch_no');
SELECT nextval('dump_parent_id_seq'), nextval('dump_child_id_seq'), nextval('dump_ticket'), nextval('dump_extra.audit_id_seq');
