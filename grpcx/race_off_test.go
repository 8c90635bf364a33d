//go:build !race

package grpcx

const raceEnabled = false
