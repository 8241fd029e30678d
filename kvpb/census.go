package kvpb

import "bytes"

// MergeCensus folds the census entries of more into into, one entry per
// owner: the lower MinVersion, and Values summed (a resumed census may
// count a value twice; Values is for reports, MinVersion for decisions,
// and a minimum is unchanged by counting a value again).
func MergeCensus(into []PackedCensus, more ...PackedCensus) []PackedCensus {
	for _, c := range more {
		i := 0
		for i < len(into) && !bytes.Equal(into[i].Owner, c.Owner) {
			i++
		}
		if i == len(into) {
			into = append(into, PackedCensus{Owner: bytes.Clone(c.Owner), MinVersion: c.MinVersion, Values: c.Values})
			continue
		}
		into[i].MinVersion = min(into[i].MinVersion, c.MinVersion)
		into[i].Values += c.Values
	}
	return into
}
