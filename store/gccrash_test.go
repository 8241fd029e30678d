package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// crashHistory writes (with send, if set) the deterministic history of
// TestGCCrash into a model: 40 keys, 4,000 versions, some deletions, at
// manual-clock timestamps 1ms apart from 1s. With repack, the keys are
// toyRepacker rows instead: whole-row writes, column updates and row
// deletions of 10 rows.
func crashHistory(repack bool, send func(ba *kvpb.BatchRequest) error) (gcModel, error) {
	rng := rand.New(rand.NewSource(14))
	m := gcModel{}
	for i := range 4000 {
		ts := hlc.Timestamp{WallTime: int64(time.Second) + int64(i)*int64(time.Millisecond)}
		k := fmt.Sprintf("k%02d", rng.Intn(40))
		var v []byte
		if rng.Intn(10) > 0 {
			v = fmt.Appendf(nil, "%d", i)
		}
		if repack {
			k, v = toyWrite(rng, i)
		}
		if send != nil {
			ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: ts}}
			if v == nil {
				ba.Add(&kvpb.DeleteRequest{Key: []byte(k)})
			} else {
				ba.Add(&kvpb.PutRequest{Key: []byte(k), Value: v})
			}
			if err := send(ba); err != nil {
				return nil, fmt.Errorf("write %d: %w", i, err)
			}
		}
		m[k] = append(m[k], gcVersion{ts: ts, value: v})
	}
	return m, nil
}

// crashEnvDir names the store directory of TestGCCrash's child process;
// crashEnvRepack, when set, makes it write toyRepacker rows and repack.
const (
	crashEnvDir    = "CAIRN_GC_CRASH_DIR"
	crashEnvRepack = "CAIRN_GC_CRASH_REPACK"
)

// TestGCCrashChild is TestGCCrash's child: it writes the history, says
// "gc", and collects with a 1 ms TTL, the protected timestamp moving up
// the history 100 ms per pass (so every pass removes some), saying "pass"
// after each, until killed.
func TestGCCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnvDir)
	if dir == "" {
		t.Skip("run by TestGCCrash only")
	}
	repack := os.Getenv(crashEnvRepack) != ""
	ctx := context.Background()
	manual := hlc.NewManualClock(int64(time.Second))
	clock := hlc.NewClock(manual.UnixNano, 0)
	eng, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var protected hlc.Timestamp
	cfg := Config{GCTTL: func([]byte) time.Duration { return time.Millisecond },
		GCProtected: func(context.Context) (hlc.Timestamp, error) { return protected, nil }}
	if repack {
		cfg.GCRepacker = toyRepacker{}
	}
	s, err := Open(ctx, eng, clock, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crashHistory(repack, func(ba *kvpb.BatchRequest) error {
		manual.Set(ba.Timestamp.WallTime)
		_, err := s.Send(ctx, ba)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("gc")
	for i := 1; ; i++ {
		protected = hlc.Timestamp{WallTime: int64(time.Second) + int64(i)*int64(100*time.Millisecond)}
		s.GCPass(ctx, true)
		fmt.Println("pass")
	}
}

// TestGCCrash kills a process in the middle of garbage collection (SIGKILL,
// right after it starts collecting) and reopens its store: whatever GC got
// through, every read at or above the threshold still matches the history
// and every read below it is refused. The repack rounds do the same with
// rows GC repacks (mvcc invariant 10), reading rows merged, and finish
// with a GC that repacks every row.
func TestGCCrash(t *testing.T) {
	if os.Getenv(crashEnvDir) != "" {
		t.Skip("child")
	}
	for _, repack := range []bool{false, true} {
		for round := range 3 {
			t.Run(fmt.Sprintf("repack=%v/%d", repack, round), func(t *testing.T) { gcCrashRound(t, repack, round) })
		}
	}
}

func gcCrashRound(t *testing.T, repack bool, round int) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestGCCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvDir+"="+dir)
	if repack {
		cmd.Env = append(cmd.Env, crashEnvRepack+"=1")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	started := false
	for sc.Scan() {
		if sc.Text() == "gc" {
			started = true
			break
		}
	}
	if !started {
		_ = cmd.Wait()
		t.Fatalf("child never started collecting")
	}
	// Later rounds are killed a few passes in.
	for range round * 7 {
		if !sc.Scan() {
			break
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()

	m, _ := crashHistory(repack, nil)
	ctx := context.Background()
	manual := hlc.NewManualClock(int64(time.Hour))
	clock := hlc.NewClock(manual.UnixNano, 0)
	eng, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	cfg := Config{}
	if repack {
		cfg = Config{GCRepacker: toyRepacker{}, GCTTL: func([]byte) time.Duration { return time.Millisecond }}
	}
	s, err := Open(ctx, eng, clock, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := &env{t: t, s: s, eng: eng, clock: clock, manual: manual}
	th := e.threshold()
	if th.IsEmpty() {
		t.Logf("killed before the first GC batch applied")
	}
	rng := rand.New(rand.NewSource(int64(round)))
	for range 200 {
		ts := hlc.Timestamp{WallTime: int64(time.Second) + rng.Int63n(int64(5*time.Second))}
		got, err := e.scanAt(ctx, ts)
		want := m.read(ts)
		if repack {
			got, err = e.toyRowsAt(ctx, ts)
			want = m.toyRows(ts)
		}
		if ts.Less(th) {
			var bgc *kvpb.BatchTimestampBeforeGCError
			if !errors.As(err, &bgc) {
				t.Fatalf("read at %s below the threshold %s: %v, %v", ts, th, got, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("read at %s: %v", ts, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("read at %s (threshold %s) = %v, history says %v", ts, th, got, want)
		}
	}
	if !repack {
		return
	}
	// Collect everything: every row keeps one packed value.
	s.GCPass(ctx, true)
	if n := s.GCQueueStats().Repacked; n == 0 {
		t.Errorf("a GC past the whole history repacked no row")
	}
	end := hlc.Timestamp{WallTime: int64(2 * time.Hour)}
	got, err := e.toyRowsAt(ctx, end)
	if err != nil {
		t.Fatal(err)
	}
	if want := m.toyRows(end); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a full GC: %v, history says %v", got, want)
	}
	if raw, _ := e.scanAt(ctx, end); len(raw) != len(got) {
		t.Errorf("after a full GC %d keys remain for %d rows: %v", len(raw), len(got), raw)
	}
}
