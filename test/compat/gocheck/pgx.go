package main

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// checkPgx: the binary protocol with typed parameters and results,
// batches, CopyFrom, transactions, errors with their SQLSTATE, and a pool
// of concurrent workers.
func checkPgx(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)

	step("pgx", "binary parameters and results")
	for _, q := range []string{"DROP TABLE IF EXISTS pgx_items",
		`CREATE TABLE pgx_items (id bigint PRIMARY KEY, name text NOT NULL, price numeric(10,2), at timestamptz,
		 tags text[], doc jsonb, ref uuid, ok bool, score float8)`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	at := time.Date(2026, 11, 29, 8, 0, 0, 123456000, time.UTC)
	ref := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	price := pgtype.Numeric{Int: big.NewInt(1999), Exp: -2, Valid: true}
	if _, err := conn.Exec(ctx, `INSERT INTO pgx_items VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		int64(1), "widget", price, at, []string{"a", "b c"}, map[string]any{"k": []any{1.0, "x"}}, ref, true, 0.5); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	var (
		name  string
		gotP  pgtype.Numeric
		gotAt time.Time
		tags  []string
		doc   map[string]any
		gotR  [16]byte
		ok    bool
		score float64
	)
	err = conn.QueryRow(ctx, `SELECT name, price, at, tags, doc, ref, ok, score FROM pgx_items WHERE id = $1`, int64(1)).
		Scan(&name, &gotP, &gotAt, &tags, &doc, &gotR, &ok, &score)
	if err != nil {
		return fmt.Errorf("select: %w", err)
	}
	f, _ := gotP.Float64Value()
	if name != "widget" || f.Float64 != 19.99 || !gotAt.Equal(at) || fmt.Sprint(tags) != "[a b c]" ||
		fmt.Sprint(doc) != "map[k:[1 x]]" || gotR != ref || !ok || score != 0.5 {
		return fmt.Errorf("read back %q %v %v %v %v %v %v %v", name, f.Float64, gotAt, tags, doc, gotR, ok, score)
	}

	// A record (pgx reads it in binary, record_send's form).
	var rec any
	if err := conn.QueryRow(ctx, `SELECT ROW(7::int2, NULL::int, 'x'::text)`).Scan(&rec); err != nil ||
		fmt.Sprint(rec) != "[7 <nil> x]" {
		return fmt.Errorf("record %v: %v", rec, err)
	}

	step("pgx", "batch and CopyFrom")
	b := &pgx.Batch{}
	for i := 2; i <= 10; i++ {
		b.Queue(`INSERT INTO pgx_items (id, name) VALUES ($1, $2)`, int64(i), fmt.Sprintf("n%d", i))
	}
	b.Queue(`SELECT count(*) FROM pgx_items`)
	br := conn.SendBatch(ctx, b)
	for i := 2; i <= 10; i++ {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("batch insert %d: %w", i, err)
		}
	}
	var n int64
	if err := br.QueryRow().Scan(&n); err != nil || n != 10 {
		return fmt.Errorf("batch count %d: %v", n, err)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("batch close: %w", err)
	}
	rows := make([][]any, 0, 1000)
	for i := 11; i <= 1010; i++ {
		rows = append(rows, []any{int64(i), fmt.Sprintf("c%d", i), float64(i) / 4})
	}
	copied, err := conn.CopyFrom(ctx, pgx.Identifier{"pgx_items"}, []string{"id", "name", "score"}, pgx.CopyFromRows(rows))
	if err != nil || copied != 1000 {
		return fmt.Errorf("CopyFrom: %d rows, %v", copied, err)
	}
	var sum float64
	if err := conn.QueryRow(ctx, `SELECT sum(score) FROM pgx_items WHERE id > 10`).Scan(&sum); err != nil || sum != 127625 {
		return fmt.Errorf("sum after copy %v: %v", sum, err)
	}

	step("pgx", "transactions and errors")
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM pgx_items WHERE id > 10`); err != nil {
		return err
	}
	if err := tx.Rollback(ctx); err != nil {
		return err
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pgx_items`).Scan(&n); err != nil || n != 1010 {
		return fmt.Errorf("count after rollback %d: %v", n, err)
	}
	_, err = conn.Exec(ctx, `INSERT INTO pgx_items (id, name) VALUES (1, 'dup')`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" || pe.ConstraintName != "pgx_items_pkey" {
		return fmt.Errorf("duplicate key: %v", err)
	}
	_, err = conn.Exec(ctx, `SELECT nope FROM pgx_items`)
	if !errors.As(err, &pe) || pe.Code != "42703" {
		return fmt.Errorf("undefined column: %v", err)
	}

	step("pgx", "pool")
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				id := int64(2000 + w*100 + i)
				if _, err := pool.Exec(ctx, `INSERT INTO pgx_items (id, name) VALUES ($1, $2)`, id, "p"); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return fmt.Errorf("pool insert: %w", err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pgx_items WHERE id >= 2000`).Scan(&n); err != nil || n != 200 {
		return fmt.Errorf("pool count %d: %v", n, err)
	}
	_, err = conn.Exec(ctx, `DROP TABLE pgx_items`)
	return err
}
