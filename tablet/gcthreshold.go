package tablet

import (
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// The GC threshold: mvcc.GC removes versions that reads at or above the
// threshold cannot see, so the tablet must refuse reads below it and keep
// writes from landing at or below it (invariant 10). It is replicated
// tablet state, persisted with the GC batch that raises it, and one value
// per tablet: a GC of part of the span raises it for all of it, which
// refuses more reads than strictly needed but never too few.

func gcThresholdKey(id kvpb.TabletID) []byte {
	return keys.TabletReplicated(uint64(id), "gc-threshold")
}

// GCThresholdKey is where tablet id's GC threshold is stored, in its
// replicated state (a state timestamp: stateformat.go).
func GCThresholdKey(id kvpb.TabletID) []byte { return gcThresholdKey(id) }

// loadGCThreshold reads the persisted threshold of tablet id (zero if none).
func loadGCThreshold(r storage.Reader, id kvpb.TabletID) (hlc.Timestamp, error) {
	v, ok, err := r.Get(storage.MVCCKey{Key: gcThresholdKey(id)})
	if err != nil || !ok {
		return hlc.Timestamp{}, err
	}
	return decodeStateTS(fmt.Sprintf("tablet %d: the GC threshold", id), v)
}

// writeGCThreshold writes tablet id's GC threshold into w, in the format
// the cluster version allows (stateformat.go).
func (r *Replica) writeGCThreshold(w storage.Writer, id kvpb.TabletID, ts hlc.Timestamp) error {
	return w.Put(storage.MVCCKey{Key: gcThresholdKey(id)}, encodeStateTS(ts, r.versionedState()))
}

func (r *Replica) gcThreshold() hlc.Timestamp {
	return *r.gcView.Load()
}

// checkReadAboveGC refuses a read at ts below the GC threshold with a
// *kvpb.BatchTimestampBeforeGCError. A read at the threshold itself is
// served: mvcc.GC keeps, per key, the newest version at or below the
// threshold, which is what such a read sees (mvcc invariant 7).
func (ec *evalCtx) checkReadAboveGC(req kvpb.Request, ts hlc.Timestamp) error {
	if th := ec.r.gcThreshold(); ts.Less(th) {
		return &kvpb.BatchTimestampBeforeGCError{Timestamp: ts, Threshold: th,
			Msg: fmt.Sprintf("%s %s of %s", req.Method(), req.Span(), &ec.desc)}
	}
	return nil
}

// GCThreshold returns the tablet's GC threshold (zero: never collected):
// reads below it are refused, and no GC may lower it.
func (r *Replica) GCThreshold() hlc.Timestamp { return r.gcThreshold() }
