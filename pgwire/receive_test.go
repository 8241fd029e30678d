package pgwire

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"reflect"
	"testing"
	"testing/iotest"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestFrontendAllocs: reading a prepared statement's round trip as
// pgbench -M prepared and libpq send it (Bind of a named statement to the
// unnamed portal, Describe, Execute, Sync) allocates nothing once the
// reader has its buffer: pgproto3's Backend made the Bind's parameter
// list, its statement name and the Execute's portal name anew (two to
// three objects per SELECT).
func TestFrontendAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	stream := encodeFrontend(t, &pgproto3.Bind{PreparedStatement: "P_0", Parameters: [][]byte{[]byte("4242")}},
		&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{})
	r := bytes.NewReader(stream)
	f := &frontend{br: r}
	round := func() {
		r.Reset(stream)
		for range 4 {
			if _, err := f.receive(); err != nil {
				t.Fatal(err)
			}
		}
	}
	round()
	if n := testing.AllocsPerRun(100, round); n > 0 {
		t.Errorf("Bind, Describe, Execute, Sync: %v allocations, want 0", n)
	}
	if got := f.bind.PreparedStatement; got != "P_0" || string(f.bind.Parameters[0]) != "4242" {
		t.Errorf("Bind read as %+v", f.bind)
	}
}

// frontendSeeds are streams for TestFrontendMatchesBackend: the fuzz
// seeds, and Binds and Executes that are malformed in each field.
func frontendSeeds(t testing.TB) [][]byte {
	seeds := fuzzSeeds(t)
	bind := encodeFrontend(t, &pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "s",
		ParameterFormatCodes: []int16{1, 0}, Parameters: [][]byte{[]byte("ab"), nil}, ResultFormatCodes: []int16{1}})
	exec := encodeFrontend(t, &pgproto3.Execute{Portal: "p", MaxRows: 7})
	seeds = append(seeds, bind, exec, append(append([]byte{}, bind...), bind...),
		encodeFrontend(t, &pgproto3.Bind{}, &pgproto3.Bind{PreparedStatement: "s"}, &pgproto3.Bind{PreparedStatement: "t"},
			&pgproto3.Execute{}, &pgproto3.Execute{Portal: "q"}, &pgproto3.Execute{Portal: "q"}))
	// Every shorter body of the Bind and the Execute, with its length
	// fixed up: each field cut short in turn.
	for _, m := range [][]byte{bind, exec} {
		for n := 5; n < len(m); n++ {
			b := append([]byte{m[0], 0, 0, 0, byte(n - 1)}, m[5:n]...)
			seeds = append(seeds, b)
		}
	}
	// A body longer than the reader's buffer, and a length under 4.
	seeds = append(seeds, encodeFrontend(t, &pgproto3.Query{String: string(bytes.Repeat([]byte("x"), frontendBufSize+10))}),
		[]byte{'S', 0, 0, 0, 3})
	return seeds
}

// TestFrontendMatchesBackend: the connection's reader returns what
// pgproto3's Backend.Receive returns for the same bytes, message by
// message, and fails where it fails with the same error, for each
// authentication state a 'p' message may answer.
func TestFrontendMatchesBackend(t *testing.T) {
	for i, data := range frontendSeeds(t) {
		for _, auth := range []uint32{pgproto3.AuthTypeOk, pgproto3.AuthTypeSASL, pgproto3.AuthTypeSASLContinue} {
			t.Run(fmt.Sprintf("%d/%d", i, auth), func(t *testing.T) { compareReaders(t, data, auth, 1<<16) })
		}
	}
}

// FuzzFrontendReceive: the same comparison on arbitrary bytes.
func FuzzFrontendReceive(f *testing.F) {
	for _, s := range frontendSeeds(f) {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, auth uint8) {
		compareReaders(t, data, []uint32{pgproto3.AuthTypeOk, pgproto3.AuthTypeSASL, pgproto3.AuthTypeSASLContinue}[auth%3], 1<<16)
	})
}

func compareReaders(t *testing.T, data []byte, auth uint32, maxBody int) {
	be := pgproto3.NewBackend(bytes.NewReader(data), io.Discard)
	be.SetMaxBodyLen(maxBody)
	if auth != pgproto3.AuthTypeOk {
		if err := be.SetAuthType(auth); err != nil {
			t.Fatal(err)
		}
	}
	fe := &frontend{br: bufio.NewReader(bytes.NewReader(data)), maxBody: maxBody, authType: auth}
	for n := 0; n < 1000; n++ {
		want, werr := be.Receive()
		got, gerr := fe.receive()
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("message %d: error %v, pgproto3's %v", n, gerr, werr)
		}
		if werr != nil {
			return
		}
		if !reflect.DeepEqual(normalize(got), normalize(want)) {
			t.Fatalf("message %d: %#v, pgproto3's %#v", n, got, want)
		}
	}
}

// normalize makes the empty slices of a Bind nil: pgproto3 leaves some
// nil and makes others empty, the reader reuses its own, and no caller
// tells them apart.
func normalize(m pgproto3.FrontendMessage) pgproto3.FrontendMessage {
	b, ok := m.(*pgproto3.Bind)
	if !ok {
		return m
	}
	c := *b
	if len(c.ParameterFormatCodes) == 0 {
		c.ParameterFormatCodes = nil
	}
	if len(c.Parameters) == 0 {
		c.Parameters = nil
	}
	if len(c.ResultFormatCodes) == 0 {
		c.ResultFormatCodes = nil
	}
	return &c
}

// BenchmarkReceiveRoundTrip reads a prepared SELECT's four messages
// (Bind, Describe, Execute, Sync) with the connection's reader and with
// pgproto3's Backend over a bufio.Reader, as the connection had them.
func BenchmarkReceiveRoundTrip(b *testing.B) {
	stream := encodeFrontend(b, &pgproto3.Bind{PreparedStatement: "P_0", Parameters: [][]byte{[]byte("4242")}},
		&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{})
	r := bytes.NewReader(stream)
	br := bufio.NewReader(r)
	for _, c := range []struct {
		name string
		recv func() (pgproto3.FrontendMessage, error)
	}{
		{"frontend", (&frontend{br: br}).receive},
		{"pgproto3", pgproto3.NewBackend(br, io.Discard).Receive},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(stream)
				br.Reset(r)
				for range 4 {
					if _, err := c.recv(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestFrontendReadsInPlace: a message the connection's bufio.Reader
// holds whole is decoded where it lies, so pgbench's round trip (Bind,
// Describe, Execute, Sync, arriving together) copies no body into the
// reader's own buffer, which is then never made; a message longer than
// the bufio.Reader's buffer, or one arriving a byte at a time, is read
// through the reader's buffer as before. Each case's messages read as
// they were sent.
func TestFrontendReadsInPlace(t *testing.T) {
	roundTrip := []pgproto3.FrontendMessage{&pgproto3.Bind{PreparedStatement: "P_0", Parameters: [][]byte{[]byte("4242")}},
		&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{}}
	long := &pgproto3.Query{String: string(bytes.Repeat([]byte("x"), 5000))}
	for _, c := range []struct {
		name     string
		msgs     []pgproto3.FrontendMessage
		oneByte  bool // the socket returns a byte per read
		wantCopy bool // a body went through f.buf
	}{
		{"round trip", roundTrip, false, false},
		{"two round trips", append(append([]pgproto3.FrontendMessage{}, roundTrip...), roundTrip...), false, false},
		{"longer than the bufio buffer", []pgproto3.FrontendMessage{long, &pgproto3.Sync{}}, false, true},
		{"a byte at a time", roundTrip, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(encodeFrontend(t, c.msgs...))
			if c.oneByte {
				r = iotest.OneByteReader(r)
			}
			f := &frontend{br: bufio.NewReader(r)}
			for i, want := range c.msgs {
				got, err := f.receive()
				if err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				if !reflect.DeepEqual(normalize(got), normalize(want)) {
					t.Fatalf("message %d: %#v, want %#v", i, got, want)
				}
			}
			if copied := f.buf != nil; copied != c.wantCopy {
				t.Errorf("a body read through the reader's buffer: %v, want %v", copied, c.wantCopy)
			}
		})
	}
}
