//go:build !linux

package sqldb

import (
	"net"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist: the
// keepalive alone bounds the wait on a vanished server there.
func setUserTimeout(*net.TCPConn, time.Duration) error { return nil }
