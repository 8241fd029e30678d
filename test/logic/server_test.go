package logic

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/cairn-db/cairn/server"
)

// The logic files run against an in-memory Cairn node started here when
// CAIRN_LOGIC_URL is unset.
func init() {
	newServer = func(tb TB) string {
		tb.Helper()
		s, err := server.Start(context.Background(), server.Config{
			Insecure: true,
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			tb.Fatalf("starting a cairn node: %v", err)
		}
		tb.Cleanup(func() { _ = s.Stop(context.Background()) })
		return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr())
	}
}
