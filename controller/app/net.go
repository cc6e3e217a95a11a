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
	if err != nil || port < 0 || port > 65535 {
		return "", 0, &net.AddrError{Err: "bad port", Addr: addr}
	}
	return host, port, nil
}
