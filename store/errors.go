package store

import "errors"

var (
	// ErrNoTablet: the directory has no tablet for an addressable key,
	// which breaks invariant 2 and means the directory is damaged.
	ErrNoTablet = errors.New("store: no tablet holds the key")
	// ErrNotVoter: a lease was asked to go to a node that is not a voter
	// of the tablet, or may take no lease (kvpb.SpreadLeaseRequest.Node).
	ErrNotVoter = errors.New("store: the node may not take the lease")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store: closed")
	// ErrBadDirectory: the directory's descriptors overlap or leave gaps.
	ErrBadDirectory = errors.New("store: tablet directory does not tile the keyspace")
)
