//go:build race

package server_test

// raceEnabled: the race detector's shadow memory is part of the RSS and is
// not given back with the heap, so RSS bounds do not apply.
const raceEnabled = true
