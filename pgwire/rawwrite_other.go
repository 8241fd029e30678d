//go:build !linux

package pgwire

import (
	"io"
	"net"
)

// socketWriter is nc itself on other platforms (see rawwrite_linux.go).
func socketWriter(nc net.Conn) io.Writer { return nc }
