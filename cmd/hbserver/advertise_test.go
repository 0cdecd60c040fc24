package main

import "testing"

// TestSelfAddr: the address a server checks router signatures against.
func TestSelfAddr(t *testing.T) {
	tests := []struct{ listen, advertise, want string }{
		{"127.0.0.1:8081", "", "127.0.0.1:8081"},
		{"10.0.0.5:8081", "", "10.0.0.5:8081"},
		{"[::1]:8081", "", "[::1]:8081"},
		{"0.0.0.0:8081", "", ""}, // a wildcard: the connection's local address
		{"[::]:8081", "", ""},
		{":8081", "", ""},
		{"0.0.0.0:8081", "a1.set-a.internal:8081", "a1.set-a.internal:8081"},
		{"127.0.0.1:8081", "10.0.0.5:18081", "10.0.0.5:18081"},
	}
	for _, tt := range tests {
		if got := selfAddr(tt.listen, tt.advertise); got != tt.want {
			t.Errorf("selfAddr(%q, %q) = %q, want %q", tt.listen, tt.advertise, got, tt.want)
		}
	}
}
