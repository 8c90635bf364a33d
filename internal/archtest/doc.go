// Package archtest holds no code: its tests check the import rules that
// docs/architecture.md states, reading the packages' import lists with
// go/build (the go command is not needed).
package archtest
