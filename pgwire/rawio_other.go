//go:build !linux

package pgwire

import (
	"io"
	"net"
)

// socketWriter is nc itself on other platforms (see rawio_linux.go).
func socketWriter(nc net.Conn) io.Writer { return nc }

// socketReader is nc itself on other platforms (see rawio_linux.go).
func socketReader(nc net.Conn) io.Reader { return nc }
