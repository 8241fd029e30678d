package storage

import (
	"reflect"
	"sync"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
)

// Memtables at full size from the start. Pebble sizes a store's first
// memtable at 256 KiB and doubles each next one up to Options.MemTableSize
// (a ramp meant for processes that open many small stores, its tests), and
// flushes only once the memtables queued behind the mutable one hold half
// of MemTableSize. So a node's first 32 MiB or so of writes sit in up to
// seven memtables, and every read seeks each one's skiplist: under
// pgbench at scale 1, which never writes that much, a prepared point
// SELECT's read went through six (bench/README.md, twenty-sixth session).
// A server opens one store and reserves MemTableSize for each of its
// memtables anyway (cairn start's --max-memory), so the ramp saves it
// nothing.
//
// Pebble reserves each memtable's size from the block cache, though, so a
// full memtable takes 64 MiB of the cache's blocks at once: all of the 64
// MiB cache an engine gets by default (tests, tools), whose reads then
// found no block cached (sql/exec's TestCountInOrderOnSeekingDisk). The
// ramp is skipped only with a cache of rampCacheMin or more (cairn start's
// default, --cache-mib 256); a smaller cache keeps Pebble's ramp, whose
// memtables reach full size, and reserve it, only after ~32 MiB of writes.
//
// Pebble has no option for the ramp; skipMemTableRamp sets the size its
// next memtable will have (DB.mu.mem.nextSize) to MemTableSize, under
// DB.mu as Pebble does, through reflection. It reports false, changing
// nothing, when this Pebble does not have that field as expected
// (TestSkipMemTableRamp fails then, so an upgrade that moves it is
// noticed). The store's first memtable, made by Open, keeps its 256 KiB.

// rampCacheMin is the smallest block cache with which Open skips the ramp:
// four full memtables.
const rampCacheMin = 4 * memTableSize

// skipMemTableRamp makes db's memtables after its first size full
// (see above).
func skipMemTableRamp(db *pebble.DB, size uint64) bool {
	mu := reflect.ValueOf(db).Elem().FieldByName("mu")
	if !mu.IsValid() || mu.Kind() != reflect.Struct {
		return false
	}
	lock, mem := mu.FieldByName("Mutex"), mu.FieldByName("mem")
	if !lock.IsValid() || lock.Type() != reflect.TypeFor[sync.Mutex]() || !mem.IsValid() || mem.Kind() != reflect.Struct {
		return false
	}
	next := mem.FieldByName("nextSize")
	if !next.IsValid() || next.Kind() != reflect.Uint64 {
		return false
	}
	m := (*sync.Mutex)(unsafe.Pointer(lock.UnsafeAddr()))
	p := (*uint64)(unsafe.Pointer(next.UnsafeAddr()))
	m.Lock()
	defer m.Unlock()
	if *p < size {
		*p = size
	}
	return true
}
