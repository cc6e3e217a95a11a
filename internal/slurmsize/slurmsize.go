// Package slurmsize reads memory sizes as Slurm writes and takes them:
// a whole number of megabytes, or with a K, M, G or T suffix (binary
// units, as Slurm uses them).
package slurmsize

import (
	"errors"
	"strconv"
	"strings"
)

// ErrSize is returned for anything that is not such a size.
var ErrSize = errors.New("not a memory size (want e.g. 16000, 512M, 16G)")

// MB is s in megabytes, a K size rounded up to a whole megabyte.
func MB(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, ErrSize
	}
	mult, div := uint64(1), uint64(1)
	switch s[len(s)-1] {
	case 'K', 'k':
		div, s = 1024, s[:len(s)-1]
	case 'M', 'm':
		s = s[:len(s)-1]
	case 'G', 'g':
		mult, s = 1024, s[:len(s)-1]
	case 'T', 't':
		mult, s = 1024*1024, s[:len(s)-1]
	}
	// 40 bits of megabytes (a zettabyte) keeps n*mult inside uint64.
	n, err := strconv.ParseUint(s, 10, 40)
	if err != nil {
		return 0, ErrSize
	}
	return (n*mult + div - 1) / div, nil
}
