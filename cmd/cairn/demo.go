package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cairn-db/cairn/server/localcluster"
	"github.com/jackc/pgx/v5/pgconn"
)

// demoSchema is the sample data cairn demo loads.
const demoSchema = `
CREATE TABLE customers (id INT PRIMARY KEY, name TEXT NOT NULL, city TEXT);
CREATE TABLE products (id INT PRIMARY KEY, name TEXT NOT NULL, price NUMERIC(10,2) NOT NULL);
CREATE TABLE orders (
  id INT PRIMARY KEY,
  customer_id INT NOT NULL REFERENCES customers (id),
  product_id INT NOT NULL REFERENCES products (id),
  quantity INT NOT NULL CHECK (quantity > 0),
  ordered_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
INSERT INTO customers VALUES (1, 'Ada', 'London'), (2, 'Grace', 'New York'), (3, 'Edsger', 'Eindhoven');
INSERT INTO products VALUES (1, 'granite', 12.50), (2, 'slate', 8.00), (3, 'basalt', 21.75);
INSERT INTO orders (id, customer_id, product_id, quantity) VALUES (1, 1, 2, 3), (2, 2, 1, 1), (3, 3, 3, 2), (4, 1, 3, 5);
`

// demoFlags are demo's flags.
type demoFlags struct {
	noShell, global bool
	nodes           int
	leasePrefs      string
}

func demoFlagSet(f *demoFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.BoolVar(&f.noShell, "no-shell", false, "serve until interrupted instead of opening the SQL shell")
	fs.IntVar(&f.nodes, "nodes", 1, "number of in-process nodes of one cluster")
	fs.BoolVar(&f.global, "global", false, "place the nodes in regions us-west, us-east and eu with simulated round trips (60, 86, 145 ms); needs --nodes 3 or more")
	fs.StringVar(&f.leasePrefs, "lease-preferences", "", "where tablet leases go: region=NAME[,...], spread (the default) or none (as cairn start)")
	return fs
}

func cmdDemo(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var df demoFlags
	fs := demoFlagSet(&df)
	fs.SetOutput(stderr)
	noShell, nodes, global, leasePrefs := &df.noShell, &df.nodes, &df.global, &df.leasePrefs
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments: %v", fs.Args())
	}
	if *nodes < 1 {
		return usagef("--nodes must be at least 1")
	}
	if *global && *nodes < len(localcluster.GlobalRegions) {
		return usagef("--global needs --nodes %d or more (one node per region)", len(localcluster.GlobalRegions))
	}
	if *leasePrefs != "" && *nodes == 1 {
		return usagef("--lease-preferences needs --nodes 2 or more")
	}
	// With the shell, Ctrl-C cancels a statement (shell.go), not the
	// demo.
	sigs := []os.Signal{syscall.SIGTERM}
	if *noShell {
		sigs = append(sigs, syscall.SIGINT)
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := localcluster.Start(ctx, localcluster.Options{Nodes: *nodes, Global: *global, LeasePreferences: *leasePrefs, Logger: log})
	if err != nil {
		return err
	}
	defer c.Stop(context.Background())
	// The shell and the printed URL are the first node's: us-west in a
	// global cluster.
	url := c.URL(0, "postgres")
	if err := loadDemo(ctx, url); err != nil {
		return fmt.Errorf("loading the sample data: %w", err)
	}
	if *nodes == 1 {
		fmt.Fprintf(stdout, "cairn demo: an in-memory node with tables customers, products and orders\nadmin UI: http://%s/\n%s\n", c.Nodes[0].HTTPAddr(), url)
	} else {
		what := fmt.Sprintf("%d in-memory nodes of one cluster", *nodes)
		if *global {
			what += fmt.Sprintf(" in regions %s (round trips %s)", strings.Join(localcluster.GlobalRegions, ", "), localcluster.GlobalLatencyMap)
		}
		fmt.Fprintf(stdout, "cairn demo: %s, with tables customers, products and orders\n", what)
		for i := 1; i < *nodes; i++ {
			region := ""
			if c.Regions[i] != "" {
				region = " (" + c.Regions[i] + ")"
			}
			fmt.Fprintf(stdout, "node %d%s: %s\n", i+1, region, c.URL(i, "postgres"))
		}
		region := ""
		if c.Regions[0] != "" {
			region = " (" + c.Regions[0] + ")"
		}
		fmt.Fprintf(stdout, "node 1%s, the shell's: %s\n", region, url)
		fmt.Fprintf(stdout, "admin UI: http://%s/\n", c.Nodes[0].HTTPAddr())
	}
	if *noShell {
		<-ctx.Done()
		return nil
	}
	return shell(ctx, url, "", stdin, stdout, stderr)
}

func loadDemo(ctx context.Context, url string) error {
	conn, err := pgconn.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, demoSchema).ReadAll()
	return err
}

// isTerminal reports whether in is an interactive terminal (prompts are
// printed only then).
func isTerminal(in io.Reader) bool {
	f, ok := in.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
