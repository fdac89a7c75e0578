//go:build race

package raceguard_test

const raceOn = true
