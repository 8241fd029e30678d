// node-postgres (pg) against Cairn, run by test/compat/run.sh with a
// postgres:// URL and NODE_PATH pointing at the pg and pg-cursor packages
// it installed with npm: parameterized queries and their types, prepared
// (named) statements, transactions, errors with their SQLSTATE, a cursor,
// and a pool of concurrent clients. Every step asserts what it read back;
// the exit status is 1 on the first failure.
'use strict';
const assert = require('assert');
const { Client, Pool } = require('pg');
const Cursor = require('pg-cursor');

const url = process.argv[2];

function step(name) {
  console.log('node-postgres: ' + name);
}

async function main() {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    step('parameters and types');
    await c.query('DROP TABLE IF EXISTS node_items');
    await c.query(`CREATE TABLE node_items (id int PRIMARY KEY, name text NOT NULL, price numeric(8,2),
      at timestamptz, tags text[], doc jsonb, ok bool)`);
    const at = new Date(Date.UTC(2026, 10, 29, 8, 0, 0, 123));
    await c.query('INSERT INTO node_items VALUES ($1, $2, $3, $4, $5, $6, $7)',
      [1, 'widget', '19.99', at, ['a', 'b c'], { k: [1, 'x'] }, true]);
    let r = await c.query('SELECT * FROM node_items WHERE id = $1', [1]);
    assert.strictEqual(r.rows.length, 1);
    const row = r.rows[0];
    assert.strictEqual(row.name, 'widget');
    assert.strictEqual(row.price, '19.99');
    assert.strictEqual(row.at.getTime(), at.getTime());
    assert.deepStrictEqual(row.tags, ['a', 'b c']);
    assert.deepStrictEqual(row.doc, { k: [1, 'x'] });
    assert.strictEqual(row.ok, true);
    assert.deepStrictEqual(r.fields.map((f) => f.name), ['id', 'name', 'price', 'at', 'tags', 'doc', 'ok']);

    step('prepared statements');
    for (let i = 2; i <= 20; i++) {
      await c.query({ name: 'ins', text: 'INSERT INTO node_items (id, name) VALUES ($1, $2)', values: [i, 'n' + i] });
    }
    r = await c.query({ name: 'count', text: 'SELECT count(*)::int AS n FROM node_items WHERE id > $1', values: [10] });
    assert.strictEqual(r.rows[0].n, 10);
    r = await c.query({ text: 'SELECT id, name FROM node_items WHERE id IN (2, 3) ORDER BY id', rowMode: 'array' });
    assert.deepStrictEqual(r.rows, [[2, 'n2'], [3, 'n3']]);

    step('transactions and errors');
    await c.query('BEGIN');
    await c.query('DELETE FROM node_items');
    await c.query('ROLLBACK');
    r = await c.query('SELECT count(*)::int AS n FROM node_items');
    assert.strictEqual(r.rows[0].n, 20);
    await assert.rejects(c.query('INSERT INTO node_items (id, name) VALUES (1, $1)', ['dup']),
      (e) => e.code === '23505' && e.constraint === 'node_items_pkey');
    await assert.rejects(c.query('SELECT nope FROM node_items'), (e) => e.code === '42703');
    await c.query('BEGIN');
    await assert.rejects(c.query('SELECT 1/0'), (e) => e.code === '22012');
    await assert.rejects(c.query('SELECT 1'), (e) => e.code === '25P02');
    await c.query('ROLLBACK');

    step('cursor');
    const cur = c.query(new Cursor('SELECT id FROM node_items ORDER BY id'));
    const seen = [];
    for (;;) {
      const rows = await cur.read(7);
      if (rows.length === 0) break;
      seen.push(...rows.map((x) => x.id));
    }
    await cur.close();
    assert.deepStrictEqual(seen, Array.from({ length: 20 }, (_, i) => i + 1));
  } finally {
    await c.end();
  }

  step('pool');
  const pool = new Pool({ connectionString: url, max: 8 });
  await Promise.all(Array.from({ length: 8 }, async (_, w) => {
    for (let i = 0; i < 20; i++) {
      await pool.query('INSERT INTO node_items (id, name) VALUES ($1, $2)', [1000 + w * 100 + i, 'p']);
    }
  }));
  const r = await pool.query('SELECT count(*)::int AS n FROM node_items WHERE id >= 1000');
  assert.strictEqual(r.rows[0].n, 160);
  await pool.query('DROP TABLE node_items');
  await pool.end();
}

main().then(() => console.log('node-postgres: all checks ok'), (e) => {
  console.log('node-postgres: FAILED: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
