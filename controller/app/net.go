package app

import (
	"net"
	"strconv"
)

func splitHostPort(addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	// -1 asks the NATS server for a random port (tests).
	if err != nil || port < -1 || port > 65535 {
		return "", 0, &net.AddrError{Err: "bad port", Addr: addr}
	}
	return host, port, nil
}
